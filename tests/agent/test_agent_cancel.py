"""A ``prompt()`` whose task is cancelled (a kernel interrupt cancels the cell's
task), and an abort that lands between turns.

Whatever is interrupted, the transcript stays sendable (every tool call has
exactly one result, right after its assistant message), a call that finished
keeps its real result, no further model request is made, and the ``Agent`` is
idle and usable afterwards.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scripted_model import (
    ScriptedModel,
    assert_one_result_per_call,
    gated_response,
    make_tool,
    roles,
    run_loop,
    text_message,
    tool_call,
    tool_call_message,
    tool_results,
    user,
)

from pi_kernel.agent import AbortController, Agent, AgentToolResult
from pi_kernel.ai import TextContent


async def cancel_when(run: asyncio.Task[None], started: asyncio.Event) -> None:
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


async def assert_usable_afterwards(agent: Agent, model: ScriptedModel) -> None:
    """Idle, and the next prompt runs on a transcript a provider accepts."""
    assert not agent.is_running and not agent.state.is_streaming
    assert agent.state.pending_tool_calls == set() and agent.state.streaming_message is None
    model.add(text_message("back again"))
    await agent.prompt("next")
    assert_one_result_per_call(model.requests[-1].messages)
    assert agent.state.messages[-1].text == "back again"


async def test_cancelled_before_the_answer_streams() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    model = ScriptedModel([gated_response(started, release)])
    agent = Agent(model.model, stream_fn=model)
    seen: list[str] = []
    agent.subscribe(lambda event: seen.append(event.type))
    await cancel_when(asyncio.create_task(agent.prompt("go")), started)
    assert roles(agent) == ["user"] and seen[-1] == "agent_end"
    await assert_usable_afterwards(agent, model)
    assert model.call_count == 2


async def test_cancelled_mid_stream_keeps_the_partial_message_as_aborted() -> None:
    deltas = asyncio.Event()
    partial_call = tool_call("echo", {"value": "a long argument"}, id="cut")
    model = ScriptedModel([tool_call_message(partial_call, text="Let me check")], chunk_chars=2, delay=0.005)
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("echo")])
    seen: list[str] = []

    def listener(event: Any) -> None:
        seen.append(event.type)
        if event.type == "message_update" and event.assistant_message_event.type == "toolcall_delta":
            deltas.set()

    agent.subscribe(listener)
    await cancel_when(asyncio.create_task(agent.prompt("go")), deltas)
    cut_off = agent.state.messages[-1]
    assert (cut_off.role, cut_off.stop_reason, cut_off.text) == ("assistant", "aborted", "Let me check")
    assert seen[-3:] == ["message_end", "turn_end", "agent_end"]  # listeners see the message close
    assert agent.state.error_message == "Operation aborted"
    assert tool_results(agent.state.messages) == []  # a cut-off call is not answered: it is not replayed
    await assert_usable_afterwards(agent, model)


async def test_cancelled_parallel_batch_keeps_the_result_of_a_finished_call() -> None:
    started = asyncio.Event()

    async def quick(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent("file written")], details={"path": "a.txt"})

    async def forever(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    model = ScriptedModel(
        [tool_call_message(tool_call("quick", {"value": 1}, id="q"), tool_call("forever", {"value": 2}, id="f"))]
    )
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("quick", quick), make_tool("forever", forever)])
    ends: list[tuple[str, bool]] = []

    def listener(event: Any) -> None:
        if event.type == "tool_execution_end":
            ends.append((event.tool_call_id, event.is_error))
            started.set()  # "quick" has finished; "forever" still runs

    agent.subscribe(listener)
    await cancel_when(asyncio.create_task(agent.prompt("go")), started)
    assert_one_result_per_call(agent.state.messages)
    quick_result, forever_result = tool_results(agent.state.messages)
    # The call that ran keeps what it did: the model must not think it never happened.
    assert (quick_result.text, quick_result.is_error, quick_result.details) == (
        "file written",
        False,
        {"path": "a.txt"},
    )
    assert (forever_result.text, forever_result.is_error) == ("Operation aborted", True)
    assert ends == [("q", False), ("f", True)]  # one end per call
    await assert_usable_afterwards(agent, model)


async def test_cancelled_sequential_batch() -> None:
    started = asyncio.Event()
    executed: list[Any] = []

    async def step(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        executed.append(params.value)
        if params.value == 2:
            started.set()
            await asyncio.Event().wait()
        return AgentToolResult([TextContent(f"step {params.value}")])

    calls = [tool_call("step", {"value": index}, id=f"c{index}") for index in (1, 2, 3)]
    model = ScriptedModel([tool_call_message(*calls)])
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("step", step)], tool_execution="sequential")
    await cancel_when(asyncio.create_task(agent.prompt("go")), started)
    assert executed == [1, 2]
    assert [(r.tool_call_id, r.text) for r in tool_results(agent.state.messages)] == [
        ("c1", "step 1"),
        ("c2", "Operation aborted"),
        ("c3", "Operation aborted"),
    ]
    assert_one_result_per_call(agent.state.messages)
    await assert_usable_afterwards(agent, model)


async def test_an_abort_between_turns_makes_no_further_request() -> None:
    # The abort lands after the post-turn check (here: while steering is
    # polled); the next request is not sent, the run ends with an aborted message.
    controller = AbortController()
    polls = 0

    def steering() -> list[Any]:
        nonlocal polls
        polls += 1
        if polls == 2:  # after the first turn
            controller.abort()
            return [user("one more thing")]
        return []

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": 1})), text_message("never")])
    events, messages = await run_loop(
        model, [user("go")], tools=[make_tool("echo")], signal=controller.signal, get_steering_messages=steering
    )
    assert model.call_count == 1
    assert [message.role for message in messages] == ["user", "assistant", "tool_result", "user", "assistant"]
    assert messages[-1].stop_reason == "aborted" and messages[-1].content == []
    assert [event.type for event in events][-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
