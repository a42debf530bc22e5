"""Running the tool calls of one assistant message, as pi does: the batch, each call's three phases,
the calls running at once, the bound on what the model gets back, and calling user code.

The batch (``execute_tool_calls``): preflight runs one call at a time in source order and emits
every call's ``tool_execution_start``; an outcome decided there (unknown tool, bad arguments, a
block, an abort) gets its ``tool_execution_end`` at once. In parallel mode the prepared calls then
run at once, their ``tool_execution_end`` in completion order and the result messages in source
order after the batch. In sequential mode (by config, or a tool of the batch marked
``sequential``) each call gets its result message before the next one is prepared. Every call gets
exactly one ``tool_execution_end`` and one result message, whatever happens.

Running at once (``run_prepared_tool_calls``): each call is a task, and one coroutine emits all
their events, so listeners never see two at once. It reads one inbox that gets, in the order they
happened, ``on_update`` partials (a sync tool's from its worker thread, through
``put_threadsafe``, so before its completion; dropped once ``execute`` returned),
completions and the abort. After an abort the calls still running get ``ABORT_GRACE`` seconds to
settle on their own, as pi waits for its tools (bash returns ``Command aborted`` with the output
so far); the others are cancelled with ``Operation aborted`` and get ``ABORT_CLEANUP_GRACE``
seconds for their ``finally`` blocks. A sync tool's thread cannot be stopped: its late result is dropped.

The result message (``create_tool_result_message``) is where every tool's result enters the
transcript (``secrets.admit``: keys are masked), then its text and images are bounded (a user tool may
return a 20 MB string, which sent whole fails the request and every later one). Only the message is
cut: the ``tool_execution_end`` event keeps the whole result for the notebook (``_pi_results``).

Sync tools run on ``WorkerPool`` daemon threads, not ``asyncio.to_thread``: the default executor has
``min(32, cpus + 4)`` workers (eight sync calls of one batch would queue) and its threads are joined
at exit, so a tool left running after an abort would keep a kernel from shutting down. A worker
whose call was given up on leaves the pool and a new one takes its place, so hung tools never
starve later calls.

Long: the batch, the three phases of a call and the parallel run are one concept, read in the order they run.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import inspect
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import Any, cast

from pydantic import BaseModel

from pi_kernel.agent.types import (
    AfterToolCallContext,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolUpdateCallback,
)
from pi_kernel.ai import (
    AbortSignal,
    AssistantMessage,
    Context,
    ImageContent,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    validate_tool_arguments,
)
from pi_kernel.ai.messages import clean_tool_call
from pi_kernel.ai.models import put_threadsafe
from pi_kernel.ai.secrets import admit

Emit = Callable[[AgentEvent], Awaitable[None]]
"""Receives every event; the loop waits for it before going on."""

OPERATION_ABORTED = "Operation aborted"
TOOL_BLOCKED = "Tool execution was blocked"


def truncated_call_text(tool_name: str) -> str:
    return (
        f'Tool call "{tool_name}" was not executed: the response hit the output token limit, '
        "so its arguments may be truncated. Re-issue the tool call with complete arguments."
    )


def tool_not_found_text(tool_name: str, tools: Sequence[Tool] | None) -> str:
    names = ", ".join(tool.name for tool in tools or ())
    return f"Tool {tool_name} not found. " + (f"Available tools: {names}" if names else "No tools are available.")


@dataclass(slots=True)
class PreparedToolCall:
    tool_call: ToolCall
    tool: AgentTool
    args: Any
    """Preflight passed: the validated (possibly hook-edited) arguments ``execute`` receives."""


@dataclass(slots=True)
class FinalizedToolCall:
    """The call's result: decided at preflight (the call does not run), or what ``execute`` gave (what
    it raised, as an error result), then patched by ``after_tool_call``."""

    tool_call: ToolCall
    result: AgentToolResult
    is_error: bool


# ---------------------------------------------------------------- the batch


async def execute_tool_calls(
    context: Context,
    assistant_message: AssistantMessage,
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> tuple[list[ToolResultMessage], bool]:
    """The batch (see the module docstring): one result message per call in source order, and whether every
    result asked to terminate. A message cut off by the output token limit (``length``) runs none of its
    calls: no lookup, no validation, no hooks (a truncated call's arguments can parse and validate and still
    be incomplete); each gets the truncation error."""
    tool_calls = assistant_message.tool_calls
    truncated = assistant_message.stop_reason == "length"
    sequential = (
        truncated
        or config.tool_execution == "sequential"
        or any(getattr(find_tool(context.tools, c.name), "execution_mode", None) == "sequential" for c in tool_calls)
    )

    async def preflight(tool_call: ToolCall) -> PreparedToolCall | FinalizedToolCall:
        await emit(ToolExecutionStartEvent(tool_call.id, tool_call.name, tool_call.arguments))
        outcome: PreparedToolCall | FinalizedToolCall
        if truncated:
            outcome = failed_call(tool_call, truncated_call_text(tool_call.name))
        elif signal.aborted:
            outcome = failed_call(tool_call)
        else:
            outcome = await prepare_tool_call(context, assistant_message, tool_call, config, signal)
        if isinstance(outcome, FinalizedToolCall):
            await emit_tool_execution_end(outcome, emit)
        return outcome

    async def run(outcomes: list[PreparedToolCall | FinalizedToolCall]) -> list[FinalizedToolCall]:
        prepared = [item for item in outcomes if isinstance(item, PreparedToolCall)]
        ran = iter(await run_prepared_tool_calls(prepared, context, assistant_message, config, signal, emit))
        return [next(ran) if isinstance(item, PreparedToolCall) else item for item in outcomes]

    limit = config.max_tool_result_chars
    finalized: list[FinalizedToolCall] = []
    messages: list[ToolResultMessage] = []
    if sequential:
        for tool_call in tool_calls:
            finalized += await run([await preflight(tool_call)])
            messages.append(await emit_tool_result_message(finalized[-1], limit, emit))
    else:
        finalized = await run([await preflight(tool_call) for tool_call in tool_calls])
        messages = [await emit_tool_result_message(item, limit, emit) for item in finalized]
    terminate = bool(finalized) and all(item.result.terminate is True for item in finalized)
    return messages, terminate


def error_text(error: BaseException) -> str:
    return str(error) or type(error).__name__


def failed_call(tool_call: ToolCall, text: str = OPERATION_ABORTED) -> FinalizedToolCall:
    return FinalizedToolCall(tool_call, AgentToolResult([TextContent(text)]), True)


def find_tool(tools: Sequence[Tool] | None, name: str) -> AgentTool | None:
    """The tool called ``name``: the agent's context holds its ``AgentTool``s (typed ``Tool`` in ``ai``)."""
    return cast("AgentTool | None", next((tool for tool in tools or () if tool.name == name), None))


