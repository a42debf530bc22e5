"""Abort: during streaming, async tools, sync tools, an approval wait, a sequential batch.

In every case each tool call gets exactly one result (``run_loop`` checks it),
no model request follows the abort, and the run ends with turn_end, agent_end.
A running tool that honours the abort keeps its own result; one that ignores
it is cancelled after ``ABORT_GRACE`` (``set_abort_grace``) and gets
``Operation aborted``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from scripted_model import (
    ScriptedModel,
    event_types,
    make_tool,
    run_loop,
    text_message,
    tool_call,
    tool_call_message,
    tool_results,
    user,
)

from pi_kernel.agent import (
    AbortController,
    AgentLoopConfig,
    AgentToolResult,
    BeforeToolCallContext,
    agent_loop,
    tool_execution,
)
from pi_kernel.ai import Context, TextContent


def set_abort_grace(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """How long running tool calls get to honour an abort before they are cancelled.

    Long for a test whose tool honours it (the tool's own result must win, on
    any machine), 0 for one whose tool ignores it (nothing to wait for).
    """
    monkeypatch.setattr(tool_execution, "ABORT_GRACE", seconds)


def abort_from_another_thread(controller: AbortController, when: threading.Event) -> threading.Thread:
    def wait_then_abort() -> None:
        if when.wait(10):
            controller.abort()

    thread = threading.Thread(target=wait_then_abort, daemon=True)
    thread.start()
    return thread


async def test_abort_during_streaming_ends_with_an_aborted_message() -> None:
    controller = AbortController()
    model = ScriptedModel([text_message("abcdefghijklmnop"), text_message("never")], chunk_chars=1)
    stream = agent_loop([user("go")], Context("", [], []), AgentLoopConfig(model.model, model), controller.signal)
    events = []
    async for event in stream:
        events.append(event)
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            controller.abort()
    messages: list[Any] = await stream.result()

    assert model.call_count == 1
    assert messages[-1].stop_reason == "aborted" and messages[-1].error_message == "Operation aborted"
    assert messages[-1].text == "a"  # what had streamed before the abort
    assert event_types(events, updates=False)[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    assert model.requests[0].options.signal is controller.signal  # the provider gets the run's signal


async def test_an_already_aborted_signal_sends_no_request() -> None:
    controller = AbortController()
    controller.abort()
    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"}))])
    _, messages = await run_loop(model, [user("go")], tools=[make_tool("t")], signal=controller.signal)
    assert [message.role for message in messages] == ["user", "assistant"]
    assert messages[-1].stop_reason == "aborted" and messages[-1].error_message == "Operation aborted"
    assert model.call_count == 0


async def test_an_async_tool_that_ignores_the_abort_is_cancelled_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_abort_grace(monkeypatch, 0)
    controller = AbortController()
    started, cancelled = threading.Event(), threading.Event()

    quick_done = asyncio.Event()

    async def quick(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        quick_done.set()
        return AgentToolResult([TextContent("quick result")])

    async def slow(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        await quick_done.wait()
        await asyncio.sleep(0.01)  # the quick call has finished by now
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("unreachable")

    follow_up_polls = 0

    def follow_ups() -> list[Any]:
        nonlocal follow_up_polls
        follow_up_polls += 1
        return [user("more")]

    model = ScriptedModel(
        [
            tool_call_message(tool_call("quick", {"value": "q"}, id="q"), tool_call("slow", {"value": "s"}, id="s")),
            text_message("never"),
        ]
    )
    abort_from_another_thread(controller, started)
    events, messages = await run_loop(
        model,
        [user("go")],
        tools=[make_tool("quick", quick), make_tool("slow", slow)],
        signal=controller.signal,
        get_follow_up_messages=follow_ups,
    )
    assert cancelled.is_set()
    quick_result, slow_result = tool_results(messages)
    assert (quick_result.text, quick_result.is_error) == ("quick result", False)
    assert (slow_result.text, slow_result.is_error) == ("Operation aborted", True)
    assert model.call_count == 1 and follow_up_polls == 0
    assert event_types(events, updates=False)[-2:] == ["turn_end", "agent_end"]
    ends = [event.tool_call_id for event in events if event.type == "tool_execution_end"]
    assert sorted(ends) == ["q", "s"]


async def test_a_sync_tool_that_ignores_the_abort_is_not_waited_for_after_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_abort_grace(monkeypatch, 0)
    controller = AbortController()
    started, saw_abort, release, finished = (threading.Event() for _ in range(4))

    def stubborn(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        while not signal.aborted:
            signal_seen = release.wait(0.005)
            assert not signal_seen
        saw_abort.set()
        release.wait(10)  # still running when the loop has moved on
        on_update(AgentToolResult([TextContent("too late")]))
        finished.set()
        return AgentToolResult([TextContent("dropped")])

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"}, id="c1")), text_message("never")])
    abort_from_another_thread(controller, started)
    try:
        events, messages = await run_loop(
            model, [user("go")], tools=[make_tool("t", stubborn)], signal=controller.signal
        )
        assert not finished.is_set()  # the run ended while the thread still ran
        assert await asyncio.to_thread(saw_abort.wait, 10)  # and the tool sees the abort
    finally:
        release.set()  # let the thread end (its late update and result go nowhere)
    assert tool_results(messages)[0].text == "Operation aborted"
    assert model.call_count == 1
    assert events[-1].type == "agent_end"


async def test_a_sync_tool_that_honours_the_abort_keeps_what_it_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    set_abort_grace(monkeypatch, 30)  # the tool's own return ends the wait, not the grace
    controller = AbortController()
    started = threading.Event()

    def careful(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        aborted = threading.Event()
        signal.add_listener(lambda reason: aborted.set())
        started.set()
        assert aborted.wait(10)
        on_update(AgentToolResult([TextContent("cleaning up")]))  # still counts: execute has not returned
        return AgentToolResult([TextContent("partial")], details={"rows": 3})

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"}, id="c1")), text_message("never")])
    abort_from_another_thread(controller, started)
    events, messages = await asyncio.wait_for(
        run_loop(model, [user("go")], tools=[make_tool("t", careful)], signal=controller.signal), 20
    )
    [result] = tool_results(messages)
    assert (result.text, result.is_error, result.details) == ("partial", False, {"rows": 3})
    updates = [event.partial_result.content[0].text for event in events if event.type == "tool_execution_update"]
    assert updates == ["cleaning up"]
    end = next(event for event in events if event.type == "tool_execution_end")
    assert end.result.content[0].text == "partial"
    assert model.call_count == 1 and events[-1].type == "agent_end"


async def test_an_async_tool_that_raises_its_own_abort_error_keeps_its_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As the bash tool does: the output so far, then "Command aborted".
    set_abort_grace(monkeypatch, 30)
    controller = AbortController()
    started = threading.Event()

    async def shell(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        await signal.wait()
        await asyncio.sleep(0)  # the tool's own cleanup (killing the process group) takes loop turns
        raise RuntimeError("line 1\nline 2\n\nCommand aborted")

    model = ScriptedModel([tool_call_message(tool_call("bash", {"value": "x"})), text_message("never")])
    abort_from_another_thread(controller, started)
    _, messages = await asyncio.wait_for(
        run_loop(model, [user("go")], tools=[make_tool("bash", shell)], signal=controller.signal), 20
    )
    [result] = tool_results(messages)
    assert (result.text, result.is_error) == ("line 1\nline 2\n\nCommand aborted", True)
    assert model.call_count == 1


async def test_a_sync_tool_calling_throw_if_aborted_gets_operation_aborted(monkeypatch: pytest.MonkeyPatch) -> None:
    set_abort_grace(monkeypatch, 30)
    controller = AbortController()
    started = threading.Event()

    def checking(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        aborted = threading.Event()
        signal.add_listener(lambda reason: aborted.set())
        started.set()
        assert aborted.wait(10)
        signal.throw_if_aborted()  # raises CancelledError("Operation aborted") in the worker thread
        raise AssertionError("unreachable")

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("never")])
    abort_from_another_thread(controller, started)
    _, messages = await asyncio.wait_for(
        run_loop(model, [user("go")], tools=[make_tool("t", checking)], signal=controller.signal), 20
    )
    [result] = tool_results(messages)
    assert (result.text, result.is_error) == ("Operation aborted", True)


async def test_abort_while_before_hook_waits_for_approval() -> None:
    controller = AbortController()
    entered = threading.Event()
    hook_calls: list[str] = []
    hook_cancelled = asyncio.Event()
    executed: list[Any] = []

    async def approval(ctx: BeforeToolCallContext, signal: Any) -> None:
        hook_calls.append(ctx.tool_call.id)
        entered.set()
        try:
            await asyncio.Event().wait()  # nobody ever clicks
        except asyncio.CancelledError:
            hook_cancelled.set()
            raise

    calls = [tool_call("t", {"value": index}, id=f"c{index}") for index in range(3)]
    model = ScriptedModel([tool_call_message(*calls), text_message("never")])
    abort_from_another_thread(controller, entered)
    events, messages = await asyncio.wait_for(
        run_loop(
            model,
            [user("go")],
            tools=[make_tool("t", executed=executed)],
            signal=controller.signal,
            before_tool_call=approval,
        ),
        10,
    )
    assert hook_calls == ["c0"] and hook_cancelled.is_set() and executed == []
    assert [(result.tool_call_id, result.text) for result in tool_results(messages)] == [
        ("c0", "Operation aborted"),
        ("c1", "Operation aborted"),
        ("c2", "Operation aborted"),
    ]
    starts = [event.tool_call_id for event in events if event.type == "tool_execution_start"]
    ends = [event.tool_call_id for event in events if event.type == "tool_execution_end"]
    assert starts == ends == ["c0", "c1", "c2"]
    assert model.call_count == 1


async def test_a_hook_that_swallows_the_cancellation_cannot_hold_the_loop() -> None:
    controller = AbortController()
    entered = threading.Event()
    let_go = asyncio.Event()

    async def stubborn(ctx: BeforeToolCallContext, signal: Any) -> None:
        entered.set()
        while not let_go.is_set():
            try:
                await let_go.wait()
            except asyncio.CancelledError:
                continue  # refuses to stop

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": 1})), text_message("never")])
    abort_from_another_thread(controller, entered)
    try:
        _, messages = await asyncio.wait_for(
            run_loop(model, [user("go")], tools=[make_tool("t")], signal=controller.signal, before_tool_call=stubborn),
            10,
        )
    finally:
        let_go.set()
    assert tool_results(messages)[0].text == "Operation aborted"


async def test_abort_in_a_sequential_batch_skips_the_calls_not_yet_run(monkeypatch: pytest.MonkeyPatch) -> None:
    set_abort_grace(monkeypatch, 0)  # "first" ignores the abort
    controller = AbortController()
    executed: list[str] = []

    async def first(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        executed.append(tool_call_id)
        controller.abort()
        await asyncio.sleep(10)
        raise AssertionError("unreachable")

    model = ScriptedModel(
        [
            tool_call_message(tool_call("t", {"value": 1}, id="a"), tool_call("t", {"value": 2}, id="b")),
            text_message("x"),
        ]
    )
    events, messages = await asyncio.wait_for(
        run_loop(
            model,
            [user("go")],
            tools=[make_tool("t", first)],
            signal=controller.signal,
            tool_execution="sequential",
        ),
        5,
    )
    assert executed == ["a"]
    assert [(result.tool_call_id, result.text) for result in tool_results(messages)] == [
        ("a", "Operation aborted"),
        ("b", "Operation aborted"),
    ]
    tool_events = [(event.type, event.tool_call_id) for event in events if event.type.startswith("tool_execution")]
    assert tool_events == [
        ("tool_execution_start", "a"),
        ("tool_execution_end", "a"),
        ("tool_execution_start", "b"),
        ("tool_execution_end", "b"),
    ]
    assert model.call_count == 1
