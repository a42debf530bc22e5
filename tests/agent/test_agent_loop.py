"""The agent loop: turn structure and events, continuing, the async-iterator form.

Ports of pi's ``agent-loop.test.ts`` behaviours, driven by the in-process
``ScriptedModel``. Preflight and ``AgentTool`` in ``test_agent_loop_preflight.py``, hooks in
``test_agent_loop_hooks.py``, batches, threads, truncation, failed messages and terminate in
``test_agent_loop_tools.py``,
abort in ``test_agent_loop_abort.py``, steering, follow-ups and per-turn hooks in
``test_agent_loop_turns.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scripted_model import (
    EchoParams,
    ScriptedModel,
    assert_one_result_per_call,
    echo_tool,
    event_types,
    make_tool,
    run_loop,
    text_message,
    tool_call,
    tool_call_message,
    user,
)

from pi_kernel.agent import (
    AgentLoopConfig,
    AgentToolResult,
    agent_loop,
)
from pi_kernel.ai import Context, TextContent

# --------------------------------------------------------------------------- event order


async def test_text_answer_event_order() -> None:
    model = ScriptedModel([text_message("Hi there!")])
    events, messages = await run_loop(model, [user("Hello")])

    assert event_types(events, updates=False) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    updates = [event.assistant_message_event.type for event in events if event.type == "message_update"]
    assert updates == ["text_start", "text_delta", "text_delta", "text_end"]
    assert [message.role for message in messages] == ["user", "assistant"]
    assert messages[1].text == "Hi there!"
    assert events[-1].messages is messages


async def test_tool_round_trip_event_order() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "hello"}, id="c1")), text_message("done")])
    events, messages = await run_loop(model, [user("echo something")], tools=[echo_tool()])

    assert event_types(events, updates=False) == [
        "agent_start",
        "turn_start",
        "message_start",  # user
        "message_end",
        "message_start",  # assistant asking for the tool
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",  # tool result
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",  # final answer
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert [message.role for message in messages] == ["user", "assistant", "tool_result", "assistant"]
    turn_end = next(event for event in events if event.type == "turn_end")
    assert turn_end.message is messages[1]
    assert turn_end.tool_results == [messages[2]]
    assert messages[2].text == "echoed: hello"
    assert messages[2].tool_call_id == "c1" and not messages[2].is_error
    # The second request replays the call and its result.
    assert [message.role for message in model.requests[1].messages] == ["user", "assistant", "tool_result"]


async def test_message_updates_carry_the_growing_partial_and_the_provider_event() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "abcdefghijkl"}))], chunk_chars=4)
    seen: list[tuple[str, str | None]] = []

    async def emit(event: Any) -> None:
        if event.type == "message_update":
            assert event.message is event.assistant_message_event.partial
            seen.append((event.assistant_message_event.type, event.assistant_message_event.delta))

    from pi_kernel.agent import run_agent_loop

    await run_agent_loop(
        [user("x")], Context("", [], [echo_tool(terminate=True)]), AgentLoopConfig(model.model, model), emit
    )
    kinds = [kind for kind, _ in seen]
    assert kinds[0] == "toolcall_start" and kinds[-1] == "toolcall_end"
    assert "".join(delta or "" for kind, delta in seen if kind == "toolcall_delta") == '{"value": "abcdefghijkl"}'


async def test_tool_execution_events_carry_raw_arguments_and_execute_gets_validated_params() -> None:
    received: list[Any] = []

    def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        received.append(params)
        return AgentToolResult([TextContent("ok")], details={"n": 1})

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "v"}, id="c1")), text_message("done")])
    events, messages = await run_loop(model, [user("go")], tools=[make_tool("echo", execute)])
    start = next(event for event in events if event.type == "tool_execution_start")
    end = next(event for event in events if event.type == "tool_execution_end")
    assert (start.tool_call_id, start.tool_name, start.args) == ("c1", "echo", {"value": "v"})
    assert isinstance(received[0], EchoParams) and received[0].value == "v"
    assert end.result.details == {"n": 1} and end.is_error is False
    assert messages[2].details == {"n": 1}


async def test_continue_from_context_emits_no_prompt_events() -> None:
    from pi_kernel.agent import agent_loop_continue

    model = ScriptedModel([text_message("Response")])
    stream = agent_loop_continue(Context("sys", [user("Hello")], []), AgentLoopConfig(model.model, model))
    events = [event async for event in stream]
    messages = await stream.result()
    assert [message.role for message in messages] == ["assistant"]
    assert [event.message.role for event in events if event.type == "message_end"] == ["assistant"]
    assert event_types(events, updates=False)[:2] == ["agent_start", "turn_start"]


def test_continue_refuses_an_empty_context_or_an_assistant_tail() -> None:
    from pi_kernel.agent import agent_loop_continue

    model = ScriptedModel()
    config = AgentLoopConfig(model.model, model)
    with pytest.raises(ValueError, match="Cannot continue: no messages in context"):
        agent_loop_continue(Context("", [], []), config)
    with pytest.raises(ValueError, match="Cannot continue from message role: assistant"):
        agent_loop_continue(Context("", [user("hi"), text_message("hello")], []), config)
    assert model.call_count == 0


async def test_agent_loop_does_not_change_the_given_context() -> None:
    history: list[Any] = [user("old")]
    context = Context("sys", history, [])
    model = ScriptedModel([text_message("new")])
    messages = await agent_loop([user("new")], context, AgentLoopConfig(model.model, model)).result()
    assert context.messages is history and history == [history[0]]
    assert [message.role for message in messages] == ["user", "assistant"]


# --------------------------------------------------------------------------- failures outside tools


async def test_an_exception_in_transform_context_is_raised_from_the_iteration() -> None:
    def transform(messages: list[Any], signal: Any) -> list[Any]:
        raise RuntimeError("transform broke")

    model = ScriptedModel([text_message("never")])
    stream = agent_loop(
        [user("x")], Context("", [], []), AgentLoopConfig(model.model, model, transform_context=transform)
    )
    seen: list[str] = []
    with pytest.raises(RuntimeError, match="transform broke"):
        async for event in stream:
            seen.append(event.type)
    assert seen[:2] == ["agent_start", "turn_start"] and model.call_count == 0


async def test_leaving_the_iteration_early_cancels_the_run() -> None:
    cancelled = asyncio.Event()

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult([TextContent("working")]))
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("never")])
    stream = agent_loop([user("x")], Context("", [], [make_tool("t", execute)]), AgentLoopConfig(model.model, model))
    iterator = stream.__aiter__()
    async for event in iterator:
        if event.type == "tool_execution_update":
            break  # the tool is running; walk away from the run
    await iterator.aclose()  # what garbage collection of the iterator would do a little later
    await asyncio.wait_for(cancelled.wait(), 5)
    assert model.call_count == 1
    with pytest.raises(RuntimeError, match="did not finish"):
        await stream.result()


async def test_the_iterator_waits_for_the_consumer_after_each_event() -> None:
    # The partial message grows in place; if the loop ran ahead of the consumer,
    # a delta event would show more text than the deltas delivered so far.
    model = ScriptedModel([text_message("abcdefgh")], chunk_chars=1)
    stream = agent_loop([user("x")], Context("", [], []), AgentLoopConfig(model.model, model))
    delivered = ""
    async for event in stream:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            delivered += event.assistant_message_event.delta or ""
            await asyncio.sleep(0)
            assert event.message.text == delivered
    assert delivered == "abcdefgh"
    assert [message.role for message in await stream.result()] == ["user", "assistant"]


def test_every_result_helper_catches_a_missing_result() -> None:
    call = tool_call("t", {}, id="lonely")
    with pytest.raises(AssertionError):
        assert_one_result_per_call([user("x"), tool_call_message(call)])
