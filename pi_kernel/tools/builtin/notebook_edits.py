"""``edit_cell``, ``insert_cells``, ``delete_cells``: the agent changes the live notebook, each change a diff.

They need the notebook bridge (``ToolContext.notebook``); without one they answer one clear line and change
nothing. Each change is planned against the cells as read (``plan_*``), shown on the approval card as a
line-level diff of the cell (the plan is kept for the call) and applied with the source read as
``expected``: a cell the user changed meanwhile is refused as stale, never overwritten. The running
``%%pi`` cell cannot be edited or deleted. An applied change is recorded in ``ctx.journal`` (the turn's
undo journal) when there is one. ``edit_cell`` matches as the ``edit`` tool does (``edit_diff.apply_edits``).
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.tools.approval import PREVIEW_DIFF_CHARS, ApprovalPreview, SecretKind
from pi_kernel.tools.builtin.edit import ReplaceEdit
from pi_kernel.tools.builtin.edit_diff import EditError, apply_edits, normalize_to_lf
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.notebook_document import CellInfo, NotebookDocument, NotebookError, check_not_running, resolve_ref
from pi_kernel.tools.turn_journal import FIRST, NotebookChange

NEEDS_BRIDGE = (
    "{tool} needs the notebook bridge (JupyterLab 4 or Notebook 7 with pi-kernel's extension), which is not "
    "connected here; nothing was changed. Use python to compute, or %%pi --cells to propose code as a new cell."
)
INDEX_CHARS = 1
"""Source characters per cell read to resolve refs (the whole cells are read by id afterwards)."""
DIFF_CHARS = 200_000
"""A diff longer than this is kept as its head and tail (a 10 MB cell)."""
BATCH_CELLS = 50
"""Cells one insert_cells / delete_cells / run_cells call may change or run (a bigger batch is refused)."""
BRIDGE_TOOLS = ("edit_cell", "insert_cells", "run_cells", "delete_cells")
"""The tools that need the bridge: not offered while none is connected."""


def require_notebook(ctx: ToolContext, tool: str) -> NotebookDocument:
    if ctx.notebook is None:
        raise NotebookError(NEEDS_BRIDGE.format(tool=tool))
    return ctx.notebook


def check_batch(tool: str, cells: int, chars: int) -> None:
    """Refuse a batch the approval card could not show whole (``BATCH_CELLS``, ``PREVIEW_DIFF_CHARS``)."""
    if cells > BATCH_CELLS:
        raise NotebookError(f"{tool} takes at most {BATCH_CELLS} cells a call ({cells} given); nothing was changed.")
    if chars > PREVIEW_DIFF_CHARS:
        raise NotebookError(
            f"{tool}: the cells' {chars:,} characters are more than an approval card shows whole "
            f"({PREVIEW_DIFF_CHARS:,}); split the change into smaller calls. Nothing was changed."
        )


async def read_refs(
    document: NotebookDocument, refs: Sequence[str], batch: str | None = None
) -> tuple[list[CellInfo], list[CellInfo]]:
    """``(every cell, briefly; the cells ``refs`` name, whole)``; an unknown ref raises ``NoSuchCell``.
    ``batch`` (a tool's name): refuse, before reading them whole, more cells or characters than a card shows."""
    if batch is not None:
        check_batch(batch, len(set(refs)), 0)
    index = await document.read(max_chars=INDEX_CHARS)
    named = [resolve_ref(ref, index) for ref in refs]
    if batch is not None:
        check_batch(batch, len(named), sum({cell.id: cell.source_length for cell in named}.values()))
    ids = list(dict.fromkeys(cell.id for cell in named))
    whole = {cell.id: cell for cell in await document.read(ids)}
    missing = [cell.position for cell in named if cell.id not in whole]
    if missing:
        raise NotebookError(f"Cell(s) {', '.join(missing)} went away while being read; use cells to see the notebook.")
    return index, [whole[cell.id] for cell in named]


def cell_diff(before: str, after: str, title: str) -> str:
    """A unified, line-level diff of a cell's source (a new cell: all added; a deleted one: all removed)."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"{title} (before)", f"{title} (after)", n=3
    )
    marker = before.endswith("\n") != after.endswith("\n")  # a change to the final newline: git's marker shows it
    text = "".join(
        line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" if marker else line + "\n"
        for line in lines
    )
    if len(text) > DIFF_CHARS:
        half = DIFF_CHARS // 2
        text = f"{text[:half]}\n[… {len(text) - DIFF_CHARS:,} characters of the diff not shown …]\n{text[-half:]}"
    return text


@dataclass
class Plan:
    """A change computed against the cells as read; applied as is after approval."""

    title: str
    diff: str
    apply: Callable[[NotebookDocument, ToolContext], Awaitable[str]]
    highlight: str | None = None


_plans: dict[str, tuple[Any, Any]] = {}
"""What each approval card showed (a ``Plan``; the sources ``run_cells`` runs) with the arguments it was made
for, by tool call id, until the call runs (or is denied)."""
_MAX_PLANS = 64


def keep_plan(tool_call_id: str, args: Any, plan: Any) -> None:
    _plans[tool_call_id] = (args, plan)
    while len(_plans) > _MAX_PLANS:
        _plans.pop(next(iter(_plans)))


def take_plan(tool_call_id: str, args: Any, *, keep: bool = False) -> Any:
    """What the card showed for this call, if its arguments were not edited since (else None); ``keep``:
    left in place."""
    kept = _plans.get(tool_call_id) if keep else _plans.pop(tool_call_id, None)
    return kept[1] if kept is not None and kept[0] == args else None


def pin_cells(tool_call_id: str, args: Any, cells: Sequence[CellInfo]) -> None:
    """Pin the cells a call's refs named when it was judged (``run_cells``): it runs those, by id, or none."""
    keep_plan(tool_call_id, args, PinnedCells(tuple(cells)))


@dataclass(frozen=True)
class PinnedCells:
    """The cells a ``run_cells`` call was judged by (approval gate) or shown on its card (preview)."""

    cells: tuple[CellInfo, ...]

    def same(self, cells: Sequence[CellInfo]) -> bool:
        return [(cell.id, cell.source) for cell in self.cells] == [(cell.id, cell.source) for cell in cells]


def forget_plan(tool_call_id: str) -> None:
    _plans.pop(tool_call_id, None)


def checked_diff(diff: str) -> str:
    if len(diff) > PREVIEW_DIFF_CHARS:
        raise NotebookError(
            f"The change's diff is {len(diff):,} characters, more than an approval card shows whole "
            f"({PREVIEW_DIFF_CHARS:,}); make it in smaller steps. Nothing was changed."
        )
    return diff


def record(ctx: ToolContext, change: NotebookChange) -> None:
    if ctx.journal is not None:
        ctx.journal.record_notebook_change(change)


class EditCellParams(BaseModel):
    cell: str = Field(description='The cell: "#N" (its position, 1-based, as on screen) or its id.')
    edits: list[ReplaceEdit] | None = Field(
        default=None,
        description="Exact text replacements in the cell's source (each old_text must match exactly and once).",
    )
    source: str | None = Field(default=None, description="The cell's whole new source (instead of edits).")


async def plan_edit(params: EditCellParams, ctx: ToolContext) -> Plan:
    document = require_notebook(ctx, "edit_cell")
    if (params.edits is None) == (params.source is None):
        raise NotebookError('Give either "edits" (a list of {old_text, new_text}) or "source", not both or neither.')
    _, (cell,) = await read_refs(document, [params.cell])
    check_not_running(cell, document, "edited")
    before = cell.source
    if params.source is not None:
        after = normalize_to_lf(params.source)
        if after == before:
            raise NotebookError(f"Cell {cell.position} already has this source; nothing to change.")
    else:
        if not params.edits:
            raise NotebookError("edits must contain at least one replacement.")
        try:
            pairs = [(edit.old_text, edit.new_text) for edit in params.edits]
            after = apply_edits(before, pairs, f"cell {cell.position}")
        except EditError as error:
            raise NotebookError(f'{error} Use cells with {{"cell": "{cell.position}"}} to read it.') from None
    title = cell.title()

    async def apply(notebook: NotebookDocument, context: ToolContext) -> str:
        await notebook.edit(cell.id, before, after)
        record(context, NotebookChange("edit", cell.id, cell.index, cell.type, before, after))
        return f"Edited cell {cell.position} (id {cell.id})."

    return Plan(f"edit cell {title}", checked_diff(cell_diff(before, after, title)), apply, cell.id)


class NewCell(BaseModel):
    type: Literal["code", "markdown"] = Field(description="code or markdown")
    source: str = Field(description="The cell's source.")


class InsertCellsParams(BaseModel):
    after: str | None = Field(default=None, description='Insert after this cell ("#N" or id); omitted: at the end.')
    cells: list[NewCell] = Field(min_length=1, description="The new cells, in order.")


async def plan_insert(params: InsertCellsParams, ctx: ToolContext) -> Plan:
    document = require_notebook(ctx, "insert_cells")
    index = await document.read(max_chars=INDEX_CHARS)
    if params.after is not None:
        anchor = resolve_ref(params.after, index)
        at, where = anchor.index + 1, f"after {anchor.position}"
    else:
        anchor, at, where = None, len(index), "at the end"
    new: list[tuple[str, str]] = [(cell.type, normalize_to_lf(cell.source)) for cell in params.cells]
    check_batch("insert_cells", len(new), sum(len(text) for _, text in new))
    diffs = [cell_diff("", text, f"new cell #{at + offset + 1} ({kind})") for offset, (kind, text) in enumerate(new)]
    diff = checked_diff("".join(diffs))

    async def apply(notebook: NotebookDocument, context: ToolContext) -> str:
        at = await _insert_index(notebook, anchor)
        ids = await notebook.insert(at, new)
        for offset, (cell_id, (kind, source)) in enumerate(zip(ids, new, strict=False)):
            record(context, NotebookChange("insert", cell_id, at + offset, kind, None, source))
        shown = ", ".join(f"#{at + offset + 1} (id {cell_id})" for offset, cell_id in enumerate(ids))
        placed = where if anchor is None or at == anchor.index + 1 else f"after {anchor.id} (now #{at})"
        return f"Inserted {len(ids)} cell(s) {placed}: {shown}."

    title = f"insert {len(new)} cell(s) {where}"
    return Plan(title, diff, apply, anchor.id if anchor is not None else None)


async def _insert_index(notebook: NotebookDocument, anchor: CellInfo | None) -> int:
    """Where the new cells go now: after the anchor cell wherever it is (the user may have added or moved
    cells while the card waited), or at the end; the anchor gone refuses the insert."""
    cells = await notebook.read(max_chars=0)
    if anchor is None:
        return len(cells)
    for cell in cells:
        if cell.id == anchor.id:
            return cell.index + 1
    raise NotebookError(
        f"The cell to insert after ({anchor.position}, id {anchor.id}) was deleted meanwhile; nothing was "
        "inserted. Use cells to see the notebook."
    )


class DeleteCellsParams(BaseModel):
    cells: list[str] = Field(min_length=1, description='The cells to delete: "#N" or ids.')


async def plan_delete(params: DeleteCellsParams, ctx: ToolContext) -> Plan:
    document = require_notebook(ctx, "delete_cells")
    index, cells = await read_refs(document, params.cells, batch="delete_cells")
    cells = list({cell.id: cell for cell in cells}.values())
    for cell in cells:
        check_not_running(cell, document, "deleted")
    diff = checked_diff("".join(cell_diff(cell.source, "", cell.title()) for cell in cells))

    async def apply(notebook: NotebookDocument, context: ToolContext) -> str:
        await notebook.delete([cell.id for cell in cells], [cell.source for cell in cells])
        for cell in sorted(cells, key=lambda c: c.index, reverse=True):  # undone lowest first, each after its neighbour
            neighbour = index[cell.index - 1].id if 0 < cell.index <= len(index) else FIRST
            record(context, NotebookChange("delete", cell.id, cell.index, cell.type, cell.source, None, neighbour))
        return f"Deleted {len(cells)} cell(s): {', '.join(cell.position for cell in cells)}."

    title = "delete " + ", ".join(cell.title() for cell in cells)
    return Plan(title, diff, apply, cells[0].id)


Planner = Callable[[Any, ToolContext], Awaitable[Plan]]


def _notebook_tool(
    name: str,
    description: str,
    params: type[BaseModel],
    planner: Planner,
    snippet: str,
    secret_arguments: Mapping[str, SecretKind] | None = None,
) -> ToolDefinition:
    async def preview(tool_call_id: str, args: Any, ctx: ToolContext) -> ApprovalPreview:
        plan = await planner(args, ctx)
        keep_plan(tool_call_id, args, plan)
        return ApprovalPreview(plan.title, plan.diff, plan.highlight)

    async def execute(
        tool_call_id: str, args: Any, signal: AbortSignal | None, on_update: Any, ctx: ToolContext
    ) -> AgentToolResult:
        document = require_notebook(ctx, name)
        plan = take_plan(tool_call_id, args) or await planner(args, ctx)
        text = await plan.apply(document, ctx)
        return AgentToolResult([TextContent(text)], details={"diff": plan.diff, "title": plan.title})

    return ToolDefinition(
        origin="builtin",
        name=name,
        description=description,
        parameters=params,
        execute=execute,
        prompt_snippet=snippet,
        approval="ask",
        approval_preview=preview,
        forget_preview=forget_plan,
        secret_arguments=secret_arguments,  # code written into cells is scanned like python's: run_cells runs it
    )


def create_edit_cell_tool() -> ToolDefinition:
    return _notebook_tool(
        "edit_cell",
        "Change a notebook cell's source in place, in the live notebook. Either edits (exact text replacements: "
        "each old_text must match the cell exactly and once, like the edit tool) or source (the whole new source). "
        'Refer to the cell as "#N" (position, 1-based) or by id; read it first with cells.',
        EditCellParams,
        plan_edit,
        "Edit a notebook cell in place (exact replacements or a new source)",
        {"cell": "path", "source": "code", "edits": "code"},
    )


def create_insert_cells_tool() -> ToolDefinition:
    return _notebook_tool(
        "insert_cells",
        'Insert new code or markdown cells into the live notebook, after a cell ("#N" or id) or at the end.',
        InsertCellsParams,
        plan_insert,
        "Insert new code or markdown cells into the notebook",
        {"after": "path", "cells": "code"},
    )


def create_delete_cells_tool() -> ToolDefinition:
    return _notebook_tool(
        "delete_cells",
        'Delete cells from the live notebook ("#N" or ids). The %%pi cell running now cannot be deleted.',
        DeleteCellsParams,
        plan_delete,
        "Delete notebook cells",
    )
