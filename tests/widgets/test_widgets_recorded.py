"""The live turn view fed real provider streams: recorded SSE bodies through the fake server and the real
``openai`` provider, turned into the agent's ``message_*`` events as the loop emits them.

The recordings (``tests/data/recorded-streams``, see ``fake_openai.RECORDED_STREAMS``) carry the
shapes scripted streams do not: DeepSeek's 198 reasoning deltas, two parallel calls whose id and name
come only in their first delta, nested arguments in 55 fragments, usage in a chunk of its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, needs_recorded_streams, recorded_stream
from test_widgets_frontend import WidgetHarness

from pi_kernel.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
)
from pi_kernel.ai import AssistantMessage, Context, StreamOptions, UserMessage
from pi_kernel.ai.models import Model
from pi_kernel.ai.providers.openai_compat import stream_openai_compatible

# Outside CI a checkout without the project's shared/ folder skips these; CI must replay them.
pytestmark = needs_recorded_streams()


async def _play_recording(
    harness: WidgetHarness, server: FakeOpenAI, name: str, model_id: str, provider: str
) -> AssistantMessage:
    """Stream a recording into the view with 5 ms of fake time per event (as an agent listener would)."""
    server.enqueue(recorded_stream(name))
    model = Model(model_id, provider=provider, base_url=server.base_url)
    stream = stream_openai_compatible(model, Context(None, [UserMessage("hi")]), StreamOptions(api_key="sk-test"))
    harness.feed(AgentStartEvent())
    async for update in stream:
        if update.type == "start":
            event: Any = MessageStartEvent(update.partial)
        elif update.type in ("done", "error"):
            event = MessageEndEvent(update.partial)
        else:
            event = MessageUpdateEvent(update.partial, update)
        harness.feed(event, step=0.005)
    harness.settle()
    return await stream.result()


def _visible(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&quot;", '"').replace("&#x27;", "'")


async def test_deepseek_reasoning_streams_into_the_thinking_section_then_the_answer(
    monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> None:
    harness = WidgetHarness(monkeypatch)
    message = await _play_recording(
        harness, fake_openai, "deepseek_reasoner_thinking_text", "deepseek-reasoner", "deepseek"
    )
    thinking, text = harness.view._views
    assert harness.widget_state(thinking.widget)["titles"] == ["Thinking"]
    mirror = harness.mirror()
    assert mirror.output_text(thinking.stream.widget.model_id) == message.content[0].thinking  # type: ignore[union-attr]
    [answer] = mirror.outputs(text.stream.widget.model_id)
    assert "Hello there! 😊 How can I help you today?" in answer["data"]["text/html"]  # rendered once it ended
    footer = harness.widget_state(harness.view.footer.widget)["value"]
    assert "deepseek-reasoner" in footer and "6 in" in footer and "212 out" in footer and "$0.0001" in footer
    assert harness.view.flushes < 60  # 200 events: coalesced, not one redraw each


async def test_parallel_tool_calls_get_one_card_each(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI) -> None:
    harness = WidgetHarness(monkeypatch)
    await _play_recording(harness, fake_openai, "openai_parallel_tool_calls", "gpt-4o", "openai")
    headers = {}
    for call_id in ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "call_b51ijcpFkDiTQG1bQzsrmtW5"):
        card = harness.view.card(call_id)
        assert card is not None, f"no card for {call_id}"
        headers[call_id] = _visible(harness.widget_state(card.header)["value"])
    assert "get_country" in headers["call_q2UyBRP7eXNTzAoR8lEhjc9Z"]
    assert "get_product_name" in headers["call_b51ijcpFkDiTQG1bQzsrmtW5"]
    assert all("queued" in header for header in headers.values())  # written, not started yet


async def test_long_nested_arguments_grow_live_and_end_as_pretty_json(
    monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> None:
    harness = WidgetHarness(monkeypatch)
    message = await _play_recording(harness, fake_openai, "openai_long_nested_arguments", "gpt-4o", "openai")
    [call] = message.tool_calls
    card = harness.view.card(call.id)
    assert card is not None
    previews = [
        _visible(msg["content"]["data"]["state"]["value"])
        for msg in harness.sent("comm_msg")
        if msg["content"]["comm_id"] == card.arguments.model_id and "value" in msg["content"]["data"].get("state", {})
    ]
    assert len(previews) >= 2  # the arguments were shown while they streamed, not only at the end
    assert json.loads(previews[-1]) == call.arguments  # the whole arguments, as JSON
    assert "\n  " in previews[-1]  # pretty: indented


async def test_a_finished_recorded_turn_keeps_no_widget(
    monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI
) -> None:
    harness = WidgetHarness(monkeypatch)
    await _play_recording(harness, fake_openai, "openai_text_after_tool", "gpt-4o-mini", "openai")
    harness.feed(AgentEndEvent([]))
    assert harness.mirror().models == {}  # every widget closed
    static = harness.view.static
    assert static is not None
    assert static.data["text/plain"].startswith("The capital of the UK is London.")
    assert static.metadata["pi_kernel"]["usage"]["input"] == 78


def test_recorded_stream_tests_skip_only_outside_ci(tmp_path: Path) -> None:
    missing = tmp_path / "no-recordings"
    assert needs_recorded_streams(missing, {}).args == (True,)  # a local checkout without shared/: skip
    assert needs_recorded_streams(missing, {"CI": "true"}).args == (False,)  # CI: run, and fail loudly
    assert needs_recorded_streams(tmp_path, {}).args == (False,)
    assert pytestmark.args == needs_recorded_streams().args  # this file uses the shared check