def as_tool_result(value: Any) -> AgentToolResult:
    """What ``execute`` returned, as an ``AgentToolResult`` (a str becomes its text)."""
    if isinstance(value, AgentToolResult):
        if value.content is None:  # an untyped tool; never let None reach the transcript
            value.content = []
        return value
    if isinstance(value, str):
        return AgentToolResult(content=[TextContent(value)])
    raise TypeError(f"execute returned {type(value).__name__}, expected an AgentToolResult")


async def emit_tool_execution_end(finalized: FinalizedToolCall, emit: Emit) -> None:
    call = finalized.tool_call
    await emit(ToolExecutionEndEvent(call.id, call.name, finalized.result, finalized.is_error))


async def emit_tool_result_message(
    finalized: FinalizedToolCall, max_chars: int | None, emit: Emit
) -> ToolResultMessage:
    message = create_tool_result_message(finalized, max_chars)
    await emit(MessageStartEvent(message))
    await emit(MessageEndEvent(message))
    return message


# ---------------------------------------------------------------- phase 1: preflight


async def prepare_tool_call(
    context: Context,
    assistant_message: AssistantMessage,
    tool_call: ToolCall,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> PreparedToolCall | FinalizedToolCall:
    """Phase 1: look the tool up, ``prepare_arguments``, validate, ``before_tool_call``."""
    tool = find_tool(context.tools, tool_call.name)
    if tool is None:
        return failed_call(tool_call, tool_not_found_text(tool_call.name, context.tools))
    try:
        validated = tool_call
        if tool.prepare_arguments is not None:  # rewrites old argument shapes; None or the same object keeps them
            rewritten = await call_hook(tool.prepare_arguments, tool_call.arguments)
            if rewritten is not None and rewritten is not tool_call.arguments:
                validated = dataclasses.replace(tool_call, arguments=rewritten)
        args = validate_tool_arguments(tool, validated)
        outcome = await ask_before_tool_call(
            PreparedToolCall(tool_call, tool, args), assistant_message, context, config, signal
        )
    except Exception as error:  # noqa: BLE001 - validation and hook failures become results the model reads
        return failed_call(tool_call, error_text(error))
    if isinstance(outcome, PreparedToolCall) and signal.aborted:
        return failed_call(tool_call)
    return outcome


async def ask_before_tool_call(
    prepared: PreparedToolCall,
    assistant_message: AssistantMessage,
    context: Context,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> PreparedToolCall | FinalizedToolCall:
    """``before_tool_call`` decides: run as is, block (maybe asking to terminate), or run edited arguments.
    An async hook (an approval waiting for a person) is raced against the abort signal."""
    hook = config.before_tool_call
    if hook is None:
        return prepared
    decision = hook(BeforeToolCallContext(assistant_message, prepared.tool_call, prepared.args, context), signal)
    aborted = False
    if inspect.isawaitable(decision):
        aborted, decision = await await_unless_aborted(decision, signal)
    if aborted or signal.aborted:
        return failed_call(prepared.tool_call)
    if decision is None:
        return prepared
    if decision.block:
        result = AgentToolResult([TextContent(decision.reason or TOOL_BLOCKED)])
        result.terminate = decision.terminate is True
        return FinalizedToolCall(prepared.tool_call, result, True)
    if decision.args is not None:
        # Approval with edited arguments: they pass validation again.
        args = decision.args.model_dump() if isinstance(decision.args, BaseModel) else decision.args
        edited = dataclasses.replace(prepared.tool_call, arguments=args, raw_arguments=None)
        clean_tool_call(edited)  # a person's edit enters like the model's arguments: bounded, valid text
        prepared.args = validate_tool_arguments(prepared.tool, edited)
    return prepared


# ---------------------------------------------------------------- phase 2: execute


async def execute_prepared_tool_call(
    prepared: PreparedToolCall, signal: AbortSignal, on_update: ToolUpdateCallback
) -> FinalizedToolCall:
    """Phase 2: what ``execute`` returned, or what it raised (``SystemExit`` and ``KeyboardInterrupt``
    too) as an error result. Async tools run on the loop, sync ones on a worker thread; an awaitable a
    sync one returns is awaited on the loop. ``CancelledError`` is not caught: the call's task is being
    cancelled, or the tool called ``signal.throw_if_aborted()``; either way it ends as aborted.
    """
    try:
        execute, call_args = prepared.tool.execute, (prepared.tool_call.id, prepared.args, signal, on_update)
        value = execute(*call_args) if is_async_callable(execute) else await run_in_worker(execute, *call_args)
        if inspect.isawaitable(value):
            value = await value
        return FinalizedToolCall(prepared.tool_call, as_tool_result(value), False)
    except Exception as error:  # noqa: BLE001 - a failing tool is a result the model reads
        return failed_call(prepared.tool_call, error_text(error))
    except (SystemExit, KeyboardInterrupt) as error:
        return failed_call(prepared.tool_call, error_text(as_tool_error(error)))


# ---------------------------------------------------------------- phase 3: finalize


async def finalize_executed_tool_call(
    context: Context,
    assistant_message: AssistantMessage,
    prepared: PreparedToolCall,
    executed: FinalizedToolCall,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> FinalizedToolCall:
    if config.after_tool_call is None:
        return executed
    result, is_error = executed.result, executed.is_error
    hook_context = AfterToolCallContext(assistant_message, prepared.tool_call, prepared.args, result, is_error, context)
    try:
        patch = await call_hook(config.after_tool_call, hook_context, signal)
    except Exception as error:  # noqa: BLE001 - a failing hook is a result the model reads
        return failed_call(prepared.tool_call, error_text(error))
    if patch is None:
        return executed
    # Field by field: a value that is not None replaces the field whole.
    fields = ("content", "details", "usage", "terminate")
    given = {name: value for name in fields if (value := getattr(patch, name)) is not None}
    is_error = is_error if patch.is_error is None else patch.is_error
    return FinalizedToolCall(prepared.tool_call, dataclasses.replace(result, **given), is_error)


# ---------------------------------------------------------------- running at once

_UPDATE, _DONE, _ABORT, _GRACE_OVER = 0, 1, 2, 3

ABORT_GRACE = 1.0
"""Seconds the calls still running at an abort get to settle on their own
before they are cancelled and given ``Operation aborted``."""

ABORT_CLEANUP_GRACE = 1.0
"""Seconds the run then waits for the cancelled async tools to finish their
``finally`` blocks (a tool that swallows the cancellation cannot hold it longer)."""


InboxItem = tuple[int, int, Any]
"""``(kind, call index, payload)``."""


@dataclass(eq=False)
class _RunningCall:
    """One prepared call while it runs."""

    index: int
    prepared: PreparedToolCall
    inbox: asyncio.Queue[InboxItem]
    loop: asyncio.AbstractEventLoop
    executing: bool = True
    """Until ``execute`` returned: later updates are dropped."""
    finished: bool = False
    """Its ``tool_execution_end`` was emitted."""
    task: asyncio.Task[FinalizedToolCall] = field(init=False)

    async def run(
        self, context: Context, assistant_message: AssistantMessage, config: AgentLoopConfig, signal: AbortSignal
    ) -> FinalizedToolCall:
        """Phases 2 and 3: ``execute``, then ``after_tool_call`` (the call's task)."""
        executed = await execute_prepared_tool_call(self.prepared, signal, self.on_update)
        self.executing = False  # its updates were posted before this point: they are in the inbox first
        return await finalize_executed_tool_call(context, assistant_message, self.prepared, executed, config, signal)

    def on_update(self, partial_result: AgentToolResult) -> None:
        """The ``on_update`` the tool receives; callable from any thread."""
        if self.executing and not self.finished:
            put_threadsafe(self.loop, self.inbox, (_UPDATE, self.index, partial_result))

    def report_done(self, task: asyncio.Task[FinalizedToolCall]) -> None:
        if not task.cancelled():
            task.exception()  # mark it retrieved: a task cancelled by an abort may still fail later
        self.inbox.put_nowait((_DONE, self.index, None))

    def outcome(self) -> FinalizedToolCall:
        """The finished task's result (a cancelled task counts as aborted)."""
        if self.task.cancelled():
            return failed_call(self.prepared.tool_call)
        error = self.task.exception()
        if error is not None:  # run() catches what tools and hooks raise; this is a safety net
            return failed_call(self.prepared.tool_call, error_text(error))
        return self.task.result()


async def run_prepared_tool_calls(
    prepared_calls: Sequence[PreparedToolCall],
    context: Context,
    assistant_message: AssistantMessage,
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> list[FinalizedToolCall]:
    """Run every call at once, emitting their ``tool_execution_update`` and ``_end`` events; returns their
    outcomes in the given order."""
    if signal.aborted or not prepared_calls:
        skipped = [failed_call(prepared.tool_call) for prepared in prepared_calls]
        for finalized in skipped:
            await emit_tool_execution_end(finalized, emit)
        return skipped
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[InboxItem] = asyncio.Queue()
    calls = [_RunningCall(index, prepared, inbox, loop) for index, prepared in enumerate(prepared_calls)]
    outcomes: dict[int, FinalizedToolCall] = {}

    async def end(call: _RunningCall, finalized: FinalizedToolCall) -> None:
        call.finished = True  # from here on its updates are dropped
        outcomes[call.index] = finalized
        await emit_tool_execution_end(finalized, emit)

    async def drain(until: int) -> None:
        """Handle reports until every call has ended or an item of kind ``until`` arrives."""
        while len(outcomes) < len(calls):
            kind, index, payload = await inbox.get()
            if kind == until:
                return
            if kind not in (_UPDATE, _DONE) or calls[index].finished:
                continue  # a second abort, a stale timer, a late report
            call = calls[index]
            if kind == _DONE:
                await end(call, call.outcome())
            else:
                tool_call = call.prepared.tool_call
                await emit(ToolExecutionUpdateEvent(tool_call.id, tool_call.name, tool_call.arguments, payload))

    for call in calls:
        call.task = loop.create_task(call.run(context, assistant_message, config, signal))
        call.task.add_done_callback(call.report_done)
    remove_abort_listener = signal.add_listener(lambda _reason: put_threadsafe(loop, inbox, (_ABORT, -1, None)))
    try:
        await drain(until=_ABORT)
        if len(outcomes) < len(calls):  # the abort came: the calls still running may settle on their own
            # The deadline arrives as an inbox item (not a timeout around ``get``): no report is lost to it.
            timer = loop.call_later(ABORT_GRACE, inbox.put_nowait, (_GRACE_OVER, -1, None))
            try:
                await drain(until=_GRACE_OVER)
            finally:
                timer.cancel()
        unsettled = [call for call in calls if not call.finished]
        for call in unsettled:  # they ignored the abort
            call.task.cancel()
            await end(call, failed_call(call.prepared.tool_call))
        if unsettled:  # their cleanup may run, but never for long
            await asyncio.wait([call.task for call in unsettled], timeout=ABORT_CLEANUP_GRACE)
    finally:
        remove_abort_listener()
        for call in calls:  # however the run ends (even cancelled): no late update counts, no task runs on
            call.finished = True
            call.task.cancel()
    return [outcomes[index] for index in range(len(calls))]


# ---------------------------------------------------------------- the result message

MAX_RESULT_IMAGES = 8
"""Most images one tool result gives the model."""
MAX_RESULT_IMAGE_BYTES = int(4.5 * 1024 * 1024)
"""Most base64 of images one tool result gives the model (one image at the size ``read`` allows)."""


def bound_images(content: list[TextContent | ImageContent]) -> list[TextContent | ImageContent]:
    """``content`` with at most ``MAX_RESULT_IMAGES`` images, ``MAX_RESULT_IMAGE_BYTES`` of base64 in all (the
    first that fit are kept) after a note saying how many were left out; the same list when all fit."""
    kept: list[TextContent | ImageContent] = []
    images = size = left_out = 0
    for block in content:
        if isinstance(block, ImageContent):
            if images >= MAX_RESULT_IMAGES or size + len(block.data) > MAX_RESULT_IMAGE_BYTES:
                left_out += 1
                continue
            images += 1
            size += len(block.data)
        kept.append(block)
    if not left_out:
        return content
    note = (
        f"[{left_out} {'image' if left_out == 1 else 'images'} left out: a tool result gives the model at most "
        f"{MAX_RESULT_IMAGES} images, {MAX_RESULT_IMAGE_BYTES / (1024 * 1024):.1f} MB of base64 in all. The user "
        "sees them all. To see others, call the tool again asking for fewer or smaller images.]"
    )
    return [TextContent(note), *kept]


def bound_content(content: list[TextContent | ImageContent], max_chars: int | None) -> list[TextContent | ImageContent]:
    """``content`` with its text cut to ``max_chars`` characters in all, with a note after the last text
    kept, and its images bounded (``bound_images``); the same list when nothing changed."""
    if max_chars is None or max_chars <= 0:
        return content
    content = bound_images(content)
    total = sum(len(block.text) for block in content if isinstance(block, TextContent))
    if total <= max_chars:
        return content
    room = max_chars
    bounded: list[TextContent | ImageContent] = []
    last_text = 0  # set by the first text block at the latest: it is always kept (``room`` starts above 0)
    for block in content:
        if isinstance(block, TextContent):
            if room <= 0:
                continue
            block = TextContent(block.text[:room])
            room -= len(block.text)
            last_text = len(bounded)
        bounded.append(block)
    kept = max_chars - room
    note = (
        f"\n\n[Tool result cut: showing the first {kept:,} of {total:,} characters "
        f"({total - kept:,} left out; the limit is {max_chars:,}). The full value stays with the user. "
        "To see other parts, call the tool again asking for less: a filter, a range or slice, "
        "fewer rows, or a summary.]"
    )
    bounded[last_text] = TextContent(cast(TextContent, bounded[last_text]).text + note)
    return bounded


def create_tool_result_message(finalized: FinalizedToolCall, max_chars: int | None = None) -> ToolResultMessage:
    """The message the model gets. It enters the transcript here (``secrets.admit``: keys that reached the
    result, a tool printed the environment or read a ``.env``, are masked) before its text is bounded to
    ``max_chars`` (``bound_content``), so the cut never leaves part of a key. The blocks are copies: the
    ``tool_execution_end`` event keeps the result as the tool gave it, for the notebook."""
    result = finalized.result
    message = ToolResultMessage(
        tool_call_id=finalized.tool_call.id,
        tool_name=finalized.tool_call.name,
        content=[copy.copy(block) for block in result.content or []],  # any shape a tool gave (admit checks it)
        details=result.details,  # never sent to the model; views and saved files mask it where it leaves
        is_error=finalized.is_error,
        usage=result.usage,
    )
    admit(message)
    message.content = bound_content(message.content, max_chars)
    return message


# ---------------------------------------------------------------- calling user code

TOOL_WORKERS = 32
"""How many sync tool calls can run at the same moment (more wait in line)."""


class WorkerPool:
    """Daemon worker threads, started on demand up to ``max_workers``, waiting for more work after."""

    def __init__(self, max_workers: int = TOOL_WORKERS) -> None:
        self.max_workers = max_workers
        self._work: SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0
        """Workers counted against ``max_workers`` (abandoned ones are not)."""
        self._abandoned: set[Future[Any]] = set()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn()`` on a worker thread; the future carries its result."""
        future: Future[Any] = Future()
        self._work.put((future, fn))
        if not self._idle.acquire(blocking=False):
            self._start_worker()
        return future

    def abandon(self, future: Future[Any]) -> None:
        """Nobody waits for ``future`` any more: not started, it never runs; running, its worker leaves the pool."""
        if future.cancel() or future.done():
            return
        with self._lock:
            if future in self._abandoned or future.done():
                return
            self._abandoned.add(future)
            self._threads -= 1
            waiting = not self._work.empty()
        if waiting:
            self._start_worker()

    def _start_worker(self) -> None:
        with self._lock:
            if self._threads >= self.max_workers:
                return
            self._threads += 1
            number = self._threads
        threading.Thread(target=self._serve, name=f"pi-tool-{number}", daemon=True).start()

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            future, fn = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as error:  # noqa: BLE001 - handed to the awaiting task, never lost
                    future.set_exception(as_tool_error(error))
            with self._lock:
                retired = future in self._abandoned
                self._abandoned.discard(future)
            del item, future, fn  # drop references before waiting for more work
            if retired:
                return  # a replacement was counted in its place
            self._idle.release()


def as_tool_error(error: BaseException) -> Exception:
    """A tool's exception as one the loop can turn into a result.

    ``SystemExit`` / ``KeyboardInterrupt`` must not reach the event loop, which would re-raise them
    and stop (the kernel): they become a ``RuntimeError`` named after them (``SystemExit: 3``). A sync
    tool's ``signal.throw_if_aborted()`` becomes a plain error with its message: in a worker thread
    it cancels nothing.
    """
    if isinstance(error, Exception):
        return error
    if isinstance(error, asyncio.CancelledError):
        return RuntimeError(str(error) or type(error).__name__)
    return RuntimeError(f"{type(error).__name__}: {error}".rstrip(": "))


_pool = WorkerPool()


async def run_in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """``await fn(*args)`` run on a tool worker thread, with the caller's contextvars. Cancelling the
    awaiting task stops the wait at once; the thread runs on until ``fn`` returns, its result dropped."""
    context = contextvars.copy_context()
    pool = _pool
    future = pool.submit(lambda: context.run(fn, *args))
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        pool.abandon(future)
        raise


def is_async_callable(fn: Any) -> bool:
    """True for ``async def`` functions, methods, partials and objects with an async ``__call__``."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


async def call_hook(hook: Callable[..., Any], *args: Any) -> Any:
    """Call a sync-or-async hook on the loop thread: awaitable results are awaited."""
    value = hook(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


async def await_unless_aborted(awaitable: Awaitable[Any], signal: AbortSignal) -> tuple[bool, Any]:
    """Await ``awaitable`` unless ``signal`` fires first: ``(aborted, value)``. On abort it is cancelled and
    not waited for, so a hook that swallows the cancellation (an unanswered approval) cannot hold the loop."""
    task = asyncio.ensure_future(awaitable)
    if signal.aborted:
        task.cancel()
        return True, None
    abort_seen = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait((task, abort_seen), return_when=asyncio.FIRST_COMPLETED)
    finally:
        abort_seen.cancel()
        if not task.done():
            task.cancel()
    if signal.aborted or not task.done() or task.cancelled():
        return True, None
    return False, task.result()
