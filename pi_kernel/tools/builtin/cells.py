"""The ``cells`` tool: the notebook document when a front-end bridge is connected, else the recent cells.

With the bridge (``ToolContext.notebook``) it lists the notebook's cells in order, each with its position
``#N`` and id, its type, execution count, the start of its source and a summary of its outputs, bounded to
about ``LIST_CHARS`` whatever the notebook's size: a notebook too long for that is shown as a window (around
the running ``%%pi`` cell, or from ``start``). ``{"cell": ref}`` gives one cell whole.

Without it, the recent cells of ``ctx.cell_history`` (the kernel's ``notebook_context.CellHistory``).
The tool only reads, so it never asks for approval and runs in the ``read-only`` approval mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.tools.builtin.describe import clip, describe_limit
from pi_kernel.tools.builtin.notebook_edits import read_refs
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.notebook_document import CellInfo, CellLike, NotebookDocument
from pi_kernel.tools.paths import cut, environment_secrets

DEFAULT_LAST = 5
SOURCE_CHARS = 1500
LIST_CHARS = 8000
"""About how much a listing of the notebook document shows."""
LIST_SOURCE_CHARS = 160
LIST_OUTPUT_CHARS = 100
CELL_CHARS = 50_000
"""One cell asked for by ref is shown whole up to this (then its head and tail)."""


class CellsParams(BaseModel):
    last: int = Field(default=DEFAULT_LAST, ge=1, le=50, description="How many of the most recent cells to show.")
    cell: str | None = Field(
        default=None, description='One cell to show whole: "#N" (position, 1-based) or its id (live notebook only).'
    )
    start: int | None = Field(
        default=None,
        ge=1,
        description="List the notebook from cell #start (live notebook only; default: all, or "
        "a window around the running cell when it is long).",
    )


def format_cell(record: CellLike, source_chars: int = SOURCE_CHARS, secrets: Sequence[str] | None = None) -> str:
    """One cell, each part cut never inside a key (``clip``: masked as the result enters the transcript)."""
    known = environment_secrets() if secrets is None else secrets
    label = f"[{record.execution_count}]" if record.execution_count is not None else "[ ]"
    lines = [f"In {label}:", clip(record.source.rstrip(), source_chars, known)]
    if record.output:
        lines.append(f"Out {label}: {clip(record.output, 500, known)}")
    if record.error is not None:
        lines.append(f"Error: {record.error.type}: {clip(record.error.message, 500, known)}")
        if record.error.frames:
            lines.append("Traceback (last frames):\n" + clip("".join(record.error.frames).rstrip(), 1200, known))
    return "\n".join(lines)


def format_cells(records: Sequence[CellLike], limit: int) -> str:
    if not records:
        return "No cells have run yet."
    secrets = environment_secrets()
    return clip("\n\n".join(format_cell(record, secrets=secrets) for record in records), limit, secrets)


def create_cells_tool() -> ToolDefinition:

    async def execute(
        tool_call_id: str, params: CellsParams, signal: AbortSignal | None, on_update: Any, ctx: ToolContext
    ) -> AgentToolResult:
        if ctx.notebook is not None:
            return await document_cells(ctx.notebook, params)
        if params.cell is not None or params.start is not None:
            raise ValueError(
                "cell and start need the notebook bridge (JupyterLab 4 / Notebook 7 with pi-kernel's extension), "
                "which is not connected; without it cells shows the recently executed cells (last)."
            )
        source = ctx.cell_history
        if source is None:
            raise ValueError("No cell history here: cells works inside a notebook kernel.")
        text = format_cells(source.recent(params.last), describe_limit(ctx))
        return AgentToolResult([TextContent(text)], details={"last": params.last})

    return ToolDefinition(
        origin="builtin",
        name="cells",
        label="cells",
        description=(
            "The notebook's cells. In a live notebook: every cell in order with its position #N, id, type, "
            'execution count, the start of its source and a summary of its outputs; {"cell": "#N"} shows one cell '
            "whole. Elsewhere: the most recently executed cells, oldest first, with a summary of the output and, "
            "for a cell that raised, the exception and last traceback frames."
        ),
        parameters=CellsParams,
        execute=execute,
        prompt_snippet="See the notebook's recent cells, their output and errors",
        prompt_guidelines=("Use cells to see what the user ran and why a cell failed (it needs no approval)",),
        approval="auto",
        read_only=True,
    )


def _one_line(text: str, limit: int, secrets: Sequence[str]) -> str:
    flat = " ⏎ ".join(line.rstrip() for line in text.strip().splitlines())
    return flat if len(flat) <= limit else cut(flat, limit - 1, secrets) + "…"


def list_entry(cell: CellInfo, running: str | None, secrets: Sequence[str]) -> str:
    """One cell of a listing: a header line, the start of its source, a summary of its outputs."""
    count = f" [{cell.execution_count}]" if cell.execution_count is not None else ""
    mark = "  ← the %%pi cell running now" if cell.id == running else ""
    lines = [f"{cell.position} id={cell.id} {cell.type}{count} ({cell.source_length:,} chars){mark}"]
    if cell.source.strip():
        lines.append("  " + _one_line(cell.source, LIST_SOURCE_CHARS, secrets))
    if cell.outputs.strip():
        lines.append("  → " + _one_line(cell.outputs, LIST_OUTPUT_CHARS, secrets))
    return "\n".join(lines)


def format_listing(cells: Sequence[CellInfo], running: str | None, start: int | None, limit: int = LIST_CHARS) -> str:
    """The notebook's cells within about ``limit`` characters: all, or a window (see the module docstring)."""
    if not cells:
        return "The notebook has no cells."
    secrets = environment_secrets()
    entries = [list_entry(cell, running, secrets) for cell in cells]
    total = len(cells)
    sizes = [len(entry) + 1 for entry in entries]
    if start is not None:
        first = min(start, total) - 1
    elif sum(sizes) <= limit:
        first = 0
    else:  # around the running cell (what the user works on), else the end
        first = next((cell.index for cell in cells if cell.id == running), total - 1)
        used = sizes[first]
        while first > 0 and used + sizes[first - 1] <= limit * 2 // 3:
            first -= 1
            used += sizes[first]
    last, used = first, sizes[first]
    while last < total - 1 and used + sizes[last + 1] <= limit:
        last += 1
        used += sizes[last]
    while start is None and last == total - 1 and first > 0 and used + sizes[first - 1] <= limit:
        first -= 1  # the window reached the end: fill the room left with the cells before it
        used += sizes[first]
    shown = entries[first : last + 1]
    header = f"Notebook: {total} cell(s)"
    if first > 0 or last < total - 1:
        header += (
            f'; showing #{first + 1} to #{last + 1} (cells {{"start": N}} lists from #N, {{"cell": "#N"}} '
            "shows one whole)"
        )
    return header + ".\n\n" + "\n".join(shown)


def format_whole(cell: CellInfo, running: str | None) -> str:
    secrets = environment_secrets()
    head = list_entry(cell, running, secrets).splitlines()[0]
    source = clip(cell.source, CELL_CHARS, secrets)
    outputs = f"\nOutputs: {cell.outputs}" if cell.outputs.strip() else ""
    return f"{head}\n```\n{source}\n```{outputs}"


async def document_cells(document: NotebookDocument, params: CellsParams) -> AgentToolResult:
    running = document.running_cell_id
    if params.cell is not None:
        _, (cell,) = await read_refs(document, [params.cell])
        return AgentToolResult([TextContent(format_whole(cell, running))], details={"cell": cell.id})
    cells = await document.read(max_chars=LIST_SOURCE_CHARS)
    text = format_listing(cells, running, params.start)
    return AgentToolResult([TextContent(text)], details={"cells": len(cells)})
