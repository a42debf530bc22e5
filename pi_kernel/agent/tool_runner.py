"""Running prepared tool calls at the same time, with updates and abort.

One coroutine, ``run_prepared_tool_calls``, emits every event of the running
calls, so listeners never see two events at once. Each call runs as an asyncio
task (execute, then ``after_tool_call``); everything the calls report reaches
that coroutine through one inbox queue, in the order it happened:

- ``on_update(partial)`` → a ``tool_execution_update`` event. Sync tools call
  it from their worker thread, so it is handed over with
  ``call_soon_threadsafe``. As in pi, updates stop counting once ``execute``
  has returned (or raised): later calls, from ``after_tool_call`` or a thread
  the tool left behind, are dropped.
- a task finishing → its ``tool_execution_end`` (completion order). A sync
  tool's updates are queued before its completion (both travel through the
  loop's FIFO of thread-safe callbacks), so they always come first.
- the abort signal (from any thread) → every call still running is cancelled
  and gets ``Operation aborted`` at once, in source order. Cancelled async
  tools then get up to ``ABORT_CLEANUP_GRACE`` seconds to unwind (their
  ``finally`` blocks run before the run ends). The loop does not wait for a
  sync tool to notice the abort: its thread runs on and sees
  ``signal.aborted``; whatever it returns later is dropped.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Sequence
from typing import Any

from pi_kernel.agent.events import ToolExecutionUpdateEvent
from pi_kernel.agent.tool_execution import (
    Emit,
    FinalizedToolCall,
    PreparedToolCall,
    aborted_call,
    emit_tool_execution_end,
    error_result,
    error_text,
    execute_prepared_tool_call,
    finalize_executed_tool_call,
)
from pi_kernel.agent.types import AgentLoopConfig, AgentToolResult
from pi_kernel.ai import AbortSignal, AssistantMessage, Context

_UPDATE, _DONE, _ABORT = 0, 1, 2

ABORT_CLEANUP_GRACE = 1.0
"""Seconds an aborted run waits, after giving every interrupted call its
result, for cancelled async tools to finish their ``finally`` blocks."""


InboxItem = tuple[int, int, Any]
"""``(kind, call index, payload)``."""


def _post(loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[InboxItem], item: InboxItem) -> None:
    """Put ``item`` in the inbox from any thread (a closed loop means the run is long over)."""
    try:
        loop.call_soon_threadsafe(inbox.put_nowait, item)
    except RuntimeError:
        pass


def _report_done(inbox: asyncio.Queue[InboxItem], index: int, task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # mark it retrieved: a task cancelled by an abort may still fail later
    inbox.put_nowait((_DONE, index, None))


class _RunningCall:
    """One prepared call while it runs: its task, whether ``execute`` is still
    running, and whether its end was emitted."""

    __slots__ = ("executing", "finished", "inbox", "index", "loop", "loop_thread", "prepared", "task")

    def __init__(self, index: int, prepared: PreparedToolCall, inbox: asyncio.Queue[InboxItem]) -> None:
        self.index = index
        self.prepared = prepared
        self.inbox = inbox
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.executing = True
        self.finished = False
        self.task: asyncio.Task[FinalizedToolCall] | None = None

    async def run(
        self, context: Context, assistant_message: AssistantMessage, config: AgentLoopConfig, signal: AbortSignal
    ) -> FinalizedToolCall:
        """Phases 2 and 3: ``execute``, then ``after_tool_call`` (the call's task)."""
        executed = await execute_prepared_tool_call(self.prepared, signal, self.on_update)
        # A sync tool's updates were posted before its result (one FIFO of
        # thread-safe callbacks), so they are in the inbox already.
        self.executing = False
        return await finalize_executed_tool_call(context, assistant_message, self.prepared, executed, config, signal)

    def on_update(self, partial_result: AgentToolResult) -> None:
        """The ``on_update`` the tool receives; callable from any thread."""
        if not self.executing or self.finished:
            return
        item = (_UPDATE, self.index, partial_result)
        if threading.get_ident() == self.loop_thread:
            self.inbox.put_nowait(item)
        else:
            _post(self.loop, self.inbox, item)

    def outcome(self) -> FinalizedToolCall:
        """The finished task's result (a cancelled task counts as aborted)."""
        assert self.task is not None
        if self.task.cancelled():
            return aborted_call(self.prepared.tool_call)
        error = self.task.exception()
        if error is not None:  # run() catches everything; this is a safety net
            return FinalizedToolCall(self.prepared.tool_call, error_result(error_text(error)), True)
        return self.task.result()


async def run_prepared_tool_calls(
    prepared_calls: Sequence[PreparedToolCall],
    context: Context,
    assistant_message: AssistantMessage,
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> list[FinalizedToolCall]:
    """Run every call at once; returns their outcomes in the given order.

    Emits ``tool_execution_update`` and ``tool_execution_end`` events for them.
    """
    if signal.aborted:
        skipped = [aborted_call(prepared.tool_call) for prepared in prepared_calls]
        for finalized in skipped:
            await emit_tool_execution_end(finalized, emit)
        return skipped

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[InboxItem] = asyncio.Queue()
    calls = [_RunningCall(index, prepared, inbox) for index, prepared in enumerate(prepared_calls)]
    for call in calls:
        call.task = loop.create_task(call.run(context, assistant_message, config, signal))
        call.task.add_done_callback(functools.partial(_report_done, inbox, call.index))

    def on_abort(_reason: Any) -> None:
        _post(loop, inbox, (_ABORT, -1, None))

    remove_abort_listener = signal.add_listener(on_abort)
    outcomes: list[FinalizedToolCall | None] = [None] * len(calls)
    remaining = len(calls)
    try:
        while remaining:
            kind, index, payload = await inbox.get()
            if kind == _ABORT:
                break
            call = calls[index]
            if call.finished:
                continue
            if kind == _UPDATE:
                tool_call = call.prepared.tool_call
                await emit(ToolExecutionUpdateEvent(tool_call.id, tool_call.name, tool_call.arguments, payload))
                continue
            call.finished = True
            remaining -= 1
            outcomes[index] = finalized = call.outcome()
            await emit_tool_execution_end(finalized, emit)
        interrupted = [call for call in calls if not call.finished]  # only after an abort
        for call in interrupted:
            call.finished = True
            assert call.task is not None
            call.task.cancel()
            outcomes[call.index] = finalized = aborted_call(call.prepared.tool_call)
            await emit_tool_execution_end(finalized, emit)
        if interrupted:
            # Let cancelled async tools run their cleanup before the run goes on,
            # but never wait long for one that ignores the cancellation.
            await asyncio.wait([call.task for call in interrupted if call.task], timeout=ABORT_CLEANUP_GRACE)
    finally:
        remove_abort_listener()
        for call in calls:
            call.finished = True  # late updates from worker threads are dropped
            if call.task is not None and not call.task.done():
                call.task.cancel()
    return outcomes  # type: ignore[return-value]
