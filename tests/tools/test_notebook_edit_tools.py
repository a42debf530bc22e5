"""The notebook tools against an in-memory ``NotebookDocument``: refs, diffs, bounds, stale and gone bridges.

``MemoryNotebook`` implements the protocol the way the front-end does (stale
checks included), so the tools' own logic is tested without a kernel; the
comm itself is tested in tests/kernel/test_notebook_bridge.py.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.tools.builtin import builtin_tools
from pi_kernel.tools.builtin.cells import LIST_CHARS, CellsParams, document_cells
from pi_kernel.tools.builtin.notebook_edits import (
    DeleteCellsParams,
    EditCellParams,
    InsertCellsParams,
    NewCell,
    cell_diff,
    plan_delete,
    plan_edit,
    plan_insert,
)
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.notebook_document import (
    BridgeGone,
    CellInfo,
    NoSuchCell,
    NotebookError,
    StaleCell,
    resolve_ref,
)


class MemoryNotebook:
    """``NotebookDocument`` over a list of ``[id, type, source]`` (what the front-end does, in memory)."""

    def __init__(self, sources: list[str], running: int | None = None) -> None:
        self.cells = [[uuid.uuid4().hex[:8], "code", source] for source in sources]
        self.running_cell_id = self.cells[running][0] if running is not None else None
        self.gone = False
        self.reads = 0

    def _check(self) -> None:
        if self.gone:
            raise BridgeGone("The notebook front-end disconnected before answering; nothing was changed.")

    async def read(self, cell_ids: list[str] | None = None, max_chars: int | None = None) -> list[CellInfo]:
        self._check()
        self.reads += 1
        out = []
        for index, (cell_id, kind, source) in enumerate(self.cells):
            if cell_ids is not None and cell_id not in cell_ids:
                continue
            shown = source[:max_chars] if max_chars is not None else source
            out.append(CellInfo(cell_id, index, kind, shown, None, "", len(source), len(shown) < len(source)))
        return out

    def _find(self, cell_id: str) -> list[Any]:
        for cell in self.cells:
            if cell[0] == cell_id:
                return cell
        raise NoSuchCell(f"No cell with id {cell_id!r}.")

    async def edit(self, cell_id: str, expected: str, new: str) -> None:
        self._check()
        cell = self._find(cell_id)
        if cell[2] != expected:
            raise StaleCell("stale")
        cell[2] = new

    async def insert(self, index: int, cells: list[tuple[str, str]]) -> list[str]:
        self._check()
        made = [[uuid.uuid4().hex[:8], kind, source] for kind, source in cells]
        self.cells[index:index] = made
        return [cell[0] for cell in made]

    async def delete(self, cell_ids: list[str], expected: list[str]) -> None:
        self._check()
        for cell_id, source in zip(cell_ids, expected, strict=True):
            if self._find(cell_id)[2] != source:
                raise StaleCell("stale")
        self.cells = [cell for cell in self.cells if cell[0] not in cell_ids]

    async def set_outputs(self, cell_id: str, outputs: list[dict], execution_count: int | None) -> None:  # type: ignore[type-arg]
        self._check()

    async def highlight(self, cell_id: str | None) -> None:
        self._check()


def tool(name: str) -> ToolDefinition:
    return next(definition for definition in builtin_tools(names=[name]))


def call(name: str, params: Any, ctx: ToolContext, call_id: str = "c1") -> AgentToolResult:
    result = tool(name).execute(call_id, params, None, None, ctx)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def sources(document: MemoryNotebook) -> list[str]:
    return [cell[2] for cell in document.cells]


def test_refs_by_position_and_id_and_clear_errors() -> None:
    cells = asyncio.run(MemoryNotebook(["a", "b", "c"]).read())
    assert resolve_ref("#2", cells).source == "b"
    assert resolve_ref(" # 3 ", cells).source == "c"
    assert resolve_ref(cells[0].id, cells).source == "a"
    with pytest.raises(NoSuchCell, match=r"No cell #4: the notebook has 3 cell\(s\), #1 to #3"):
        resolve_ref("#4", cells)
    with pytest.raises(NoSuchCell, match=r"No cell #0"):
        resolve_ref("#0", cells)
    with pytest.raises(NoSuchCell, match=r'No cell with id "nope"\. Refer to a cell as #N'):
        resolve_ref("nope", cells)
    with pytest.raises(NoSuchCell, match="the notebook has no cells"):
        resolve_ref("#1", [])


def test_refs_take_ascii_digits_an_exact_id_first_and_refuse_a_shared_id() -> None:
    """``#٣`` (Arabic-Indic three) is not ``#3``; a cell whose id is literally ``#3`` is named by it; an id
    two cells share (a front-end's duplicate) names neither, by id or by position."""
    notebook = MemoryNotebook(["a", "b", "c", "d"])
    cells = asyncio.run(notebook.read())
    with pytest.raises(NoSuchCell, match='No cell with id "#٣"'):
        resolve_ref("#٣", cells)
    notebook.cells[0][0] = "#3"
    cells = asyncio.run(notebook.read())
    assert resolve_ref("#3", cells).source == "a"  # the exact id, not the third cell
    assert resolve_ref("#2", cells).source == "b"
    notebook.cells[2][0] = notebook.cells[3][0] = "same"
    cells = asyncio.run(notebook.read())
    with pytest.raises(NoSuchCell, match=r'2 cells have the id "same" \(#3, #4\), so it names no single cell'):
        resolve_ref("same", cells)
    with pytest.raises(NoSuchCell, match="Cell #4 shares its id with #3"):
        resolve_ref("#4", cells)


def test_cell_diff_is_line_level_with_added_and_removed_lines() -> None:
    diff = cell_diff("a = 1\nb = 2\n", "a = 1\nb = 3\n", "#2 (code) a = 1")
    assert "-b = 2\n" in diff and "+b = 3\n" in diff and " a = 1\n" in diff
    assert diff.startswith("--- #2 (code) a = 1 (before)\n+++ #2 (code) a = 1 (after)\n")
    new = cell_diff("", "x\ny", "new")
    assert [line for line in new.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")] == ["+x", "+y"]
    huge = cell_diff("", "line\n" * 3_000_000, "big")
    assert len(huge) < 210_000 and "characters of the diff not shown" in huge


def test_edit_cell_uses_the_edit_tools_matching_and_errors() -> None:
    document = MemoryNotebook(["x = 1\ny = x +* 2", "%%pi\nfix it"], running=1)
    ctx = ToolContext(notebook=document)
    plan = asyncio.run(plan_edit(EditCellParams(cell="#1", edits=[{"old_text": "+*", "new_text": "*"}]), ctx))
    assert plan.title == "edit cell #1 (code) x = 1" and "+y = x * 2" in plan.diff
    with pytest.raises(
        NotebookError, match=r"Could not find the exact text in cell #1.*cells with \{\"cell\": \"#1\"\}"
    ):
        asyncio.run(plan_edit(EditCellParams(cell="#1", edits=[{"old_text": "zzz", "new_text": "q"}]), ctx))
    with pytest.raises(NotebookError, match="Found 2 occurrences"):
        asyncio.run(plan_edit(EditCellParams(cell="#1", edits=[{"old_text": "x", "new_text": "q"}]), ctx))
    with pytest.raises(NotebookError, match='Give either "edits"'):
        asyncio.run(plan_edit(EditCellParams(cell="#1"), ctx))
    with pytest.raises(NotebookError, match="running this turn; it cannot be edited"):
        asyncio.run(plan_edit(EditCellParams(cell="#2", source="print(1)"), ctx))
    result = call("edit_cell", EditCellParams(cell="#1", source="x = 2"), ctx)
    assert sources(document) == ["x = 2", "%%pi\nfix it"]
    assert "Edited cell #1" in result.content[0].text and "+x = 2" in result.details["diff"]


def test_a_planned_change_applies_against_what_was_shown_and_refuses_a_stale_cell() -> None:
    document = MemoryNotebook(["a = 1", "b = 2"])
    ctx = ToolContext(notebook=document)
    edit = tool("edit_cell")
    params = EditCellParams(cell="#2", source="b = 3")
    assert edit.approval_preview is not None
    preview = asyncio.run(edit.approval_preview("call-stale", params, ctx))
    assert preview is not None and preview.cell_id == document.cells[1][0] and "-b = 2" in preview.diff
    document.cells[1][2] = "b = 20  # typed by the user while the card waited"
    with pytest.raises(StaleCell):
        call("edit_cell", params, ctx, "call-stale")
    assert sources(document) == ["a = 1", "b = 20  # typed by the user while the card waited"]


def test_insert_and_delete_plans_show_new_cells_as_added_and_deleted_as_removed() -> None:
    document = MemoryNotebook(["a = 1", "b = 2", "c = 3"])
    ctx = ToolContext(notebook=document)
    plan = asyncio.run(plan_insert(InsertCellsParams(after="#1", cells=[NewCell(type="markdown", source="# T")]), ctx))
    assert plan.title == "insert 1 cell(s) after #1" and "+# T" in plan.diff and "new cell #2 (markdown)" in plan.diff
    result = call("insert_cells", InsertCellsParams(cells=[NewCell(type="code", source="d = 4")]), ctx)
    assert sources(document)[-1] == "d = 4" and "at the end: #4" in result.content[0].text
    gone = asyncio.run(plan_delete(DeleteCellsParams(cells=["#2", "#2"]), ctx))
    assert "-b = 2" in gone.diff and gone.title == "delete #2 (code) b = 2"
    call("delete_cells", DeleteCellsParams(cells=["#2", "#3"]), ctx)
    assert sources(document) == ["a = 1", "d = 4"]


def test_a_gone_bridge_fails_the_call_and_changes_nothing() -> None:
    document = MemoryNotebook(["a = 1"])
    ctx = ToolContext(notebook=document)
    document.gone = True
    with pytest.raises(BridgeGone, match="nothing was changed"):
        call("edit_cell", EditCellParams(cell="#1", source="a = 2"), ctx)
    assert sources(document) == ["a = 1"]


def test_without_a_notebook_the_tools_answer_one_clear_line() -> None:
    ctx = ToolContext()
    for name, params in (
        ("edit_cell", EditCellParams(cell="#1", source="x")),
        ("insert_cells", InsertCellsParams(cells=[NewCell(type="code", source="x")])),
        ("delete_cells", DeleteCellsParams(cells=["#1"])),
    ):
        with pytest.raises(NotebookError, match=f"^{name} needs the notebook bridge .* nothing was changed"):
            call(name, params, ctx)
    with pytest.raises(ValueError, match="cell and start need the notebook bridge"):
        call("cells", CellsParams(cell="#1"), ToolContext())


def test_a_500_cell_listing_is_bounded_and_names_every_shown_cell() -> None:
    document = MemoryNotebook([f"import numpy as np\nvalue_{i} = np.arange({i})" for i in range(500)], running=250)
    result = asyncio.run(document_cells(document, CellsParams()))
    text = result.content[0].text
    assert len(text) <= LIST_CHARS + 300
    assert "Notebook: 500 cell(s); showing #" in text and "#251 id=" in text and "running now" in text
    one = asyncio.run(document_cells(document, CellsParams(cell="#7")))
    assert "value_6 = np.arange(6)" in one.content[0].text


def test_run_cells_card_shows_the_code_and_a_cell_changed_meanwhile_does_not_run() -> None:
    from pi_kernel.tools.builtin.run_cells import RunCellsParams

    document = MemoryNotebook(["ran = 'approved'", "x = 1"])
    namespace: dict[str, Any] = {}
    ctx = ToolContext(notebook=document, namespace=namespace)
    run = tool("run_cells")
    params = RunCellsParams(cells=["#1"])
    assert run.approval_preview is not None
    preview = asyncio.run(run.approval_preview("call-run", params, ctx))
    assert preview is not None and " ran = 'approved'" in preview.diff and preview.title.startswith("run #1 (code)")
    document.cells[0][2] = "ran = 'something else'"
    with pytest.raises(StaleCell):
        call("run_cells", params, ctx, "call-run")
    assert "ran" not in namespace
    result = call("run_cells", params, ctx, "call-again")  # read afresh, no card: runs what is there now
    assert namespace["ran"] == "something else" and "#1" in result.content[0].text


def test_an_insert_goes_after_its_anchor_where_it_is_when_applied_and_undo_puts_a_deleted_cell_back_by_it() -> None:
    from pi_kernel.tools.turn_journal import TurnJournal

    document = MemoryNotebook(["a = 1", "b = 2", "c = 3"])
    anchor = document.cells[1][0]
    ctx = ToolContext(notebook=document)
    insert = tool("insert_cells")
    params = InsertCellsParams(after=anchor, cells=[NewCell(type="code", source="new = 1")])
    assert insert.approval_preview is not None
    asyncio.run(insert.approval_preview("call-insert", params, ctx))
    document.cells[0:0] = [["u1", "code", "mine"], ["u2", "code", "mine too"]]  # while the card waited
    result = call("insert_cells", params, ctx, "call-insert")
    assert sources(document) == ["mine", "mine too", "a = 1", "b = 2", "new = 1", "c = 3"]
    assert f"after {anchor} (now #4): #5" in result.content[0].text
    journal = TurnJournal()
    ctx = ToolContext(notebook=document, journal=journal)
    call("delete_cells", DeleteCellsParams(cells=["#5"]), ctx)  # "new = 1", after b
    document.cells[0:0] = [["u3", "code", "more"]]
    asyncio.run(journal.revert_notebook(document, journal.revert(None)))
    assert sources(document) == ["more", "mine", "mine too", "a = 1", "b = 2", "new = 1", "c = 3"]
    asyncio.run(insert.approval_preview("call-gone", params, ctx))
    document.cells = [cell for cell in document.cells if cell[0] != anchor]  # while the card waited
    with pytest.raises(NotebookError, match="was deleted meanwhile; nothing was inserted"):
        call("insert_cells", params, ctx, "call-gone")
    assert len(document.cells) == 6


def test_a_batch_bigger_than_a_card_shows_whole_is_refused_before_it_is_read_or_diffed() -> None:
    from pi_kernel.tools.approval import PREVIEW_DIFF_CHARS
    from pi_kernel.tools.builtin import notebook_edits
    from pi_kernel.tools.builtin.run_cells import RunCellsParams

    document = MemoryNotebook(["x = 1\n" * 20_000 for _ in range(300)])
    ctx = ToolContext(notebook=document)
    many = [NewCell(type="code", source="y = 2\n" * 20_000) for _ in range(300)]
    with pytest.raises(NotebookError, match=r"insert_cells takes at most 50 cells a call \(300 given\)"):
        asyncio.run(plan_insert(InsertCellsParams(cells=many), ctx))
    with pytest.raises(NotebookError, match="more than an approval card shows whole"):
        asyncio.run(plan_insert(InsertCellsParams(cells=many[:2]), ctx))
    reads = document.reads
    with pytest.raises(NotebookError, match="more than an approval card shows whole"):
        asyncio.run(plan_delete(DeleteCellsParams(cells=["#1", "#2"]), ctx))
    assert document.reads == reads + 1  # the index only, not the cells whole
    run = tool("run_cells")
    assert run.approval_preview is not None
    with pytest.raises(NotebookError, match="run_cells takes at most 50 cells"):
        asyncio.run(run.approval_preview("call-run", RunCellsParams(cells=[f"#{i}" for i in range(1, 61)]), ctx))
    document.cells = [[f"id{i}", "code", "z = 3"] for i in range(3)]
    delete = tool("delete_cells")
    assert delete.approval_preview is not None and delete.forget_preview is not None
    preview = asyncio.run(delete.approval_preview("call-denied", DeleteCellsParams(cells=["#1"]), ctx))
    assert preview is not None and len(preview.diff) <= PREVIEW_DIFF_CHARS
    assert "call-denied" in notebook_edits._plans
    delete.forget_preview("call-denied")
    assert "call-denied" not in notebook_edits._plans
