"""``Agent`` control: abort (from listeners, other threads, approval waits, task
cancellation), steering and follow-up queues and their modes."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from scripted_model import (
    ScriptedModel,
    assert_one_result_per_call,
    echo_tool,
    make_tool,
    roles,
    text_message,
    tool_call,
    tool_call_message,
    user_texts,
)

from pi_kernel.agent import (
    Agent,
    AgentToolResult,
    BeforeToolCallResult,
    tool_execution,
)
from pi_kernel.ai import TextContent, UserMessage

# --------------------------------------------------------------------------- abort


async def test_abort_mid_stream_from_a_listener() -> None:
    model = ScriptedModel([text_message("abcdefghijklmnopqrstuvwxyz")], chunk_chars=1)
    agent = Agent(model.model, stream_fn=model)
    signal_at_end: list[bool] = []

    def listener(event: Any) -> None:
        if event.type == "message_update" and not agent.signal.aborted:  # type: ignore[union-attr]
            agent.abort()
        if event.type == "agent_end":
            signal_at_end.append(agent.signal.aborted)  # type: ignore[union-attr]

    agent.subscribe(listener)
    await agent.prompt("go")
    assert signal_at_end == [True]
    assert agent.state.messages[-1].stop_reason == "aborted"
    assert agent.state.error_message == "Operation aborted" and not agent.state.is_streaming


def test_abort_when_idle_does_nothing() -> None:
    Agent().abort()


async def test_a_sync_tool_that_honours_an_abort_from_another_thread_keeps_its_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tool_execution, "ABORT_GRACE", 30)  # the tool honours the abort: its own result is kept
    started, saw_abort = threading.Event(), threading.Event()

    def working(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        deadline = time.monotonic() + 10
        while not signal.aborted and time.monotonic() < deadline:
            time.sleep(0.005)
        saw_abort.set()
        return AgentToolResult([TextContent("stopped")])

    model = ScriptedModel([tool_call_message(tool_call("work", {"value": 1})), text_message("never")])
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("work", working)])

    def interrupt() -> None:
        started.wait(10)
        agent.abort()

    threading.Thread(target=interrupt, daemon=True).start()
    await asyncio.wait_for(agent.prompt("go"), 10)
    assert await asyncio.to_thread(saw_abort.wait, 10)
    assert agent.state.messages[-1].text == "stopped"
    assert model.call_count == 1 and not agent.state.is_streaming
    assert_one_result_per_call(agent.state.messages)


async def test_an_approval_prompt_ends_on_abort() -> None:
    asked = asyncio.Event()

    async def approval(ctx: Any, signal: Any) -> BeforeToolCallResult:
        asked.set()
        await asyncio.Event().wait()  # the person never answers
        return BeforeToolCallResult()

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": 1})), text_message("never")])
    agent = Agent(model.model, stream_fn=model, tools=[echo_tool()], before_tool_call=approval)
    run = asyncio.create_task(agent.prompt("go"))
    await asked.wait()
    agent.abort()
    await asyncio.wait_for(run, 5)
    assert agent.state.messages[-1].text == "Operation aborted"


async def test_cancelling_the_prompt_task_still_answers_every_tool_call() -> None:
    started = asyncio.Event()
    seen_signal: list[Any] = []

    async def forever(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen_signal.append(signal)
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": 1}), tool_call("t", {"value": 2}))])
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("t", forever)])
    seen: list[str] = []
    agent.subscribe(lambda event: seen.append(event.type))
    run = asyncio.create_task(agent.prompt("go"))
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert seen_signal[0].aborted  # tools were told
    assert_one_result_per_call(agent.state.messages)
    assert [m.text for m in agent.state.messages if m.role == "tool_result"] == ["Operation aborted"] * 2
    assert not agent.is_running and not agent.state.is_streaming
    # Listeners hear how the calls ended, and that the run is over.
    tail = seen[seen.index("tool_execution_start") :]
    assert tail.count("tool_execution_end") == 2 and tail[-1] == "agent_end"
    assert agent.state.pending_tool_calls == set()


# --------------------------------------------------------------------------- steering and follow-ups


async def test_steer_mid_run_is_injected_after_the_tools() -> None:
    tool_started, release = asyncio.Event(), asyncio.Event()

    async def slow(*args: Any) -> AgentToolResult:
        tool_started.set()
        await release.wait()
        return AgentToolResult([TextContent("tool-done")])

    model = ScriptedModel([tool_call_message(tool_call("slow", {"value": 1})), text_message("after-steer")])
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("slow", slow)])
    run = asyncio.create_task(agent.prompt("start"))
    await tool_started.wait()
    agent.steer(UserMessage("steering-mid"))
    release.set()
    await run
    assert model.call_count == 2
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "tool_result", "user"]
    assert roles(agent) == ["user", "assistant", "tool_result", "user", "assistant"]
    assert not agent.has_queued_messages()


async def test_follow_up_waits_for_tools_and_steering() -> None:
    tool_started, release = asyncio.Event(), asyncio.Event()

    async def slow(*args: Any) -> AgentToolResult:
        tool_started.set()
        await release.wait()
        return AgentToolResult([TextContent("ok")])

    model = ScriptedModel(
        [tool_call_message(tool_call("slow", {"value": 1})), text_message("a"), text_message("b"), text_message("c")]
    )
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("slow", slow)])
    run = asyncio.create_task(agent.prompt("go"))
    await tool_started.wait()
    agent.follow_up("follow-later")
    agent.steer("steer-first")
    release.set()
    await run
    assert model.call_count == 3
    assert user_texts(agent) == ["go", "steer-first", "follow-later"]


@pytest.mark.parametrize(("mode", "calls", "first_users"), [("one-at-a-time", 2, 2), ("all", 1, 3)])
async def test_steering_modes(mode: str, calls: int, first_users: int) -> None:
    model = ScriptedModel([text_message("r1"), text_message("r2")])
    agent = Agent(model.model, stream_fn=model, steering_mode=mode)  # type: ignore[arg-type]
    agent.steer("s1")
    agent.steer("s2")
    await agent.prompt("p")
    assert model.call_count == calls
    assert sum(m.role == "user" for m in model.requests[0].messages) == first_users
    assert user_texts(agent) == ["p", "s1", "s2"] and not agent.has_queued_messages()


@pytest.mark.parametrize(("mode", "calls"), [("one-at-a-time", 3), ("all", 2)])
async def test_follow_up_modes(mode: str, calls: int) -> None:
    model = ScriptedModel([text_message(f"r{index}") for index in range(3)])
    agent = Agent(model.model, stream_fn=model, follow_up_mode=mode)  # type: ignore[arg-type]
    agent.follow_up("f1")
    agent.follow_up("f2")
    await agent.prompt("p")
    assert model.call_count == calls and user_texts(agent) == ["p", "f1", "f2"]


async def test_steer_does_not_skip_pending_tools() -> None:
    executed: list[Any] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def echo(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        await release.wait()
        executed.append(params.value)
        return AgentToolResult([TextContent("ok")])

    model = ScriptedModel(
        [tool_call_message(tool_call("echo", {"value": "a"}), tool_call("echo", {"value": "b"})), text_message("done")]
    )
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("echo", echo)], tool_execution="sequential")
    run = asyncio.create_task(agent.prompt("go"))
    await started.wait()
    agent.steer("nudge")
    release.set()
    await run
    assert executed == ["a", "b"]
    assert roles(agent) == ["user", "assistant", "tool_result", "tool_result", "user", "assistant"]


async def test_continue_from_an_assistant_tail_uses_queued_messages() -> None:
    model = ScriptedModel([text_message("first"), text_message("Processed 1"), text_message("Processed 2")])
    agent = Agent(model.model, stream_fn=model)
    await agent.prompt("Initial")
    agent.steer("Steering 1")
    agent.steer("Steering 2")
    await agent.continue_()
    # one-at-a-time: the first steering message starts the run, the second follows the first answer
    assert roles(agent)[-4:] == ["user", "assistant", "user", "assistant"]
    assert user_texts(agent) == ["Initial", "Steering 1", "Steering 2"]
    model.add(text_message("Processed follow-up"))
    agent.follow_up("Queued follow-up")
    await agent.continue_()
    assert user_texts(agent)[-1] == "Queued follow-up" and roles(agent)[-1] == "assistant"


def test_queue_modes_and_clearing() -> None:
    agent = Agent()
    assert agent.steering_mode == "one-at-a-time" and agent.follow_up_mode == "one-at-a-time"
    agent.steering_mode = "all"
    agent.follow_up_mode = "all"
    assert (agent.steering_mode, agent.follow_up_mode) == ("all", "all")
    agent.steer("s")
    agent.clear_steering_queue()
    assert not agent.has_queued_messages()
    agent.follow_up("f")
    agent.clear_follow_up_queue()
    agent.steer("s")
    agent.follow_up("f")
    agent.clear_all_queues()
    assert not agent.has_queued_messages() and agent.state.messages == []
