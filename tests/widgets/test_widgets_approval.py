"""Approve / Always allow / Deny on tool cards, wired to the real broker and the real agent loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from scripted_model import ScriptedModel, text_message, tool_call, tool_call_message
from test_widgets_frontend import PARENT, WidgetHarness

from pi_kernel.agent.agent import Agent
from pi_kernel.agent.types import AgentTool, AgentToolResult, BeforeToolCallResult
from pi_kernel.ai import TextContent, ToolResultMessage
from pi_kernel.tools.approval import ApprovalBroker, ApprovalRequest

COMMAND_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


class Run:
    """An agent with one ``bash`` tool that asks the broker before every call, viewed by a ``TurnView``."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, broker: ApprovalBroker, answer: Callable[..., Any], *, hold: bool = False
    ) -> None:
        self.broker = broker
        self.ran: list[str] = []
        self.release = asyncio.Event()
        """The final answer waits for it when ``hold``: the turn (and its widgets) stays open meanwhile."""
        if not hold:
            self.release.set()

        async def held_answer(context: Any, options: Any) -> Any:
            await self.release.wait()
            return answer(context, options)

        self.model = ScriptedModel(
            [tool_call_message(tool_call("bash", {"command": "rm -rf build"}, id="c1")), held_answer]
        )
        tool = AgentTool(name="bash", description="Run a command", parameters=COMMAND_SCHEMA, execute=self._execute)
        self.agent = Agent(self.model.model, stream_fn=self.model, tools=[tool], before_tool_call=self._ask)
        self.harness = WidgetHarness(monkeypatch, broker=broker, fake_time=False, interval=0)
        self.harness.view.attach(self.agent)
        self.task: asyncio.Task[Any] | None = None

    def _execute(self, call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
        self.ran.append(params["command"])
        return AgentToolResult([TextContent(f"ran {params['command']}")])

    async def _ask(self, ctx: Any, signal: Any = None) -> Any:
        # What the kernel's approval gate does with a person's decision.
        request = ApprovalRequest(ctx.tool_call.id, ctx.tool_call.name, ctx.args, label="Shell", schema=COMMAND_SCHEMA)
        decision = await self.broker.request(request, signal)
        if decision.kind == "deny":
            return BeforeToolCallResult(block=True, reason=decision.reason or "The user denied this tool call.")
        return BeforeToolCallResult(args=decision.args) if decision.args is not None else None

    async def start(self) -> Any:
        """Run until the approval panel shows; returns the card."""
        self.task = asyncio.create_task(self.agent.prompt("clean up"))
        for _ in range(500):
            card = self.harness.view.card("c1")
            if card is not None and card.panel is not None:
                return card
            await asyncio.sleep(0.01)
        raise AssertionError("no approval panel appeared")

    async def finish(self) -> None:
        assert self.task is not None
        self.release.set()
        await asyncio.wait_for(self.task, 10)

    def disabled(self, card: Any) -> bool:
        return all(self.harness.widget_state(control)["disabled"] for control in card.panel.controls)

    def header(self, card: Any) -> str:
        """The header's value (read on the widget: it is closed once the turn ends)."""
        return str(card.header.value)


def _final_answer(context: Any, options: Any) -> Any:
    result = context.messages[-1]
    assert isinstance(result, ToolResultMessage)
    return text_message(f"Tool said: {result.text}")


async def test_approve_runs_the_call_and_disables_the_buttons(monkeypatch) -> None:
    run = Run(monkeypatch, ApprovalBroker(timeout=None), _final_answer)
    card = await run.start()
    assert "waiting for approval" in run.header(card) and "Shell" in run.header(card)
    assert not run.disabled(card)
    assert run.ran == []
    card.panel.approve.click()
    await run.finish()
    assert run.ran == ["rm -rf build"]
    static = run.harness.view.static
    assert static is not None
    call = static.metadata["pi_kernel"]["tool_calls"][0]
    assert call["decision"]["kind"] == "approve" and call["status"] == "done"
    assert "Tool said: ran rm -rf build" in static.data["text/plain"]


async def test_buttons_disable_and_the_card_shows_the_decision(monkeypatch) -> None:
    broker = ApprovalBroker(timeout=None)
    run = Run(monkeypatch, broker, _final_answer, hold=True)
    card = await run.start()
    card.panel.always.click()
    for _ in range(100):  # the decision reaches the card through the broker's "resolved"
        if "always allowed" in run.header(card):
            break
        await asyncio.sleep(0.01)
    assert run.disabled(card)
    assert "always allowed" in run.header(card)
    assert "always allowed" in run.harness.widget_state(card.panel.message)["value"]
    await run.finish()
    assert run.ran == ["rm -rf build"]


async def test_deny_sends_the_typed_reason_to_the_model(monkeypatch) -> None:
    run = Run(monkeypatch, ApprovalBroker(timeout=None), _final_answer)
    card = await run.start()
    card.panel.reason.value = "not on the production box"
    card.panel.deny.click()
    await run.finish()
    assert run.ran == []
    tool_result = run.model.requests[1].messages[-1]
    assert isinstance(tool_result, ToolResultMessage) and tool_result.is_error
    assert tool_result.text == "not on the production box"
    assert "denied: not on the production box" in run.header(card)
    call = run.harness.view.static.metadata["pi_kernel"]["tool_calls"][0]  # type: ignore[union-attr]
    assert call["status"] == "denied" and call["decision"]["reason"] == "not on the production box"


async def test_edited_arguments_must_be_a_json_object_and_are_used_when_valid(monkeypatch) -> None:
    run = Run(monkeypatch, ApprovalBroker(timeout=None), _final_answer)
    card = await run.start()
    card.panel.edit.click()
    editor = card.panel.editor
    assert editor is not None and '"command": "rm -rf build"' in editor.value  # prefilled
    for bad in ('{"command": "ls"', '["ls"]'):
        editor.value = bad
        card.panel.approve.click()
        await asyncio.sleep(0.05)
        assert run.broker.pending(), "an invalid edit must not decide"
        assert not run.disabled(card)
    message = run.harness.widget_state(card.panel.message)["value"]
    assert "must be a JSON object" in message
    editor.value = '{"command": "rm -rf build/tmp"}'
    card.panel.approve.click()
    await run.finish()
    assert run.ran == ["rm -rf build/tmp"]
    assert "approved with edited arguments" in run.header(card)
    call = run.harness.view.static.metadata["pi_kernel"]["tool_calls"][0]  # type: ignore[union-attr]
    assert call["arguments"] == {"command": "rm -rf build/tmp"}  # what ran, not what was asked


@pytest.mark.parametrize("source", ["timeout", "interrupt"])
async def test_a_decision_made_elsewhere_disables_the_buttons(monkeypatch, source: str) -> None:
    broker = ApprovalBroker(timeout=0.3 if source == "timeout" else None)
    run = Run(monkeypatch, broker, _final_answer, hold=True)
    card = await run.start()
    if source == "interrupt":
        # As the kernel's SIGINT path does, from another thread.
        threading.Thread(target=broker.deny_all).start()
    for _ in range(200):
        if run.disabled(card):
            break
        await asyncio.sleep(0.01)
    assert run.disabled(card)
    expected = "interrupted" if source == "interrupt" else "denied"
    assert f">{expected}<" in run.header(card)
    if source == "timeout":
        assert "(timeout)" in run.header(card)
    await run.finish()
    assert run.ran == []
    assert run.harness.view.static.metadata["pi_kernel"]["tool_calls"][0]["status"] == expected  # type: ignore[union-attr]


async def test_a_click_arriving_on_another_thread_is_handled(monkeypatch) -> None:
    run = Run(monkeypatch, ApprovalBroker(timeout=None), _final_answer)
    card = await run.start()
    await asyncio.to_thread(card.panel.approve.click)  # JupyterLab may route comms to a subshell thread
    await run.finish()
    assert run.ran == ["rm -rf build"]
    assert run.harness.mirror().cell_outputs(PARENT)[0]["metadata"]["pi_kernel"]["tool_calls"][0]["status"] == "done"


async def test_a_click_after_the_request_ended_says_so(monkeypatch) -> None:
    broker = ApprovalBroker(timeout=None)
    run = Run(monkeypatch, broker, _final_answer)
    card = await run.start()
    panel = card.panel
    original = broker.resolve
    broker.resolve = lambda *args: False  # type: ignore[method-assign]  # someone else decided first
    panel.approve.click()
    assert "no longer waiting" in run.harness.widget_state(panel.message)["value"]
    assert run.disabled(card)
    broker.resolve = original  # type: ignore[method-assign]
    broker.deny_all()
    await run.finish()


@pytest.mark.parametrize("answerer", ["widget", None])
async def test_a_call_the_policy_denies_shows_as_denied_not_failed(monkeypatch, answerer: str | None) -> None:
    """The kernel's gate under ``deny`` (or with nobody to ask) decides without waiting; the card still says so."""
    from pi_kernel.kernel.approval_hook import ApprovalGate, WaitInBroker
    from pi_kernel.tools.approval import ApprovalPolicy

    broker = ApprovalBroker(timeout=None)
    if answerer is not None:  # someone could be asked; without one, nobody can
        broker.register(WaitInBroker(answerer, lambda asking: True))
    run = Run(monkeypatch, broker, _final_answer)
    policy = ApprovalPolicy(mode="deny")
    run.agent.before_tool_call = ApprovalGate(
        policy=lambda: policy, broker=lambda: broker, definition=lambda _name: None
    )
    await run.agent.prompt("clean up")
    assert run.ran == []
    tool_result = run.model.requests[1].messages[-1]
    assert isinstance(tool_result, ToolResultMessage) and tool_result.is_error
    call = run.harness.view.static.metadata["pi_kernel"]["tool_calls"][0]  # type: ignore[union-attr]
    assert call["status"] == "denied" and call["decision"]["reason"] == tool_result.text
    assert call["decision"]["source"] == "policy"
