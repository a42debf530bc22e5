"""The steering and follow-up queues belong to the run: whatever a run ends without taking (an abort, an
error, the turn limit) is dropped, never sent with the next, unrelated run's request, and
``take_unsent()`` hands it back once so the person can be told."""

from __future__ import annotations

import asyncio
from typing import Any

from scripted_model import (
    ScriptedModel,
    echo_tool,
    error_response,
    make_tool,
    text_message,
    tool_call,
    tool_call_message,
    user_texts,
)

from pi_kernel.agent import Agent, AgentToolResult
from pi_kernel.agent.types import MessageEndEvent
from pi_kernel.ai import AssistantMessage, TextContent
from pi_kernel.ai.messages import text_of


def texts(messages: list[Any]) -> list[str]:
    return [text_of(message.content) for message in messages]


def request_user_texts(model: ScriptedModel, index: int) -> list[str]:
    return [text_of(m.content) for m in model.requests[index].messages if m.role == "user"]


async def test_messages_queued_when_a_run_is_aborted_are_dropped_not_sent_next_run() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(*args: Any) -> AgentToolResult:
        started.set()
        await release.wait()
        return AgentToolResult([TextContent("done")])

    model = ScriptedModel([tool_call_message(tool_call("slow", {"value": 1})), text_message("never")])
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("slow", slow)])
    run = asyncio.create_task(agent.prompt("list the temp files"))
    await started.wait()
    agent.steer("yes, delete them all")
    agent.follow_up("and then the logs")
    agent.abort()
    release.set()
    await run
    assert model.call_count == 1  # the run stopped before it took either message
    assert not agent.has_queued_messages()
    assert texts(agent.take_unsent()) == ["yes, delete them all", "and then the logs"]
    assert agent.take_unsent() == []  # told once
    model.add(text_message("4"))
    await agent.prompt("what is 2 + 2?")
    assert request_user_texts(model, 1) == ["list the temp files", "what is 2 + 2?"]
    assert agent.take_unsent() == []


async def test_a_steer_left_at_the_turn_limit_is_dropped() -> None:
    agent: Agent

    def echo_and_steer(*args: Any) -> AgentToolResult:
        agent.steer("too late")
        return AgentToolResult([TextContent("ok")])

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": 1})), text_message("next")])
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("echo", echo_and_steer)], max_turns=1)
    await agent.prompt("go")
    assert model.call_count == 1 and not agent.has_queued_messages()
    assert texts(agent.take_unsent()) == ["too late"]
    await agent.prompt("other")
    assert request_user_texts(model, 1) == ["go", "other"]


async def test_a_follow_up_left_by_a_failed_request_is_dropped() -> None:
    model = ScriptedModel([error_response("provider failed"), text_message("fine")])
    agent = Agent(model.model, stream_fn=model, tools=[echo_tool()])

    def queue_on_failure(event: Any) -> None:
        if isinstance(event, MessageEndEvent) and isinstance(event.message, AssistantMessage):
            if event.message.stop_reason == "error":
                agent.follow_up("stale follow-up")

    agent.subscribe(queue_on_failure)
    await agent.prompt("first")
    assert not agent.has_queued_messages() and texts(agent.take_unsent()) == ["stale follow-up"]
    await agent.prompt("second")
    assert "stale follow-up" not in request_user_texts(model, 1)


async def test_messages_queued_while_idle_still_start_the_next_run() -> None:
    model = ScriptedModel([text_message("r1"), text_message("r2")])
    agent = Agent(model.model, stream_fn=model)
    agent.steer("queued before")
    await agent.prompt("p")
    assert user_texts(agent) == ["p", "queued before"] and agent.take_unsent() == []


async def test_a_follow_up_queued_mid_run_is_still_delivered() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(*args: Any) -> AgentToolResult:
        started.set()
        await release.wait()
        return AgentToolResult([TextContent("ok")])

    model = ScriptedModel([tool_call_message(tool_call("slow", {"value": 1})), text_message("a"), text_message("b")])
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("slow", slow)])
    run = asyncio.create_task(agent.prompt("go"))
    await started.wait()
    agent.follow_up("then this")
    release.set()
    await run
    assert user_texts(agent) == ["go", "then this"] and agent.take_unsent() == []


def test_reset_forgets_unsent_messages() -> None:
    agent = Agent()
    agent.steer("s")
    agent.reset()
    assert not agent.has_queued_messages() and agent.take_unsent() == []
