"""The ``cells`` tool: the notebook's recently executed cells, their output and errors.

The tools layer does not know the kernel: the host puts a ``CellSource``
(anything with ``recent(last)`` returning ``CellLike`` records, see
``tools.cell_source``) in ``ctx.cell_history`` (the kernel's
``cell_history.CellHistory``). The tool only reads, so it never
asks for approval and runs in the ``read-only`` approval mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.ai.secrets import mask
from pi_kernel.tools.builtin.describe import clip, describe_limit
from pi_kernel.tools.builtin.secret_names import environment_secrets
from pi_kernel.tools.cell_source import CellLike
from pi_kernel.tools.definition import ToolContext, ToolDefinition

DEFAULT_LAST = 5
SOURCE_CHARS = 1500


class CellsParams(BaseModel):
    last: int = Field(default=DEFAULT_LAST, ge=1, le=50, description="How many of the most recent cells to show.")


def format_cell(record: CellLike, source_chars: int = SOURCE_CHARS, secrets: Sequence[str] | None = None) -> str:
    """One cell, each part masked before it is cut (a key cut in two would no longer be found)."""
    known = environment_secrets() if secrets is None else secrets
    label = f"[{record.execution_count}]" if record.execution_count is not None else "[ ]"
    lines = [f"In {label}:", clip(mask(record.source.rstrip(), known), source_chars)]
    if record.output:
        lines.append(f"Out {label}: {clip(mask(record.output, known), 500)}")
    if record.error is not None:
        lines.append(f"Error: {record.error.type}: {clip(mask(record.error.message, known), 500)}")
        if record.error.frames:
            lines.append("Traceback (last frames):\n" + clip(mask("".join(record.error.frames).rstrip(), known), 1200))
    return "\n".join(lines)


def format_cells(records: Sequence[CellLike], limit: int) -> str:
    if not records:
        return "No cells have run yet."
    secrets = environment_secrets()
    return clip("\n\n".join(format_cell(record, secrets=secrets) for record in records), limit)  # masked, then cut


def create_cells_tool() -> ToolDefinition:
    """The ``cells`` tool (read-only, runs without asking)."""

    def execute(
        tool_call_id: str,
        params: CellsParams,
        signal: AbortSignal | None,
        on_update: Callable[[AgentToolResult], None] | None,
        ctx: ToolContext,
    ) -> AgentToolResult:
        source = ctx.cell_history
        if source is None:
            raise ValueError("No cell history here: cells works inside a notebook kernel.")
        text = format_cells(source.recent(params.last), describe_limit(ctx))
        return AgentToolResult([TextContent(text)], details={"last": params.last})

    return ToolDefinition(
        name="cells",
        label="cells",
        description=(
            "The notebook's most recently executed cells, oldest first: execution count, source, a summary of the "
            "output, and for a cell that raised the exception type, message and last traceback frames."
        ),
        parameters=CellsParams,
        execute=execute,
        prompt_snippet="See the notebook's recent cells, their output and errors",
        prompt_guidelines=("Use cells to see what the user ran and why a cell failed (it needs no approval)",),
        approval="auto",
        read_only=True,
    )
