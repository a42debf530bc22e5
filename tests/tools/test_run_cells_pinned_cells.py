"""In ``auto`` mode, ``run_cells`` is judged by the code its refs name *at decide time*,
then runs whatever the refs name *at run time*.

With a card, ``_approved`` pins the shown sources and a changed cell is refused as stale. In ``auto`` mode
there is no card (no preview), so nothing ties the code judged by ``decide`` (``ApprovalGate._named_cells``)
to the code ``execute`` reads again. A position ref (``#2``) shifts when another call of the same parallel
batch inserts a cell above it (``insert_cells`` of harmless code runs unasked in auto mode), so a cell that
reads a key runs without the question ``run_cells`` of that cell asks. A notebook read that fails at decide
time likewise makes the gate see no code at all, hence no secret: it fails open.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_notebook_edit_tools import MemoryNotebook, tool

from pi_kernel.agent.types import BeforeToolCallContext
from pi_kernel.ai.messages import AssistantMessage, ToolCall
from pi_kernel.kernel.approval_hook import ApprovalGate
from pi_kernel.tools.approval import UNREADABLE_CELLS, ApprovalBroker, ApprovalPolicy, decide
from pi_kernel.tools.builtin.notebook_edits import forget_plan, pin_cells, read_refs
from pi_kernel.tools.builtin.run_cells import RunCellsParams
from pi_kernel.tools.definition import ToolContext
from pi_kernel.tools.notebook_document import StaleCell

SECRET_CELL = "import os\nleaked = os.environ['OPENAI_API_KEY']"


def _gate(ctx: ToolContext) -> ApprovalGate:
    policy = ApprovalPolicy(mode="auto")
    broker = ApprovalBroker()
    run = tool("run_cells")
    return ApprovalGate(
        policy=lambda: policy, broker=lambda: broker, definition=lambda name: run, tool_context=lambda: ctx
    )


def _verdict(gate: ApprovalGate, params: RunCellsParams) -> Any:
    call = ToolCall("call-run", "run_cells", params.model_dump())
    message = AssistantMessage(content=[call])  # type: ignore[call-arg]
    return asyncio.run(gate(BeforeToolCallContext(message, call, params, None)))  # type: ignore[arg-type]


def _execute(ctx: ToolContext, params: RunCellsParams) -> Any:
    return asyncio.run(tool("run_cells").execute("call-run", params, None, None, ctx))


def test_sanity_run_cells_of_the_secret_cell_is_not_let_through_in_auto_mode(monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-TESTKEYabcdefghijklmnop")
    document = MemoryNotebook(["x = 1", SECRET_CELL])
    ctx = ToolContext(notebook=document, namespace={})
    outcome = _verdict(_gate(ctx), RunCellsParams(cells=["#2"]))
    assert outcome is not None  # asked (here: nobody to ask, so blocked)


def test_a_position_ref_that_shifts_after_the_auto_decision_runs_a_secret_cell_unasked(monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-TESTKEYabcdefghijklmnop")
    document = MemoryNotebook(["x = 1", SECRET_CELL, "y = 2"])
    namespace: dict[str, Any] = {}
    ctx = ToolContext(notebook=document, namespace=namespace)
    params = RunCellsParams(cells=["#3"])
    # Decided while #3 is "y = 2" (the gate of the batch's insert_cells ran too: harmless code, auto runs it)
    assert _verdict(_gate(ctx), params) is None  # auto: runs unasked
    # ... then the batch's insert_cells of "z = 0" at the top lands before run_cells reads its refs.
    document.cells.insert(0, ["new", "code", "z = 0"])
    try:
        _execute(ctx, params)
    finally:
        assert "leaked" not in namespace, "a cell that reads the key ran without the question auto mode asks"


def test_a_notebook_read_that_fails_at_decide_time_does_not_let_a_secret_cell_run_unasked(monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-TESTKEYabcdefghijklmnop")

    class FlakyNotebook(MemoryNotebook):
        failures = 1

        async def read(self, cell_ids: list[str] | None = None, max_chars: int | None = None) -> Any:
            if self.failures:
                self.failures -= 1
                raise TimeoutError("the front-end did not answer in time")
            return await super().read(cell_ids, max_chars)

    document = FlakyNotebook(["x = 1", SECRET_CELL])
    ctx = ToolContext(notebook=document, namespace={})
    outcome = _verdict(_gate(ctx), RunCellsParams(cells=["#2"]))
    assert outcome is not None, "an unreadable notebook at decide time let run_cells of a secret cell run in auto mode"


def test_an_approved_card_does_not_run_a_cell_it_did_not_show_when_a_position_ref_shifts() -> None:
    """``ask`` mode, with the card: ``execute`` compares each cell it is about to run with the sources the card
    showed *by cell id*, defaulting to the cell's own source for an id the card never showed. A cell inserted
    above while the card waits shifts ``#2`` onto another cell, which is then run unseen (and unjudged)."""
    document = MemoryNotebook(["x = 1", "shown = 'approved'"])
    namespace: dict[str, Any] = {}
    ctx = ToolContext(notebook=document, namespace=namespace)
    run = tool("run_cells")
    params = RunCellsParams(cells=["#2"])
    assert run.approval_preview is not None
    preview = asyncio.run(run.approval_preview("call-run", params, ctx))
    assert "shown = 'approved'" in preview.diff
    document.cells.insert(1, ["mine", "code", "unseen = 'ran'"])  # the person adds a cell above while deciding
    try:
        _execute(ctx, params)  # approved as shown
    except Exception:  # noqa: BLE001 - refusing it (stale) is the fix
        pass
    assert "unseen" not in namespace, "run_cells ran a cell the approval card never showed"


def test_the_card_refuses_refs_that_name_other_cells_than_the_gate_judged() -> None:
    """The gate pins what it judged; a card prepared after a cell was inserted above shows no other cell."""
    document = MemoryNotebook(["x = 1", "judged = 1"])
    ctx = ToolContext(notebook=document, namespace={})
    params = RunCellsParams(cells=["#2"])
    pin_cells("call-run", params, asyncio.run(read_refs(document, ["#2"]))[1])
    document.cells.insert(0, ["other", "code", "other = 1"])
    run = tool("run_cells")
    assert run.approval_preview is not None
    try:
        with pytest.raises(StaleCell):
            asyncio.run(run.approval_preview("call-run", params, ctx))
    finally:
        forget_plan("call-run")


def test_an_unreadable_notebook_asks_with_its_reason_and_is_denied_in_deny_mode() -> None:
    run = tool("run_cells")
    params = RunCellsParams(cells=["#1"])
    asked = decide(run, "run_cells", params, ApprovalPolicy(mode="auto").state(), {})
    assert (asked.verdict, asked.secret) == ("ask", UNREADABLE_CELLS)
    denied = decide(run, "run_cells", params, ApprovalPolicy(mode="deny").state(), {})
    assert denied.verdict == "deny" and UNREADABLE_CELLS in (denied.reason or "")
    assert decide(run, "run_cells", params, ApprovalPolicy(mode="auto").state(), {"#1": "x = 1"}).verdict == "run"
