"""Details of the widget views the broader tests pass over: clocks, the last tokens, aborts, diffs, headers, layers.

Each test pins one behaviour a reviewer found covered only by a browser test
or a benchmark, or not at all: the elapsed time of a call waiting for
approval, text still waiting for its redraw when the turn ends, a call the
loop aborted, which tools draw a diff and which end of it streams, the static
card's header beside its disclosure caret, and the widgets never importing
the kernel.
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scripted_model import ScriptedModel, text_message, tool_call, tool_call_message
from test_widgets_frontend import WidgetHarness, message_events, play_message

from pi_kernel.agent import OPERATION_ABORTED, Agent, AgentTool, AgentToolResult, tool_execution
from pi_kernel.agent.types import AgentEndEvent, AgentStartEvent, ToolExecutionEndEvent, ToolExecutionStartEvent
from pi_kernel.ai import TextContent
from pi_kernel.tools.approval import ApprovalDecision, ApprovalRequest
from pi_kernel.widgets import turn_state
from pi_kernel.widgets.render import ADDED_BG, call_html, call_text, render_static
from pi_kernel.widgets.turn_state import ToolCallBlock, TurnState

WIDGETS = Path(turn_state.__file__).parent


def _visible(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&quot;", '"')


def _header(harness: WidgetHarness, call_id: str) -> str:
    card = harness.view.card(call_id)
    assert card is not None
    return _visible(str(harness.widget_state(card.header)["value"]))


# --------------------------------------------------------------------------- clocks and the last tokens


def test_a_call_waiting_for_approval_shows_how_long_it_has_waited(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent(), ToolExecutionStartEvent("c1", "bash", {"command": "ls"}))
    harness.timers.advance(5.0)  # queued behind other calls: not part of the wait
    harness.view.handle_approval("requested", ApprovalRequest("c1", "bash", {"command": "ls"}))
    harness.timers.advance(2.5)  # nothing else happens: the clock alone redraws the header
    header = _header(harness, "c1")
    assert "waiting for approval" in header
    assert re.search(r"\b2\.\d s\b", header), header  # since the request, not since the call started
    harness.timers.advance(2.0)
    assert re.search(r"\b4\.\d s\b", _header(harness, "c1"))


async def test_text_still_waiting_for_its_redraw_is_sent_when_the_turn_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = WidgetHarness(monkeypatch, interval=0.05)
    harness.feed(AgentStartEvent())
    answer = "".join(f"token{index} " for index in range(200))
    events = await message_events(text_message(answer), chunk_chars=5)
    harness.feed(*events[:3], step=0.06)  # the text view exists and shows the first deltas
    harness.feed(*events[3:])  # the rest arrives within one interval: its redraw is still pending ...
    shown_before_end = "".join(msg["content"]["text"] for msg in harness.sent("stream"))
    assert len(shown_before_end) < len(answer)
    harness.feed(AgentEndEvent([]))  # ... when the turn ends
    streamed = "".join(msg["content"]["text"] for msg in harness.sent("stream"))
    assert streamed == answer  # every token reached the live output before the static output replaced it
    [update] = harness.sent("update_display_data")
    assert harness.log.index(update) > harness.log.index(harness.sent("stream")[-1])


# --------------------------------------------------------------------------- aborts


async def test_a_call_the_loop_aborts_shows_as_interrupted_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_execution, "ABORT_GRACE", 0)  # the tool ignores the abort: cancel it at once
    started = asyncio.Event()

    async def execute(call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    tool = AgentTool(name="bash", description="Run", parameters={"type": "object"}, execute=execute)
    model = ScriptedModel([tool_call_message(tool_call("bash", {"command": "sleep 100"}, id="c1")), text_message("x")])
    agent = Agent(model.model, stream_fn=model, tools=[tool])
    harness = WidgetHarness(monkeypatch, fake_time=False, interval=0)
    harness.view.attach(agent)
    run = asyncio.create_task(agent.prompt("go"))
    await asyncio.wait_for(started.wait(), 10)
    agent.abort()
    await asyncio.wait_for(run, 10)
    static = harness.view.static
    assert static is not None
    [call] = static.metadata["pi_kernel"]["tool_calls"]
    assert call["result"]["text"] == OPERATION_ABORTED and call["status"] == "interrupted"
    assert turn_state.OPERATION_ABORTED is OPERATION_ABORTED  # the loop's text, not a copy of it


# --------------------------------------------------------------------------- diffs


def _block(name: str, args: dict[str, Any], status: str = "pending") -> ToolCallBlock:
    return ToolCallBlock(id="c1", name=name, label=name, arguments=args, status=status)  # type: ignore[arg-type]


def test_only_the_edit_tool_draws_old_and_new_text_as_a_diff() -> None:
    args = {"table": "users", "old_text": "alice", "new_text": "bob"}
    other = call_html(_block("replace_rows", args))
    assert ADDED_BG not in other and '"old_text": "alice"' in _visible(other)  # its own arguments, as JSON
    assert call_text(_block("replace_rows", args))[1] == "json"
    edit = call_html(_block("edit", {"path": "a.txt", "old_text": "alice", "new_text": "bob"}))
    assert ADDED_BG in edit and "+bob" in _visible(edit)
    assert call_text(_block("edit", {"path": "a.txt", "old_text": "a", "new_text": "b"}))[1] == "diff"


async def test_a_streaming_edit_previews_the_end_of_its_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent())
    new_text = "".join(f"line {index:04d}\n" for index in range(3000))  # a ~30 KB replacement
    call = tool_call("edit", {"path": "big.py", "old_text": "x", "new_text": new_text}, id="e1")
    await play_message(harness, tool_call_message(call), chunk_chars=64, step=0.01)
    harness.settle()
    card = harness.view.card("e1")
    assert card is not None
    previews = [
        _visible(msg["content"]["data"]["state"]["value"])
        for msg in harness.sent("comm_msg")
        if msg["content"]["comm_id"] == card.arguments.model_id and "value" in msg["content"]["data"].get("state", {})
    ]
    middle = previews[len(previews) // 2]
    assert "earlier characters not shown" in middle  # the end, where the model is writing ...
    assert "line 0000" not in middle and "more characters not shown" not in middle  # ... not the start
    assert re.search(r"\+line \d*$", middle.rstrip()), middle[-80:]  # it ends in the line being written
    assert "line 0000" in previews[-1]  # once complete, the diff reads from its start


# --------------------------------------------------------------------------- the static card's header


def test_a_denied_cards_caret_stays_on_the_name_line_and_the_reason_goes_below() -> None:
    name = "celsius_to_fahrenheit"
    reason = f'Tool "{name}" needs approval and this session denies such calls (approval policy: deny).'
    state = TurnState()
    state.apply(AgentStartEvent())
    state.apply(ToolExecutionStartEvent("c1", name, {"celsius": 100}))
    decision = ApprovalDecision("deny", reason, source="policy")
    state.apply_approval("resolved", ApprovalRequest("c1", name, {"celsius": 100}, decision=decision))
    state.apply(ToolExecutionEndEvent("c1", name, AgentToolResult([TextContent(reason)]), True))
    state.apply(AgentEndEvent([]))
    html = render_static(state).data["text/html"]
    [summary] = re.findall(r"<summary[^>]*>(.*?)</summary>", html, re.S)
    assert "<div" not in summary  # phrasing content only (a block box drops below the caret)
    assert "max-width:calc(100% - 1.5em)" in summary  # the name's line always fits beside the caret
    name_line, reason_line = summary.split('<span style="display:block', 1)
    assert name in name_line and ">denied<" in name_line and "approval policy" not in name_line
    assert "denied: Tool" in reason_line and "approval policy: deny" in reason_line


# --------------------------------------------------------------------------- layers


def test_the_widgets_never_import_the_kernel() -> None:
    """Layers import downwards only: the kernel picks its views, the widgets know nothing of it."""
    offenders = []
    for path in sorted(WIDGETS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.name}:{node.lineno} {name}" for name in names if name.startswith("pi_kernel.kernel")]
    assert offenders == []


def test_without_a_kernel_request_the_widgets_factory_declines_and_the_kernel_shows_text() -> None:
    from pi_kernel.kernel.text_view import TextTurnView, make_turn_view
    from pi_kernel.kernel.turn import TurnOptions
    from pi_kernel.widgets import make_widget_view

    session: Any = SimpleNamespace(
        kernel=None, model=None, shell=object(), view_factory=None, frontend=SimpleNamespace(widgets=True)
    )
    assert make_widget_view(session, "hi", TurnOptions()) is None  # no request to attach widgets to
    assert isinstance(make_turn_view(session, "hi", TurnOptions(), widgets=True), TextTurnView)
    session.view_factory = make_widget_view  # a session's own factory may decline too
    assert isinstance(make_turn_view(session, "hi", TurnOptions()), TextTurnView)


def test_a_cells_own_model_gives_the_view_its_provider_and_context_window() -> None:
    """``%%pi --model X``: the footer's meter measures against X's window, not the session model's."""
    from pi_kernel.ai import Model
    from pi_kernel.kernel.text_view import make_turn_view
    from pi_kernel.kernel.turn import TurnOptions

    session_model = Model(id="small", provider="openai", context_window=8_000)
    cell_model = Model(id="big", provider="deepseek", context_window=128_000)
    session: Any = SimpleNamespace(
        kernel=None, model=session_model, shell=object(), view_factory=None, frontend=SimpleNamespace(widgets=False)
    )
    view: Any = make_turn_view(session, "hi", TurnOptions(model="deepseek:big"), model=cell_model)
    assert (view.state.model, view.state.provider, view.state.context_window) == ("big", "deepseek", 128_000)
    plain: Any = make_turn_view(session, "hi", TurnOptions())
    assert plain.state.context_window == 8_000
