"""``Agent`` control: abort (from listeners, other threads, approval waits, task
cancellation), steering and follow-up queues and their modes.

The steering and follow-up queues belong to the run: whatever a run ends without taking (an abort, an
error, the turn limit) is dropped, never sent with the next, unrelated run's request, and
``take_unsent()`` hands it back once so the person can be told.

A ``prompt()`` whose task is cancelled (a kernel interrupt cancels the cell's
task), and an abort that lands between turns.

Whatever is interrupted, the transcript stays sendable (every tool call has
exactly one result, right after its assistant message), a call that finished
keeps its real result, no further model request is made, and the ``Agent`` is
idle and usable afterwards.
"""

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
    error_response,
    gated_response,
    make_tool,
    roles,
    run_loop,
    text_message,
    tool_call,
    tool_call_message,
    tool_results,
    user,
    user_texts,
)

from pi_kernel.agent import (
    AbortController,
    Agent,
    AgentToolResult,
    BeforeToolCallResult,
    tool_execution,
)
from pi_kernel.agent.types import MessageEndEvent
from pi_kernel.ai import AssistantMessage, TextContent, UserMessage
from pi_kernel.ai.messages import text_of

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


# --------------------------------------------------------------------------- agent queues end with run


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


# --------------------------------------------------------------------------- agent cancel


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
