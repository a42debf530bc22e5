"""``Agent``: state reducer, streaming state, listeners.

Ports of pi's ``agent.test.ts`` behaviours, with the in-process ``ScriptedModel``.
Runs (hook wiring, prompt/continue rules, reset, idle) are in ``test_agent_runs.py``;
abort, cancellation and queues in ``test_agent_control.py``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from scripted_model import (
    ScriptedModel,
    error_response,
    make_tool,
    roles,
    text_message,
    tool_call,
    tool_call_message,
)

from pi_kernel.agent import (
    Agent,
    AgentToolResult,
)
from pi_kernel.ai import ImageContent, TextContent, UserMessage

# --------------------------------------------------------------------------- state and events


def test_default_state() -> None:
    model = ScriptedModel()
    agent = Agent(model.model, stream_fn=model)
    state = agent.state
    assert (state.system_prompt, state.model, state.tools, state.messages) == ("", model.model, [], [])
    assert (state.is_streaming, state.streaming_message, state.pending_tool_calls, state.error_message) == (
        False,
        None,
        set(),
        None,
    )


async def test_listeners_receive_the_lifecycle_of_a_text_turn() -> None:
    model = ScriptedModel([text_message("Hi there!")])
    agent = Agent(model.model, stream_fn=model, system_prompt="sys")
    types: list[str] = []
    unsubscribe = agent.subscribe(lambda event: types.append(event.type))

    await agent.prompt("Hello")

    assert [t for t in types if t != "message_update"] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert "message_update" in types
    assert roles(agent) == ["user", "assistant"]
    assert agent.state.messages[1].text == "Hi there!" and not agent.state.is_streaming
    assert model.requests[0].system_prompt == "sys"
    count = len(types)
    unsubscribe()
    unsubscribe()  # twice is fine
    model.add(text_message("again"))
    await agent.prompt("more")
    assert len(types) == count


async def test_prompt_accepts_text_images_a_message_or_a_list() -> None:
    model = ScriptedModel([text_message(str(index)) for index in range(4)])
    agent = Agent(model.model, stream_fn=model)
    image = ImageContent("aGk=", "image/png")
    await agent.prompt("ping")
    await agent.prompt("look", images=[image])
    await agent.prompt(UserMessage("as a message"))
    await agent.prompt([UserMessage("one"), UserMessage("two")])
    users = [message for message in agent.state.messages if message.role == "user"]
    assert users[0].content == [TextContent("ping")]
    assert users[1].content == [TextContent("look"), image]
    assert [u.content for u in users[2:]] == ["as a message", "one", "two"]
    assert roles(agent).count("assistant") == 4


async def test_the_reducer_tracks_streaming_pending_calls_and_messages() -> None:
    release_tool = asyncio.Event()
    tool_started = asyncio.Event()
    observed: list[tuple[str, Any]] = []

    async def slow(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        tool_started.set()
        await release_tool.wait()
        return AgentToolResult([TextContent("ok")], terminate=True)

    model = ScriptedModel([tool_call_message(tool_call("slow", {"value": 1}, id="t1"))])
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("slow", slow)])

    def listener(event: Any) -> None:
        state = agent.state
        if event.type == "message_update":
            observed.append(("update", state.streaming_message is event.message))
        elif event.type == "message_end":
            observed.append(("end", (state.streaming_message, state.messages[-1] is event.message)))
        elif event.type.startswith("tool_execution"):
            observed.append((event.type, set(state.pending_tool_calls)))

    agent.subscribe(listener)
    run = asyncio.create_task(agent.prompt("tool"))
    await tool_started.wait()
    assert agent.state.is_streaming and agent.state.pending_tool_calls == {"t1"}
    release_tool.set()
    await run

    assert ("update", True) in observed and ("update", False) not in observed
    assert [value for kind, value in observed if kind == "end"] == [(None, True)] * 3
    assert [(kind, value) for kind, value in observed if kind.startswith("tool")] == [
        ("tool_execution_start", {"t1"}),
        ("tool_execution_end", set()),
    ]
    assert agent.state.pending_tool_calls == set() and not agent.state.is_streaming
    assert roles(agent) == ["user", "assistant", "tool_result"]


async def test_streaming_message_follows_each_update_when_partials_are_new_objects() -> None:
    # Providers may hand a fresh partial with every event (pi copies it): the
    # state must show the latest one, not the one from message_start.
    from pi_kernel.ai import AssistantMessageEvent, AssistantMessageStream

    partials = [text_message(text) for text in ("", "He", "Hello")]

    async def events() -> Any:
        yield AssistantMessageEvent("start", partials[0])
        yield AssistantMessageEvent("text_delta", partials[1], content_index=0, delta="He")
        yield AssistantMessageEvent("text_delta", partials[2], content_index=0, delta="llo")
        yield AssistantMessageEvent("done", partials[2])

    def stream_fn(model: Any, context: Any, options: Any) -> AssistantMessageStream:
        return AssistantMessageStream(events(), lambda text: error_response(text))

    agent = Agent(ScriptedModel().model, stream_fn=stream_fn)
    seen: list[bool] = []
    agent.subscribe(
        lambda event: (
            seen.append(agent.state.streaming_message is event.message)
            if event.type in ("message_start", "message_update") and event.message.role == "assistant"
            else None
        )
    )
    await agent.prompt("hi")
    assert seen == [True, True, True]
    assert agent.state.streaming_message is None and agent.state.messages[-1] is partials[2]


async def test_error_message_comes_from_an_assistant_message_that_failed() -> None:
    model = ScriptedModel([error_response("rate limited"), text_message("fine")])
    agent = Agent(model.model, stream_fn=model)
    await agent.prompt("x")
    assert agent.state.error_message == "rate limited"
    assert agent.state.messages[-1].stop_reason == "error"
    await agent.prompt("again")
    assert agent.state.error_message is None  # cleared when a run starts


async def test_listeners_are_awaited_in_order_before_prompt_returns() -> None:
    model = ScriptedModel([text_message("ok")])
    agent = Agent(model.model, stream_fn=model)
    log: list[str] = []

    async def slow_listener(event: Any) -> None:
        log.append(f"a:{event.type}:start")
        await asyncio.sleep(0.001)
        log.append(f"a:{event.type}:end")

    agent.subscribe(slow_listener)
    agent.subscribe(lambda event: log.append(f"b:{event.type}"))
    await agent.prompt("hi")
    assert log[-3:] == ["a:agent_end:start", "a:agent_end:end", "b:agent_end"]
    for index in range(0, len(log), 3):  # every event: a starts, a ends, then b, before the next event
        a_start, a_end, b = log[index : index + 3]
        kind = a_start.split(":")[1]
        assert (a_start, a_end, b) == (f"a:{kind}:start", f"a:{kind}:end", f"b:{kind}")


async def test_a_raising_listener_is_logged_and_the_run_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([text_message("ok")])
    agent = Agent(model.model, stream_fn=model)
    later: list[str] = []

    def broken(event: Any) -> None:
        raise RuntimeError("listener bug")

    agent.subscribe(broken)
    agent.subscribe(lambda event: later.append(event.type))
    with caplog.at_level(logging.ERROR, logger="pi_kernel.agent"):
        await agent.prompt("hi")
    assert later[-1] == "agent_end" and roles(agent) == ["user", "assistant"]
    assert "listener bug" in caplog.text
