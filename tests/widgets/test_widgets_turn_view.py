"""The live turn view fed agent event sequences (scripted model streams, hand-built tool events), no kernel.

What the front end would show is read from the ``FrontEndMirror`` replaying
every message the view sent; widget state is read from the same replay.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from IPython.display import HTML
from scripted_model import assistant_message, text_message, tool_call, tool_call_message
from test_widgets_frontend import PARENT, WidgetHarness, message_events, play_message

from pi_kernel.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    AgentToolResult,
    MessageEndEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from pi_kernel.ai import ImageContent, TextContent, ThinkingContent, ToolResultMessage, Usage
from pi_kernel.tools.approval import ApprovalDecision, ApprovalRequest
from pi_kernel.tools.definition import ToolDefinition
from pi_kernel.widgets.render import LIVE_PREVIEW_CHARS
from pi_kernel.widgets.turn_view import WidgetTurnView

ANSWER = "# Results\n\nThe file has **three** lines:\n\n- one\n- two\n"


def _text_output(harness: WidgetHarness) -> str:
    """The comm id of the first text block's ``Output`` widget."""
    view = harness.view._views[0]
    return str(view.stream.widget.model_id)


def _card_header(harness: WidgetHarness, call_id: str) -> str:
    card = harness.view.card(call_id)
    assert card is not None
    return str(harness.widget_state(card.header)["value"])


def _end(call_id: str, name: str, text: str, *, is_error: bool = False, details: Any = None) -> ToolExecutionEndEvent:
    return ToolExecutionEndEvent(call_id, name, AgentToolResult([TextContent(text)], details), is_error)


async def test_text_streams_as_plain_text_then_becomes_markdown_when_the_message_ends(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent())
    events = await message_events(text_message(ANSWER), chunk_chars=4)
    streaming, ending = events[:-2], events[-2:]  # text_end, then message_end
    assert ending[0].assistant_message_event.type == "text_end" and isinstance(ending[1], MessageEndEvent)
    harness.feed(*streaming, step=0.003)  # time passes: the text arrives append-only
    harness.settle()
    mirror = harness.mirror()
    output = _text_output(harness)
    assert mirror.output_text(output) == ANSWER
    streamed = "".join(msg["content"]["text"] for msg in harness.sent("stream"))
    assert streamed == ANSWER  # each character sent once
    assert all(msg["parent_header"]["msg_id"] == PARENT for msg in harness.sent("stream"))

    harness.feed(*ending)
    harness.settle()
    shown = harness.mirror().outputs(output)
    assert len(shown) == 1 and shown[0]["output_type"] == "display_data"
    html = shown[0]["data"]["text/html"]
    assert "<h1>Results</h1>" in html and "<strong>three</strong>" in html and "<li>two</li>" in html
    assert harness.mirror().capturing(PARENT) is None  # the cell gets its output back


async def test_updates_are_coalesced_to_about_20_per_second_and_the_last_one_lands(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch, interval=0.05)
    harness.feed(AgentStartEvent())
    answer = "".join(f"word{index} " for index in range(2000))  # ~12 KB in 3,000 4-char deltas
    events = await message_events(text_message(answer), chunk_chars=4)
    harness.feed(*events[:-2], step=0.0005)  # 2,000 events a second
    seconds = len(events) * 0.0005
    harness.settle()
    assert harness.view.flushes <= 20 * seconds + 3
    assert len(harness.sent("stream")) <= 20 * seconds + 3
    assert harness.mirror().output_text(_text_output(harness)) == answer


async def test_thinking_streams_into_a_collapsed_section(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent())
    message = assistant_message(ThinkingContent("Let me count the lines first."), "Three lines.")
    await play_message(harness, message, step=0.01)
    harness.settle()
    thinking_view = harness.view._views[0]
    accordion = harness.widget_state(thinking_view.widget)
    assert accordion["_model_name"] == "AccordionModel"
    assert accordion["titles"] == ["Thinking"] and accordion["selected_index"] is None
    assert harness.mirror().output_text(thinking_view.stream.widget.model_id) == "Let me count the lines first."


