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
- the abort signal (from any thread) → the calls still running get up to
  ``ABORT_GRACE`` seconds to honour it and settle on their own, as pi waits
  for its tools: what a call returns or raises then is its result (a tool
  that sees ``signal.aborted`` and returns partial output, bash's own
  ``Command aborted`` with the output so far). Calls still running after the
  grace are cancelled and get ``Operation aborted``, in source order; the
  cancelled async tools then get up to ``ABORT_CLEANUP_GRACE`` seconds to run
  their ``finally`` blocks. A sync tool's thread cannot be stopped: it runs on,
  and whatever it returns after that is dropped.

Every call gets exactly one ``tool_execution_end`` and one outcome.
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

_UPDATE, _DONE, _ABORT, _GRACE_OVER = 0, 1, 2, 3

ABORT_GRACE = 1.0
"""Seconds the calls still running at an abort get to settle on their own
before they are cancelled and given ``Operation aborted``."""

ABORT_CLEANUP_GRACE = 1.0
"""Seconds the run then waits for the cancelled async tools to finish their
``finally`` blocks (a tool that swallows the cancellation cannot hold it longer)."""


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


class _Batch:
    """The running calls of one batch, the inbox they report to, and their outcomes."""

    def __init__(self, prepared_calls: Sequence[PreparedToolCall], emit: Emit) -> None:
        self.loop = asyncio.get_running_loop()
        self.inbox: asyncio.Queue[InboxItem] = asyncio.Queue()
        self.emit = emit
        self.calls = [_RunningCall(index, prepared, self.inbox) for index, prepared in enumerate(prepared_calls)]
        self.outcomes: dict[int, FinalizedToolCall] = {}
        """By call index; every call has one once the batch is settled (``cancel_unsettled``)."""
        self.remaining = len(self.calls)

    def start(
        self, context: Context, assistant_message: AssistantMessage, config: AgentLoopConfig, signal: AbortSignal
    ) -> None:
        for call in self.calls:
            call.task = self.loop.create_task(call.run(context, assistant_message, config, signal))
            call.task.add_done_callback(functools.partial(_report_done, self.inbox, call.index))

    def post(self, item: InboxItem) -> None:
        _post(self.loop, self.inbox, item)

    async def drain(self, until: int) -> None:
        """Handle reports until every call has ended or an item of kind ``until`` arrives."""
        while self.remaining:
            kind, index, payload = await self.inbox.get()
            if kind == until:
                return
            if kind not in (_UPDATE, _DONE):
                continue  # a second abort, a stale timer
            call = self.calls[index]
            if call.finished:
                continue
            if kind == _UPDATE:
                tool_call = call.prepared.tool_call
                await self.emit(ToolExecutionUpdateEvent(tool_call.id, tool_call.name, tool_call.arguments, payload))
            else:
                await self._end(call, call.outcome())

    async def _end(self, call: _RunningCall, finalized: FinalizedToolCall) -> None:
        call.finished = True  # from here on its updates are dropped
        self.remaining -= 1
        self.outcomes[call.index] = finalized
        await emit_tool_execution_end(finalized, self.emit)

    async def settle(self, grace: float) -> None:
        """After an abort: the running calls may still end on their own, for ``grace`` seconds.

        The deadline arrives as an inbox item (not a timeout around ``get``), so
        no report can be lost to it.
        """
        if not self.remaining:
            return
        timer = self.loop.call_later(grace, self.inbox.put_nowait, (_GRACE_OVER, -1, None))
        try:
            await self.drain(until=_GRACE_OVER)
        finally:
            timer.cancel()

    async def cancel_unsettled(self, cleanup: float) -> None:
        """Cancel the calls that ignored the abort; each gets ``Operation aborted``, in source order."""
        unsettled = [call for call in self.calls if not call.finished]
        for call in unsettled:
            assert call.task is not None
            call.task.cancel()
            await self._end(call, aborted_call(call.prepared.tool_call))
        if unsettled:
            # Let cancelled async tools run their cleanup before the run goes on,
            # but never wait long for one that ignores the cancellation.
            await asyncio.wait([call.task for call in unsettled if call.task], timeout=cleanup)

    def close(self) -> None:
        """However the run ends (even cancelled): no late update counts, no task runs on."""
        for call in self.calls:
            call.finished = True
            if call.task is not None and not call.task.done():
                call.task.cancel()


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

    batch = _Batch(prepared_calls, emit)
    batch.start(context, assistant_message, config, signal)
    remove_abort_listener = signal.add_listener(lambda _reason: batch.post((_ABORT, -1, None)))
    try:
        await batch.drain(until=_ABORT)
        await batch.settle(ABORT_GRACE)  # nothing left to settle unless the abort came
        await batch.cancel_unsettled(ABORT_CLEANUP_GRACE)
    finally:
        remove_abort_listener()
        batch.close()
    return [batch.outcomes[call.index] for call in batch.calls]
