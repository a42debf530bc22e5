"""Calling user code: hooks on the loop, sync tools on worker threads, waits an abort ends.

Tools and hooks may be sync or async. A hook is called on the loop thread and
its result awaited when it is awaitable (``call_hook``); a wait on one can be
raced against the abort signal (``await_unless_aborted``). A tool whose
``execute`` is not an async function runs on a worker thread
(``run_in_worker``), so the event loop stays responsive.

Worker threads: sized for tool calls, and never holding the process. Why not
``asyncio.to_thread``: the loop's default executor has ``min(32, cpus + 4)``
workers (6 on a 2-core machine), so eight sync tools of one batch would not
all run at once. And why not a ``ThreadPoolExecutor`` of our own: its threads
are joined at interpreter exit, so a sync tool left running after an abort
(the loop stops waiting for it; see ``tool_runner``) would keep a kernel from
shutting down. These workers are daemon threads; they start on demand, up to
``max_workers``, and then wait for more work. A call whose awaiting task gave
up on it (an abort cancelled it; see ``tool_runner``) while it still runs
(a sync tool hung in a C call) no longer counts: its thread leaves the pool
and ends when the call returns, and a new worker takes its place, so hung
tools never starve the calls after them.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any

from pi_kernel.ai.models import AbortSignal

TOOL_WORKERS = 32
"""How many sync tool calls can run at the same moment (more wait in line)."""


class WorkerPool:
    def __init__(self, max_workers: int = TOOL_WORKERS, name: str = "pi-tool") -> None:
        self.max_workers = max_workers
        self._name = name
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
        threading.Thread(target=self._serve, name=f"{self._name}-{number}", daemon=True).start()

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

    ``SystemExit`` / ``KeyboardInterrupt`` raised by a tool (sync or async)
    must not reach the event loop as such: asyncio re-raises them from the
    loop, which would stop it (the kernel). They become a ``RuntimeError``
    named after them (``SystemExit: 3``). A sync tool's
    ``signal.throw_if_aborted()`` (``CancelledError``) becomes a plain error
    with its message (``Operation aborted``): in a worker thread it cancels
    nothing.
    """
    if isinstance(error, Exception):
        return error
    if isinstance(error, asyncio.CancelledError):
        return RuntimeError(str(error) or type(error).__name__)
    return RuntimeError(f"{type(error).__name__}: {error}".rstrip(": "))


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def tool_worker_pool() -> WorkerPool:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = WorkerPool()
    return _pool


async def run_in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """``await fn(*args)`` run on a tool worker thread, with the caller's contextvars.

    The event loop stays free while it runs. Cancelling the awaiting task stops
    the wait at once; the thread itself runs on until ``fn`` returns (Python
    cannot stop a thread), and its result is then dropped.
    """
    context = contextvars.copy_context()
    pool = tool_worker_pool()
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
    """Await ``awaitable`` unless ``signal`` fires first: ``(aborted, value)``.

    On abort the awaitable is cancelled and not waited for, so a hook that
    swallows the cancellation cannot hold the loop (an approval prompt that
    nobody answers ends at once on abort).
    """
    task = asyncio.ensure_future(awaitable)
    if signal.aborted:
        task.cancel()
        return True, None
    loop = asyncio.get_running_loop()
    abort_seen: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not abort_seen.done():
            abort_seen.set_result(None)

    def on_abort(_reason: Any) -> None:
        loop.call_soon_threadsafe(settle)

    remove = signal.add_listener(on_abort)
    try:
        await asyncio.wait((task, abort_seen), return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        abort_seen.cancel()
        if not task.done():
            task.cancel()
    if signal.aborted or not task.done() or task.cancelled():
        return True, None
    return False, task.result()