def _approval(
    call_id: str, name: str, args: dict[str, Any], decision: ApprovalDecision | None = None
) -> ApprovalRequest:
    return ApprovalRequest(call_id, name, args, label=name, decision=decision)


async def test_tool_card_goes_through_waiting_running_and_done(monkeypatch) -> None:
    resolved: list[tuple[str, ApprovalDecision]] = []

    class Broker:
        def resolve(self, call_id: str, decision: ApprovalDecision) -> bool:
            resolved.append((call_id, decision))
            return True

    harness = WidgetHarness(monkeypatch, broker=Broker())
    harness.feed(AgentStartEvent())
    await play_message(harness, tool_call_message(tool_call("bash", {"command": "ls -la"}, id="c1")), step=0.06)
    harness.settle()
    assert "queued" in _card_header(harness, "c1")
    harness.feed(ToolExecutionStartEvent("c1", "bash", {"command": "ls -la"}))
    harness.view.handle_approval("requested", _approval("c1", "bash", {"command": "ls -la"}))
    harness.settle()
    assert "waiting for approval" in _card_header(harness, "c1")
    card = harness.view.card("c1")
    assert card is not None and card.panel is not None
    request = _approval("c1", "bash", {"command": "ls -la"}, ApprovalDecision("approve"))
    harness.view.handle_approval("resolved", request)
    harness.timers.advance(2.5)  # elapsed time ticks while it runs
    header = _card_header(harness, "c1")
    assert "running" in header and "approved" in header and re.search(r"2\.\d s", header)
    assert all(harness.widget_state(control)["disabled"] for control in card.panel.controls)
    harness.feed(_end("c1", "bash", "total 0\n"))
    harness.settle()
    assert "done" in _card_header(harness, "c1")
    assert "total 0" in harness.widget_state(card.result)["value"]


@pytest.mark.parametrize(
    ("decision", "end_text", "is_error", "status"),
    [
        (None, "Command failed: exit 2", True, "error"),
        (ApprovalDecision("deny", "not on prod"), "not on prod", True, "denied"),
        (
            ApprovalDecision("deny", "Interrupted by the user", source="interrupt"),
            "Interrupted by the user",
            True,
            "interrupted",
        ),
        (None, "Operation aborted", True, "interrupted"),
    ],
)
async def test_tool_card_final_statuses(monkeypatch, decision, end_text, is_error, status) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent(), ToolExecutionStartEvent("c1", "bash", {"command": "false"}))
    if decision is not None:
        harness.view.handle_approval("requested", _approval("c1", "bash", {"command": "false"}))
        harness.view.handle_approval("resolved", _approval("c1", "bash", {"command": "false"}, decision))
    harness.feed(_end("c1", "bash", end_text, is_error=is_error))
    harness.settle()
    header = _card_header(harness, "c1")
    assert f">{status}<" in header
    if decision is not None and decision.reason and status == "denied":
        assert decision.reason in header


