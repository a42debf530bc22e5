"""The live widget view fed the Anthropic provider's stream (the real ``anthropic`` SDK against the scripted
Messages server): thinking in a collapsed section, the tool input growing live in its card, the cached tokens
in the footer, and the thinking left out of the saved output unless asked."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fake_anthropic import Events, FakeAnthropic, message_events, thinking, tool_use
from test_widgets_frontend import WidgetHarness

from pi_kernel.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
)
from pi_kernel.ai import AssistantMessage, Context, Model, StreamOptions, UserMessage
from pi_kernel.ai.providers.anthropic import stream_anthropic

THOUGHT = "The user wants the file; read it first."


async def _play(harness: WidgetHarness, server: FakeAnthropic) -> AssistantMessage:
    model = Model("claude-sonnet-4-5", provider="anthropic", base_url=server.base_url)
    stream = stream_anthropic(model, Context(None, [UserMessage("hi")]), StreamOptions(api_key="sk-ant-test-key"))
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


async def test_thinking_tool_input_and_cache_use_show_live(
    monkeypatch: pytest.MonkeyPatch, fake_anthropic: FakeAnthropic
) -> None:
    arguments = {"path": "notes/" + "deep/" * 20 + "today.txt"}
    usage = {"input_tokens": 12, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 40}
    fake_anthropic.enqueue(
        Events(message_events(thinking(THOUGHT), tool_use("read", arguments, "toolu_w"), usage=usage, parts=10))
    )
    harness = WidgetHarness(monkeypatch)
    message = await _play(harness, fake_anthropic)
    thinking_view = harness.view._views[0]
    accordion = harness.widget_state(thinking_view.widget)
    assert accordion["titles"] == ["Thinking"] and accordion["selected_index"] is None  # collapsed
    assert harness.mirror().output_text(thinking_view.stream.widget.model_id) == THOUGHT
    card = harness.view.card("toolu_w")
    assert card is not None
    previews = [
        re.sub(r"<[^>]+>", "", msg["content"]["data"]["state"]["value"])
        for msg in harness.sent("comm_msg")
        if msg["content"]["comm_id"] == card.arguments.model_id and "value" in msg["content"]["data"].get("state", {})
    ]
    assert len(previews) >= 2, "the input was shown while it streamed"
    footer = harness.widget_state(harness.view.footer.widget)["value"]
    assert "3,052 in (3,000 cached, 40 to cache)" in footer and "claude-sonnet-4-5" in footer
    assert message.tool_calls[0].arguments == arguments

    harness.view.state.saves_thinking = False  # the kernel's default (PI_SAVE_THINKING off)
    harness.feed(AgentEndEvent([]))
    static = harness.view.static
    assert static is not None and THOUGHT not in str(static.data) and "read" in static.data["text/plain"]
