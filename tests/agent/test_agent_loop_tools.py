"""Tool batches: parallel and sequential order, concurrency, ``on_update`` from
threads, contextvars, sync and async tools.

The sync tools' worker threads: a hung call the run gave up on never starves the calls after it (issue 13).

How tool batches end a run: truncated messages, failed messages, ``terminate``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from scripted_model import (
    EchoParams,
    ScriptedModel,
    assistant_message,
    echo_tool,
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
    AfterToolCallContext,
    AfterToolCallResult,
    AgentToolResult,
    BeforeToolCallContext,
    tool_execution,
    truncated_call_text,
)
from pi_kernel.agent.tool_execution import WorkerPool, run_in_worker
from pi_kernel.ai import TextContent

# --------------------------------------------------------------------------- parallel and sequential


async def test_parallel_batch_ends_in_completion_order_and_results_in_source_order() -> None:
    release_first = asyncio.Event()
    order: list[str] = []

    async def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        order.append(f"start:{params.value}")
        if params.value == "first":
            await release_first.wait()
        else:
            release_first.set()  # only reachable while "first" is still running
        order.append(f"end:{params.value}")
        return AgentToolResult([TextContent(params.value)])

    model = ScriptedModel(
        [
            tool_call_message(
                tool_call("t", {"value": "first"}, id="t1"), tool_call("t", {"value": "second"}, id="t2")
            ),
            text_message("done"),
        ]
    )
    events, _messages = await run_loop(model, [user("x")], tools=[make_tool("t", execute)])

    assert order == ["start:first", "start:second", "end:second", "end:first"]
    tool_events = [(event.type, event.tool_call_id) for event in events if event.type.startswith("tool_execution")]
    assert tool_events == [
        ("tool_execution_start", "t1"),
        ("tool_execution_start", "t2"),
        ("tool_execution_end", "t2"),
        ("tool_execution_end", "t1"),
    ]
    result_ids = [
        event.message.tool_call_id
        for event in events
        if event.type == "message_end" and event.message.role == "tool_result"
    ]
    assert result_ids == ["t1", "t2"]
    turn_end = next(event for event in events if event.type == "turn_end")
    assert [result.tool_call_id for result in turn_end.tool_results] == ["t1", "t2"]
    last_end = max(index for index, event in enumerate(events) if event.type == "tool_execution_end")
    first_result = next(
        index
        for index, event in enumerate(events)
        if event.type == "message_start" and event.message.role == "tool_result"
    )
    assert last_end < first_result  # result messages come after the whole batch


async def test_preflight_outcomes_end_at_once_before_the_batch_runs() -> None:
    model = ScriptedModel(
        [
            tool_call_message(tool_call("echo", {"value": "a"}, id="ok"), tool_call("missing", {}, id="gone")),
            text_message("done"),
        ]
    )
    events, _ = await run_loop(model, [user("x")], tools=[echo_tool()])
    tool_events = [(event.type, event.tool_call_id) for event in events if event.type.startswith("tool_execution")]
    assert tool_events == [
        ("tool_execution_start", "ok"),
        ("tool_execution_start", "gone"),
        ("tool_execution_end", "gone"),
        ("tool_execution_end", "ok"),
    ]


def _overlap_probe() -> tuple[list[str], Any]:
    order: list[str] = []
    active = {"n": 0, "max": 0}

    async def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        active["n"] += 1
        active["max"] = max(active["max"], active["n"])
        order.append(f"start:{params.value}")
        await asyncio.sleep(0.01)
        order.append(f"end:{params.value}")
        active["n"] -= 1
        return AgentToolResult([TextContent(params.value)])

    return order, (execute, active)


async def test_sequential_mode_by_config_runs_one_call_at_a_time() -> None:
    order, (execute, active) = _overlap_probe()
    model = ScriptedModel(
        [
            tool_call_message(tool_call("t", {"value": "a"}, id="a"), tool_call("t", {"value": "b"}, id="b")),
            text_message("ok"),
        ]
    )
    events, _ = await run_loop(model, [user("x")], tools=[make_tool("t", execute)], tool_execution="sequential")
    assert active["max"] == 1
    assert order == ["start:a", "end:a", "start:b", "end:b"]
    # Each call's result message comes right after it, before the next call starts.
    sequence = [
        (
            event.type,
            getattr(event, "tool_call_id", None) or getattr(getattr(event, "message", None), "tool_call_id", None),
        )
        for event in events
        if event.type.startswith("tool_execution")
        or (event.type == "message_end" and event.message.role == "tool_result")
    ]
    assert sequence == [
        ("tool_execution_start", "a"),
        ("tool_execution_end", "a"),
        ("message_end", "a"),
        ("tool_execution_start", "b"),
        ("tool_execution_end", "b"),
        ("message_end", "b"),
    ]


async def test_one_sequential_tool_makes_the_whole_batch_sequential() -> None:
    order, (execute, active) = _overlap_probe()
    slow = make_tool("slow", execute, execution_mode="sequential")
    fast = make_tool("fast", execute)
    model = ScriptedModel(
        [tool_call_message(tool_call("slow", {"value": "a"}), tool_call("fast", {"value": "b"})), text_message("ok")]
    )
    await run_loop(model, [user("x")], tools=[slow, fast])
    assert active["max"] == 1 and order == ["start:a", "end:a", "start:b", "end:b"]


async def test_parallel_tools_overlap_when_all_are_parallel() -> None:
    _order, (execute, active) = _overlap_probe()
    model = ScriptedModel(
        [tool_call_message(tool_call("t", {"value": "a"}), tool_call("t", {"value": "b"})), text_message("ok")]
    )
    await run_loop(model, [user("x")], tools=[make_tool("t", execute)])
    assert active["max"] == 2


async def test_eight_sync_tools_run_at_the_same_time() -> None:
    # A barrier of 8 only opens when all 8 sync tools run at once (the loop's
    # default executor has 6 workers on 2 cores; the tool pool has 32).
    barrier = threading.Barrier(8, timeout=10)

    def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        barrier.wait()
        return AgentToolResult([TextContent(params.value)])

    calls = [tool_call("t", {"value": str(index)}) for index in range(8)]
    model = ScriptedModel([tool_call_message(*calls), text_message("ok")])
    _, messages = await run_loop(model, [user("x")], tools=[make_tool("t", execute)])
    assert [result.text for result in tool_results(messages)] == [str(index) for index in range(8)]
    assert not any(result.is_error for result in tool_results(messages))


# --------------------------------------------------------------------------- updates, threads, contextvars


async def test_on_update_from_a_sync_tool_thread_arrives_in_order_before_the_end() -> None:

    def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        for index in range(20):
            on_update(AgentToolResult([TextContent(f"step {index}")]))
        return AgentToolResult([TextContent("done")])

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"}, id="c1")), text_message("ok")])
    events, _ = await run_loop(model, [user("x")], tools=[make_tool("t", execute)])
    tool_events = [event for event in events if event.type.startswith("tool_execution")]
    updates = [event.partial_result.content[0].text for event in tool_events if event.type == "tool_execution_update"]
    assert updates == [f"step {index}" for index in range(20)]
    assert [event.type for event in tool_events][-1] == "tool_execution_end"
    assert all(event.args == {"value": "x"} for event in tool_events if event.type == "tool_execution_update")


async def test_on_update_from_an_async_tool() -> None:
    async def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult([TextContent("half")]))
        await asyncio.sleep(0)
        on_update(AgentToolResult([TextContent("almost")]))
        return AgentToolResult([TextContent("done")])

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("ok")])
    events, _ = await run_loop(model, [user("x")], tools=[make_tool("t", execute)])
    kinds = [
        (event.type, event.partial_result.content[0].text if event.type == "tool_execution_update" else None)
        for event in events
        if event.type.startswith("tool_execution")
    ]
    assert kinds == [
        ("tool_execution_start", None),
        ("tool_execution_update", "half"),
        ("tool_execution_update", "almost"),
        ("tool_execution_end", None),
    ]


async def test_an_update_from_a_settled_call_is_ignored_while_another_call_runs() -> None:
    # pi: "should ignore a settled parallel tool update while another tool is still running"
    from pi_kernel.agent import Agent

    leaked: list[Any] = []
    release = asyncio.Event()

    async def quick(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        leaked.append(on_update)
        return AgentToolResult([TextContent("quick done")])

    async def slow(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        await release.wait()
        return AgentToolResult([TextContent("slow done")])

    model = ScriptedModel(
        [
            tool_call_message(tool_call("quick", {"value": 1}, id="q"), tool_call("slow", {"value": 2}, id="s")),
            text_message("ok"),
        ]
    )
    agent = Agent(model.model, stream_fn=model, tools=[make_tool("quick", quick), make_tool("slow", slow)])
    events: list[Any] = []

    async def listener(event: Any) -> None:
        events.append(event)
        if event.type == "tool_execution_end" and event.tool_call_id == "q":
            leaked[0](AgentToolResult([TextContent("late")]))  # "slow" is still running
            await asyncio.sleep(0.01)
            release.set()

    agent.subscribe(listener)
    await agent.prompt("go")
    assert [(e.type, e.tool_call_id) for e in events if e.type.startswith("tool_execution")] == [
        ("tool_execution_start", "q"),
        ("tool_execution_start", "s"),
        ("tool_execution_end", "q"),
        ("tool_execution_end", "s"),
    ]


async def test_an_update_after_execute_returned_is_ignored() -> None:
    # pi stops accepting updates once execute settles, before after_tool_call runs:
    # neither the loop thread nor a thread the tool left behind can add one.
    leaked: list[Any] = []

    def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult([TextContent("while running")]))
        leaked.append(on_update)
        return AgentToolResult([TextContent("done")])

    async def after(ctx: AfterToolCallContext, signal: Any) -> None:
        leaked[0](AgentToolResult([TextContent("from after_tool_call")]))
        # From another thread: had it been posted, it would be in the inbox
        # (one FIFO of thread-safe callbacks) before this call's end.
        await asyncio.to_thread(leaked[0], AgentToolResult([TextContent("from a thread")]))
        await asyncio.sleep(0.01)

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("ok")])
    events, _ = await run_loop(model, [user("x")], tools=[make_tool("t", execute)], after_tool_call=after)
    updates = [e.partial_result.content[0].text for e in events if e.type == "tool_execution_update"]
    assert updates == ["while running"]


async def test_a_sync_tool_runs_off_the_loop_with_contextvars() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("from the caller")
    seen: dict[str, Any] = {}
    loop = asyncio.get_running_loop()
    tool_started = asyncio.Event()
    released = threading.Event()

    def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        seen["var"] = var.get()
        seen["thread"] = threading.current_thread().name
        loop.call_soon_threadsafe(tool_started.set)
        # Only a coroutine on the loop can release it: on the loop thread this would time out.
        seen["released"] = released.wait(10)
        return AgentToolResult([TextContent("released")])

    async def release_when_started() -> None:
        await tool_started.wait()
        released.set()

    releasing = asyncio.create_task(release_when_started())
    try:
        model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("ok")])
        _, messages = await run_loop(model, [user("x")], tools=[make_tool("t", execute)])
    finally:
        releasing.cancel()
    assert seen["released"] is True  # set by the loop while the tool blocked, not timed out
    assert seen["var"] == "from the caller"
    assert seen["thread"].startswith("pi-tool")
    assert tool_results(messages)[0].text == "released"


async def test_a_sync_callable_returning_a_coroutine_is_awaited() -> None:
    async def later(value: str) -> AgentToolResult:
        return AgentToolResult([TextContent(f"async {value}")])

    tool = make_tool("t", lambda tool_call_id, params, signal, on_update: later(params.value))
    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("ok")])
    _, messages = await run_loop(model, [user("x")], tools=[tool])
    assert tool_results(messages)[0].text == "async x"


async def test_sync_hooks_and_async_hooks_are_both_accepted() -> None:
    calls: list[str] = []

    class AsyncBefore:
        async def __call__(self, ctx: BeforeToolCallContext, signal: Any) -> None:
            calls.append("before")

    def after(ctx: AfterToolCallContext, signal: Any) -> None:
        calls.append("after")

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "x"})), text_message("ok")])
    await run_loop(model, [user("x")], tools=[echo_tool()], before_tool_call=AsyncBefore(), after_tool_call=after)
    assert calls == ["before", "after"]


async def test_a_sync_tool_calling_sys_exit_becomes_an_error_result() -> None:
    import sys

    def quitter(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        sys.exit(3)

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("ok")])
    _, messages = await run_loop(model, [user("x")], tools=[make_tool("t", quitter)])
    result = tool_results(messages)[0]
    assert (result.text, result.is_error) == ("SystemExit: 3", True)
    assert model.call_count == 2  # the loop (the kernel) lives on


@pytest.mark.parametrize(
    ("error", "text"), [(SystemExit(3), "SystemExit: 3"), (KeyboardInterrupt(), "KeyboardInterrupt")]
)
async def test_an_async_tool_raising_system_exit_or_keyboard_interrupt_becomes_an_error_result(
    error: BaseException, text: str
) -> None:
    async def quitter(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        await asyncio.sleep(0)
        raise error

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("ok")])
    _, messages = await run_loop(model, [user("x")], tools=[make_tool("t", quitter)])
    result = tool_results(messages)[0]
    assert (result.text, result.is_error) == (text, True)
    assert model.call_count == 2  # as for a sync tool: the loop (the kernel) lives on


async def test_tools_always_get_a_signal_even_when_the_run_has_none() -> None:
    seen: list[Any] = []

    def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen.append(signal.aborted)
        return AgentToolResult([TextContent("ok")])

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("ok")])
    await run_loop(model, [user("x")], tools=[make_tool("t", execute)])
    assert seen == [False]


# --------------------------------------------------------------------------- tool workers


async def test_hung_calls_given_up_on_do_not_starve_the_next_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_execution, "_pool", WorkerPool(max_workers=2))
    release = threading.Event()
    started = threading.Semaphore(0)

    def hang() -> str:
        started.release()
        release.wait(30)  # a sync tool blocked in a C call: nothing can stop its thread
        return "late"

    try:
        hung = [asyncio.ensure_future(run_in_worker(hang)) for _ in range(2)]
        for _ in hung:
            assert await asyncio.to_thread(started.acquire, True, 10)
        for task in hung:
            task.cancel()  # what an abort does to calls that ignore it
        await asyncio.gather(*hung, return_exceptions=True)
        assert await asyncio.wait_for(run_in_worker(lambda: "quick"), 5) == "quick"
        queued = [asyncio.ensure_future(run_in_worker(lambda n=n: n)) for n in range(5)]
        assert await asyncio.wait_for(asyncio.gather(*queued), 5) == [0, 1, 2, 3, 4]
    finally:
        release.set()


# --------------------------------------------------------------------------- agent loop stops


# --------------------------------------------------------------------------- truncation and failed messages


async def test_a_truncated_message_runs_none_of_its_tool_calls() -> None:
    hooks: list[str] = []
    executed: list[str] = []

    def prepare(args: Any) -> Any:
        hooks.append("prepare_arguments")
        return args

    truncated = tool_call_message(
        tool_call("echo", {"value": "hel"}, id="c1"), tool_call("missing", {"x": 1}, id="c2"), stop_reason="length"
    )
    model = ScriptedModel([truncated, text_message("done")])
    events, messages = await run_loop(
        model,
        [user("x")],
        tools=[echo_tool(executed=executed, prepare_arguments=prepare)],
        before_tool_call=lambda ctx, signal: hooks.append("before"),
        after_tool_call=lambda ctx, signal: hooks.append("after"),
    )
    assert executed == [] and hooks == []
    results = tool_results(messages)
    assert [result.text for result in results] == [
        'Tool call "echo" was not executed: the response hit the output token limit, so its arguments may be '
        "truncated. Re-issue the tool call with complete arguments.",
        truncated_call_text("missing"),
    ]
    assert all(result.is_error for result in results)
    assert [(e.type, e.tool_call_id) for e in events if e.type.startswith("tool_execution")] == [
        ("tool_execution_start", "c1"),
        ("tool_execution_end", "c1"),
        ("tool_execution_start", "c2"),
        ("tool_execution_end", "c2"),
    ]
    assert model.call_count == 2  # the model is asked again
    assert messages[-1].text == "done"


async def test_a_truncated_text_answer_ends_the_run() -> None:
    model = ScriptedModel([text_message("cut of", stop_reason="length"), text_message("never")])
    _, messages = await run_loop(model, [user("x")])
    assert model.call_count == 1 and messages[-1].stop_reason == "length"


@pytest.mark.parametrize("stop_reason", ["error", "aborted"])
async def test_an_error_or_aborted_message_ends_the_run_without_running_tools(stop_reason: str) -> None:
    executed: list[str] = []
    failed = assistant_message(
        tool_call("echo", {"value": "x"}),
        stop_reason=stop_reason,  # type: ignore[arg-type]
        error_message="upstream 500",
    )
    model = ScriptedModel([failed, text_message("never")])
    events, messages = await run_loop(model, [user("x")], tools=[echo_tool(executed=executed)])
    assert executed == [] and model.call_count == 1
    assert [message.role for message in messages] == ["user", "assistant"]
    assert messages[-1].stop_reason == stop_reason and messages[-1].error_message == "upstream 500"
    assert event_types(events, updates=False)[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    turn_end = next(event for event in events if event.type == "turn_end")
    assert turn_end.tool_results == [] and not any(e.type.startswith("tool_execution") for e in events)


# --------------------------------------------------------------------------- terminate


async def test_terminate_stops_when_every_result_asks() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "a"}), tool_call("echo", {"value": "b"}))])
    events, messages = await run_loop(model, [user("x")], tools=[echo_tool(terminate=True)])
    assert model.call_count == 1
    assert [message.role for message in messages] == ["user", "assistant", "tool_result", "tool_result"]
    assert event_types(events).count("turn_end") == 1


async def test_terminate_is_ignored_when_only_some_results_ask() -> None:
    def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(params.value)], terminate=params.value == "first")

    model = ScriptedModel(
        [
            tool_call_message(tool_call("t", {"value": "first"}), tool_call("t", {"value": "second"})),
            text_message("done"),
        ]
    )
    _, messages = await run_loop(model, [user("x")], tools=[make_tool("t", execute)])
    assert model.call_count == 2
    assert [message.role for message in messages] == ["user", "assistant", "tool_result", "tool_result", "assistant"]


async def test_after_hook_can_mark_the_batch_as_terminating() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "a"})), text_message("never")])
    await run_loop(
        model, [user("x")], tools=[echo_tool()], after_tool_call=lambda ctx, signal: AfterToolCallResult(terminate=True)
    )
    assert model.call_count == 1
