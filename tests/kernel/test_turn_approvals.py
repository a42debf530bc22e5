"""Who may answer a ``%%pi`` cell's approvals is read from that cell's ``Turn``, passed to its gate.

Two turns' gates side by side each answer for their own turn: nothing is read from a
"running cell" field of the session.
"""

from __future__ import annotations

from typing import Any

from scripted_model import SCRIPTED_MODEL

from pi_kernel.kernel.approval_hook import SessionApprovals, blocked_cell, nobody_to_ask
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.turn import FrontendTracker, Turn
from pi_kernel.kernel.views import TurnOptions


class Host:
    """What ``SessionApprovals`` reads of a session (``ApprovalHost``), with no front-end connected."""

    def __init__(self) -> None:
        self.settings = PiSettings()
        self.view_factory = None
        self.frontend = FrontendTracker(lambda *args: False, list, widgets_override=False)

    def tool_definition(self, name: str) -> Any:
        return None


def turn(**fields: Any) -> Turn:
    options = fields.pop("options", TurnOptions())
    return Turn(options, "cell", SCRIPTED_MODEL, None, **fields)


def ask(reply: str) -> str:
    return reply


def test_each_gate_routes_by_its_own_turn() -> None:
    approvals = SessionApprovals(Host())
    widgets = approvals.gate(turn(widgets=True))
    console = approvals.gate(turn(allow_stdin=True, raw_input=ask))
    headless = approvals.gate(turn())
    assert (widgets.route(), console.route(), headless.route()) == ("frontend", "stdin", None)
    assert console.raw_input() is ask and headless.raw_input() is None
    assert headless.nobody_reason("bash") == nobody_to_ask("bash")


def test_a_blocking_turn_is_answered_on_stdin_or_not_at_all() -> None:
    approvals = SessionApprovals(Host())
    with_stdin = approvals.gate(turn(widgets=True, blocking=True, allow_stdin=True, raw_input=ask))
    without = approvals.gate(turn(widgets=True, blocking=True))
    assert (with_stdin.route(), without.route()) == ("stdin", None)
    assert without.nobody_reason("bash") == blocked_cell("bash")


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
    host.tool_context = None  # type: ignore[attr-defined]
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
