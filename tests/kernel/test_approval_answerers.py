"""Who can answer an approval: a list of answerers registered with the broker, the first that can answer takes
it; and who may answer a ``%%pi`` cell's approvals is read from that cell's ``Turn``, passed to its gate.

Two turns' gates side by side each answer for their own turn: nothing is read from a
"running cell" field of the session.
"""

from __future__ import annotations

from typing import Any

from scripted_model import SCRIPTED_MODEL

from pi_kernel.kernel.approval_hook import SessionApprovals, blocked_cell, nobody_to_ask
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.turn import FrontendTracker, Turn, TurnOptions
from pi_kernel.tools.approval import ApprovalBroker


class Host:
    """What ``SessionApprovals`` reads of a session (``ApprovalHost``), with no front-end connected."""

    def __init__(self) -> None:
        self.settings = PiSettings()
        self.view_factory: Any = None
        self.frontend = FrontendTracker(lambda *args: False, list, widgets_override=False)
        self.tool_context = None

    def tool_definition(self, name: str) -> Any:
        return None


def turn(**fields: Any) -> Turn:
    options = fields.pop("options", TurnOptions())
    return Turn(options, "cell", SCRIPTED_MODEL, None, **fields)


def ask(reply: str) -> str:
    return reply


def test_the_kernel_registers_widget_comm_stdin_nobody_in_that_order() -> None:
    broker = SessionApprovals(Host()).broker
    assert [answerer.name for answerer in broker.answerers] == ["widget", "comm", "stdin", "nobody"]


def test_the_first_answerer_that_can_answer_takes_the_request() -> None:
    host = Host()
    broker = SessionApprovals(host).broker
    console = turn(allow_stdin=True, raw_input=ask)
    assert broker.answerer_for(turn()).name == "nobody"  # type: ignore[union-attr]
    assert broker.answerer_for(console).name == "stdin"  # type: ignore[union-attr]
    host.view_factory = lambda *args: None  # a widget view: the front-end that sent the cell renders widgets
    assert broker.answerer_for(turn(widgets=True, allow_stdin=True, raw_input=ask)).name == "widget"  # type: ignore[union-attr]
    blocking = turn(widgets=True, blocking=True, allow_stdin=True, raw_input=ask)
    assert broker.answerer_for(blocking).name == "stdin"  # type: ignore[union-attr]  # no click reaches it


def test_a_registered_answerer_replaces_one_of_its_name() -> None:
    class Always:
        name, person = "nobody", True

        def can_answer(self, asking: Any) -> bool:
            return True

    broker = ApprovalBroker()
    broker.register(Always())  # type: ignore[arg-type]
    broker.register(Always())  # type: ignore[arg-type]
    assert len(broker.answerers) == 1 and broker.answerer_for(None) is broker.answerers[0]


def test_each_gate_routes_by_its_own_turn() -> None:
    approvals = SessionApprovals(Host())
    widgets = approvals.gate(turn(widgets=True))
    console = approvals.gate(turn(allow_stdin=True, raw_input=ask))
    headless = approvals.gate(turn())
    assert (widgets.answerer().name, console.answerer().name, headless.answerer().name) == ("widget", "stdin", "nobody")
    assert console.turn is not None and console.turn.stdin is ask and headless.turn is not None
    assert headless.turn.stdin is None
    assert headless.answerer().refusal("bash", headless.turn) == nobody_to_ask("bash")


def test_a_blocking_turn_is_answered_on_stdin_or_not_at_all() -> None:
    approvals = SessionApprovals(Host())
    with_stdin = approvals.gate(turn(widgets=True, blocking=True, allow_stdin=True, raw_input=ask))
    without = approvals.gate(turn(widgets=True, blocking=True))
    assert (with_stdin.answerer().name, without.answerer().name) == ("stdin", "nobody")
    assert without.answerer().refusal("bash", without.turn) == blocked_cell("bash")


def test_a_cells_approve_mode_reaches_only_its_own_gate() -> None:
    approvals = SessionApprovals(Host())
    strict = approvals.gate(turn(options=TurnOptions(approve="deny")))
    assert strict.mode_override() == "deny"
    assert approvals.gate(turn()).mode_override() is None
    assert approvals.gate().mode_override() is None  # a run started from code has no turn
    assert turn(allow_stdin=False, raw_input=ask).stdin is None  # a reader without permission is not used


def test_a_denied_calls_preview_is_forgotten_and_an_approved_ones_kept_for_the_call() -> None:
    import asyncio

    from pi_kernel.agent.types import BeforeToolCallContext
    from pi_kernel.ai import AssistantMessage, Context, ToolCall
    from pi_kernel.tools.approval import ApprovalPreview
    from pi_kernel.tools.definition import ToolDefinition

    forgotten: list[str] = []

    async def preview(tool_call_id: str, args: Any, ctx: Any) -> ApprovalPreview:
        return ApprovalPreview("delete #1 (code) x = 1", "--- a\n+++ b\n-x = 1\n", None)

    async def execute(*args: Any) -> Any:
        raise AssertionError("not run here")

    definition = ToolDefinition(
        name="delete_cells",
        label="delete_cells",
        description="d",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        approval="ask",
        approval_preview=preview,
        forget_preview=forgotten.append,
    )
    host = Host()
    host.tool_definition = lambda name: definition  # type: ignore[method-assign]
    results: list[Any] = []
    approvals = SessionApprovals(host)
    for call_id, reply in (("denied", "n"), ("approved", "y")):
        gate = approvals.gate(turn(allow_stdin=True, raw_input=lambda prompt, reply=reply: reply))
        call = ToolCall(id=call_id, name="delete_cells", arguments={})
        ctx = BeforeToolCallContext(AssistantMessage(content=[call]), call, {}, Context(messages=[]))
        results.append(asyncio.run(gate(ctx)))
    assert results[0].block and (results[1] is None or not results[1].block), results
    assert forgotten == ["denied"]


def test_the_comm_targets_are_registered_once_and_removed_on_detach() -> None:
    """The tracker's handlers are bound methods, a new object at each access: compared by ``is``, every
    ``ensure_targets`` registered them again and ``remove_targets`` (``%unload_ext``) never removed them."""
    from pi_kernel.kernel.turn import APPROVAL_TARGET, WIDGET_CONTROL_TARGET, comm_manager

    manager = comm_manager()
    saved = dict(manager.targets)
    try:
        tracker = FrontendTracker(lambda *args: False, list)
        tracker.ensure_targets()
        approval = manager.targets[APPROVAL_TARGET]
        tracker.ensure_targets()
        assert manager.targets[APPROVAL_TARGET] is approval  # already ours: left as it was
        tracker.remove_targets()
        assert APPROVAL_TARGET not in manager.targets and WIDGET_CONTROL_TARGET not in manager.targets
    finally:
        manager.targets.clear()
        manager.targets.update(saved)
