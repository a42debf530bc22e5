"""``run_cells``: run notebook cells in the kernel, their outputs shown in those cells, as if the user ran them.

The front-end cannot run a cell while the ``%%pi`` cell executes (the run would queue behind it), so the
tool runs each cell's code itself, as ``python`` does (``run_notebook_cell``), sends its outputs to the cell
(``set_outputs``) and stops at the first cell that raises, as "run all" does. IPython syntax is transformed
as the approval judged it (``paths.ipython_transformed``). Not run: markdown cells, a ``%%pi`` cell (another
turn), a cell running a ``%pi`` command (``%pi approve auto`` would let the agent approve itself;
``runs_pi_magic``). What runs is what was approved: the approval gate pins the cells' ids and sources when
the call is judged (``pin_cells``), the card must show those same cells, and the call runs exactly them,
by id, or is refused as stale (a cell inserted above never shifts ``#2`` onto unjudged code).

The outputs carry the ``%%pi`` cell's own execution count (``_running_count``), so the shell's counter,
``In`` and the history stay as the user's own runs left them (``In[n]`` keeps matching the prompts).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from pydantic import BaseModel, Field

from pi_kernel.agent import OPERATION_ABORTED
from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.tools.approval import ApprovalPreview
from pi_kernel.tools.builtin.describe import clip
from pi_kernel.tools.builtin.notebook_edits import (
    PinnedCells,
    forget_plan,
    pin_cells,
    read_refs,
    require_notebook,
    take_plan,
)
from pi_kernel.tools.builtin.python import run_agent_code, run_notebook_cell
from pi_kernel.tools.builtin.python_capture import current_shell
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.notebook_document import STALE_TEXT, CellInfo, NotebookError, StaleCell
from pi_kernel.tools.paths import ipython_transformed

CELL_TEXT_CHARS = 4000
"""Output text per cell given to the model (its head and tail)."""


class RunCellsParams(BaseModel):
    cells: list[str] = Field(min_length=1, description='The cells to run, in this order: "#N" (position) or ids.')


PI_MAGIC_LINE = re.compile(r"^[ \t]*%{1,2}pi(?![\w.])", re.MULTILINE)
PI_MAGIC_CALL = re.compile(r"""run_(?:line|cell)_magic\(\s*(?:magic_name\s*=\s*)?['"]pi['"]""")


def runs_pi_magic(source: str, transformed: str) -> bool:
    """Whether a cell runs ``%pi`` / ``%%pi`` (as a line anywhere, also in the body of another cell magic
    such as ``%%time``, or as the shell's transformed call, ``x = %pi ...`` and automagic ``pi ...`` too)."""
    return bool(PI_MAGIC_LINE.search(source) or PI_MAGIC_CALL.search(transformed))


def _running_count() -> int | None:
    """The execution count of the cell running now (the ``%%pi`` cell): IPython moved its counter on when
    that cell started. The counter itself is not touched (see the module docstring)."""
    shell = current_shell()
    count = getattr(shell, "execution_count", None) if shell is not None else None
    return count - 1 if isinstance(count, int) and count > 1 else None


def code_preview(cells: list[CellInfo]) -> ApprovalPreview:
    """The code that will run, cell by cell, as the card shows it."""
    parts = []
    for cell in cells:
        lines = "".join(f" {line}\n" for line in cell.source.splitlines())
        parts.append(f"@@ {cell.title()} @@\n{lines}")
    titles = ", ".join(cell.title() for cell in cells)
    return ApprovalPreview(f"run {titles}", "".join(parts), cells[0].id if cells else None)


async def _pinned_now(document: Any, pinned: PinnedCells) -> list[CellInfo]:
    """The pinned cells as the notebook holds them now (their positions may have moved); ``StaleCell`` if one
    went away or changed since it was judged or shown."""
    ids = list(dict.fromkeys(cell.id for cell in pinned.cells))
    try:
        now = {cell.id: cell for cell in await document.read(ids)}
    except NotebookError as error:
        raise StaleCell(f"{STALE_TEXT} ({error})") from error
    cells = [now.get(cell.id) for cell in pinned.cells]
    found = [cell for cell in cells if cell is not None]
    if len(found) != len(cells) or not pinned.same(found):
        raise StaleCell(STALE_TEXT)
    return found


def create_run_cells_tool() -> ToolDefinition:
    async def preview(tool_call_id: str, params: RunCellsParams, ctx: ToolContext) -> ApprovalPreview:
        _, cells = await read_refs(require_notebook(ctx, "run_cells"), params.cells, batch="run_cells")
        judged = take_plan(tool_call_id, params, keep=True)
        if isinstance(judged, PinnedCells) and not judged.same(cells):  # the refs name other cells than judged
            raise StaleCell(STALE_TEXT)
        pin_cells(tool_call_id, params, cells)
        return code_preview(cells)

    async def execute(
        tool_call_id: str, params: RunCellsParams, signal: AbortSignal | None, on_update: Any, ctx: ToolContext
    ) -> AgentToolResult:
        document = require_notebook(ctx, "run_cells")
        namespace = ctx.namespace if ctx.namespace is not None else {"__name__": "__main__"}
        pinned = take_plan(tool_call_id, params)
        if isinstance(pinned, PinnedCells):  # judged (and shown): run exactly those cells, unchanged, or none
            cells = await _pinned_now(document, pinned)
        else:  # never judged nor shown (no approval gate): the refs as they name cells now
            _, cells = await read_refs(document, params.cells)
        reports: list[str] = []
        failed = False
        for cell in cells:
            if signal is not None and signal.aborted:
                raise RuntimeError(OPERATION_ABORTED)
            if cell.type != "code":
                reports.append(f"{cell.position}: {cell.type} cell, not run.")
                continue
            if cell.id == document.running_cell_id or cell.source.lstrip().startswith("%%pi"):
                reports.append(f"{cell.position}: a %%pi cell, not run (it would start another agent turn).")
                continue
            code = ipython_transformed(cell.source)
            if runs_pi_magic(cell.source, code):
                reports.append(
                    f"{cell.position}: runs a %pi command, not run (%pi commands change the agent's settings "
                    "and conversation; only the user runs them)."
                )
                continue
            run = functools.partial(run_notebook_cell, code, namespace, signal=signal, journal=ctx.journal)
            outputs, text, error = await run_agent_code(run, signal, ctx)
            try:
                await document.set_outputs(cell.id, outputs, _running_count())
                shown = ""
            except NotebookError as problem:
                shown = f" (its outputs could not be shown in the notebook: {problem})"
            head = f"{cell.position}{shown}"
            if error is not None:
                reports.append(f"{head} raised {error['ename']}:\n{clip(text, CELL_TEXT_CHARS)}")
                failed = True
                break
            reports.append(f"{head} ran" + (f":\n{clip(text, CELL_TEXT_CHARS)}" if text.strip() else " (no output)."))
        left = len(cells) - len(reports)
        if failed and left:
            reports.append(f"Stopped at the error; {left} cell(s) not run.")
        report = "\n\n".join(reports)
        if failed:
            raise RuntimeError(report)
        return AgentToolResult([TextContent(report)], details={"cells": [cell.id for cell in cells]})

    return ToolDefinition(
        origin="builtin",
        name="run_cells",
        description=(
            'Run notebook cells ("#N" or ids, in the order given) in the kernel, like the user running them: '
            "variables are shared, the outputs appear in those cells, and you get their output and errors. "
            "Stops at the first error."
        ),
        parameters=RunCellsParams,
        execute=execute,
        prompt_snippet="Run notebook cells; their outputs show in the notebook",
        approval="ask",
        approval_preview=preview,
        forget_preview=forget_plan,
        secret_arguments={"cells": "cells"},  # the cells' code is judged as python's (approval.secret_reason)
    )