async def test_streaming_arguments_show_a_bounded_live_preview(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent())
    content = "".join(f"print('line {index}')\n" for index in range(3000))  # ~57 KB of arguments
    call = tool_call("write", {"path": "big.py", "content": content}, id="w1")
    await play_message(harness, tool_call_message(call), chunk_chars=64, step=0.01)
    harness.settle()
    card = harness.view.card("w1")
    assert card is not None
    previews = [
        msg["content"]["data"]["state"]["value"]
        for msg in harness.sent("comm_msg")
        if msg["content"]["comm_id"] == card.arguments.model_id and "value" in msg["content"]["data"].get("state", {})
    ]
    assert len(previews) > 10
    for html in previews[:-1]:  # while streaming: the end of the arguments only
        visible = re.sub(r"<[^>]+>", "", html)
        assert len(visible) < LIVE_PREVIEW_CHARS + 200
    middle = re.sub(r"<[^>]+>", "", previews[len(previews) // 2])
    assert "earlier characters not shown" in middle
    final = harness.widget_state(card.arguments)["value"]
    visible = re.sub(r"<[^>]+>", "", final)  # complete: up to its bound, then both ends around a warning
    assert "big.py" in final and visible.index("line 0") < visible.index("characters hidden here")
    assert visible.index("characters hidden here") < visible.index("line 2999")


async def test_code_arguments_are_highlighted_and_edit_shows_a_diff(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent())
    calls = [
        tool_call("python", {"code": "import math\nprint(math.pi)"}, id="p1"),
        tool_call("edit", {"path": "a.txt", "edits": [{"old_text": "one\ntwo", "new_text": "one\nTWO"}]}, id="e1"),
    ]
    await play_message(harness, tool_call_message(*calls), step=0.06)
    harness.settle()
    python_html = harness.widget_state(harness.view.card("p1").arguments)["value"]  # type: ignore[union-attr]
    assert "<span style=" in python_html and "math" in python_html and "import" in python_html
    edit_html = harness.widget_state(harness.view.card("e1").arguments)["value"]  # type: ignore[union-attr]
    assert "rgba(46,160,67" in edit_html and "+TWO" in edit_html and "-two" in edit_html


async def test_live_output_is_appended_then_replaced_by_the_result(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent(), ToolExecutionStartEvent("b1", "bash", {"command": "make"}))
    so_far = ""
    for line in ("compiling a\n", "compiling b\n", "linking\n"):
        so_far += line
        harness.feed(ToolExecutionUpdateEvent("b1", "bash", {}, AgentToolResult([TextContent(so_far)])), step=0.06)
    harness.settle()
    card = harness.view.card("b1")
    assert card is not None and card.live is not None
    assert harness.mirror().output_text(card.live.widget.model_id) == so_far
    texts = [msg["content"]["text"] for msg in harness.sent("stream")]
    assert texts == ["compiling a\n", "compiling b\n", "linking\n"]
    harness.feed(_end("b1", "bash", so_far + "done\n"))
    harness.settle()
    children = harness.widget_state(card.widget)["children"]
    assert f"IPY_MODEL_{card.result.model_id}" in children
    assert f"IPY_MODEL_{card.live.widget.model_id}" not in children


async def test_python_live_output_comes_from_its_notebook_outputs(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent(), ToolExecutionStartEvent("p1", "python", {"code": "for i in range(3): print(i)"}))
    printed = ""
    for line in ("0\n", "1\n", "2\n"):
        printed += line
        outputs = [{"output_type": "stream", "name": "stdout", "text": printed}]
        harness.feed(ToolExecutionUpdateEvent("p1", "python", {}, AgentToolResult([], {"outputs": outputs})), step=0.06)
    harness.settle()
    card = harness.view.card("p1")
    assert card is not None and card.live is not None
    assert harness.mirror().output_text(card.live.widget.model_id).split() == ["0", "1", "2"]


async def test_render_call_and_render_result_of_the_definition_replace_the_defaults(monkeypatch) -> None:
    definitions = {
        "read": ToolDefinition(
            name="read",
            description="Read a file",
            parameters={"type": "object"},
            execute=lambda *a: None,
            label="Read file",
            render_call=lambda args: f"Reading {args['path']}",
            render_result=lambda result: HTML("<b>custom result</b>"),
        ),
        "broken": ToolDefinition(
            name="broken",
            description="x",
            parameters={"type": "object"},
            execute=lambda *a: None,
            render_call=lambda args: 1 / 0,
        ),
    }
    harness = WidgetHarness(monkeypatch, definitions=definitions.get)
    harness.feed(
        AgentStartEvent(),
        ToolExecutionStartEvent("r1", "read", {"path": "a.txt"}),
        ToolExecutionStartEvent("x1", "broken", {"n": 1}),
        _end("r1", "read", "hello"),
    )
    harness.settle()
    read_card = harness.view.card("r1")
    assert read_card is not None
    assert "Reading a.txt" in harness.widget_state(read_card.arguments)["value"]
    assert harness.widget_state(read_card.result)["value"] == "<b>custom result</b>"
    assert "Read file" in _card_header(harness, "r1")
    broken = harness.widget_state(harness.view.card("x1").arguments)["value"]  # type: ignore[union-attr]
    assert "render hook failed (ZeroDivisionError" in broken and "&quot;n&quot;: 1" in broken


async def test_footer_shows_tokens_cached_cost_and_model(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent())
    usage = Usage(input=200, output=34, cache_read=1000, total_tokens=1234, cost=0.0123)  # a 1,200-token prompt
    for _ in range(2):
        message = text_message("ok")
        message.usage, message.model, message.provider = usage, "gpt-4o-mini", "openai"
        harness.feed(MessageEndEvent(message))
    harness.settle()
    footer = harness.widget_state(harness.view.footer.widget)["value"]
    assert "openai:gpt-4o-mini" in footer
    assert "2,400 in (2,000 cached)" in footer and "68 out" in footer and "$0.0246" in footer


async def test_result_images_and_python_outputs_are_shown(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    outputs = [
        {"output_type": "stream", "name": "stdout", "text": "hello\n"},
        {
            "output_type": "execute_result",
            "data": {"text/html": "<table><tr><td>1</td></tr></table>", "text/plain": "1"},
        },
    ]
    harness.feed(
        AgentStartEvent(),
        ToolExecutionStartEvent("p1", "python", {"code": "df"}),
        ToolExecutionEndEvent("p1", "python", AgentToolResult([TextContent("1")], {"outputs": outputs}), False),
        ToolExecutionStartEvent("i1", "plot", {}),
        ToolExecutionEndEvent("i1", "plot", AgentToolResult([ImageContent("iVBORw0KGgo=", "image/png")]), False),
    )
    harness.settle()
    python_result = harness.widget_state(harness.view.card("p1").result)["value"]  # type: ignore[union-attr]
    assert "hello" in python_result and "<table><tr><td>1</td></tr></table>" in python_result
    image = harness.widget_state(harness.view.card("i1").result)["value"]  # type: ignore[union-attr]
    assert '<img src="data:image/png;base64,iVBORw0KGgo="' in image


async def test_finish_replaces_the_live_view_with_static_output_and_closes_every_widget(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent())
    await play_message(harness, tool_call_message(tool_call("read", {"path": "a.txt"}, id="r1")), step=0.06)
    harness.feed(ToolExecutionStartEvent("r1", "read", {"path": "a.txt"}), _end("r1", "read", "hello"))
    harness.feed(MessageEndEvent(ToolResultMessage("r1", "read", [TextContent("hello")])))
    await play_message(harness, text_message(ANSWER), step=0.06)
    assert not harness.view.finished
    harness.feed(AgentEndEvent([]))
    assert harness.view.finished
    mirror = harness.mirror()
    [output] = mirror.cell_outputs(PARENT)
    assert set(output["data"]) == {"text/html", "text/markdown", "text/plain"}
    assert "<h1>Results</h1>" in output["data"]["text/html"] and "hello" in output["data"]["text/plain"]
    assert output["metadata"]["pi_kernel"]["tool_calls"][0]["result"]["text"] == "hello"
    assert mirror.models == {}  # every widget closed: nothing left to be "model not found"
    assert mirror.capturing(PARENT) is None
    assert harness.view.finish() is harness.view.static  # idempotent (the kernel calls it again)


def test_an_interrupted_outcome_without_agent_end_marks_unfinished_calls(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent(), ToolExecutionStartEvent("c1", "bash", {"command": "sleep 100"}))

    class Outcome:
        status = "interrupted"

    static = harness.view.finish(Outcome())
    assert static.metadata["pi_kernel"]["tool_calls"][0]["status"] == "interrupted"


def test_view_is_usable_standalone_with_attach(monkeypatch) -> None:
    harness = WidgetHarness(monkeypatch)
    subscribed: list[Any] = []

    class Agent:
        def subscribe(self, listener: Any) -> Any:
            subscribed.append(listener)
            return lambda: subscribed.remove(listener)

    detach = harness.view.attach(Agent())
    assert subscribed == [harness.view.handle_event]
    detach()
    assert subscribed == []
    assert isinstance(harness.view, WidgetTurnView)
