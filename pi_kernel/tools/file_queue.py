"""The file mutation queue: writes to one file happen one after the other.

Port of pi's ``file-mutation-queue.ts``. Tool calls of a batch run in
parallel; ``write`` and ``edit`` read-modify-write a file, so two of them on
the same file must not interleave. Each operation runs inside
``with_file_mutation_queue(path, fn)``:

- the key is the file's real path (``os.path.realpath``, which also resolves
  the existing part of a path that does not exist yet): symlink aliases of a
  file, and paths through a symlinked directory, share one queue;
- the same key → strictly one after the other, in the order the calls were
  made (FIFO); different keys → concurrently;
- an operation that raises releases its turn like one that returns;
- a key's entry is removed when its queue drains (no growth with the number
  of files ever touched).

Unlike pi's per-process promise chain, the queue here is a FIFO lock that
works across threads and event loops (tools run partly on worker threads, a
notebook may run a second loop): each waiter's turn is a ``concurrent.futures.Future``,
which thread code waits on (``hold_file_mutation_queue``) and an async caller awaits
(``asyncio.wrap_future``).

``fn`` is a zero-argument callable: an ``async def`` function (or any callable
returning an awaitable) is awaited on the caller's loop, a plain function runs
on a worker thread so its blocking file I/O does not stall the loop. Cancelling
a caller cannot stop that thread, which may be half-way through writing the
file: the ``CancelledError`` propagates at once, but the turn passes on only
when the thread has ended (else a cancelled ``edit`` and the next ``write`` of
the same file would overlap).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar, overload

T = TypeVar("T")


class _Waiter:
    """One caller waiting for its turn on a key: ``turn`` is set (under the registry lock) when it comes."""

    __slots__ = ("loop", "turn")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        """The async caller's loop (``None``: thread code)."""
        self.turn: Future[None] = Future()


_lock = threading.Lock()
_queues: dict[str, deque[_Waiter]] = {}
"""A key is present while its file's turn is held; the deque holds those waiting behind."""


def mutation_queue_key(path: str | os.PathLike[str]) -> str:
    """The key a path queues under: its absolute real path."""
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _acquire_or_wait(key: str, loop: asyncio.AbstractEventLoop | None) -> _Waiter | None:
    """Take the turn at once (returns None) or join the line (returns the waiter)."""
    with _lock:
        waiting = _queues.get(key)
        if waiting is None:
            _queues[key] = deque()
            return None
        waiter = _Waiter(loop)
        waiting.append(waiter)
        return waiter


def _release(key: str) -> None:
    """Hand the turn to the next waiter that can take it (its loop not closed), or drop the key when nobody waits."""
    with _lock:
        waiting = _queues[key]
        while waiting:
            waiter = waiting.popleft()
            if waiter.loop is None or not waiter.loop.is_closed():
                waiter.turn.set_result(None)
                return
        del _queues[key]


def _give_up(key: str, waiter: _Waiter) -> None:
    """A waiter stopped waiting (cancelled): leave the line, or pass on a turn already handed over."""
    with _lock:
        granted = waiter.turn.done()
        if not granted:
            _queues[key].remove(waiter)
    if granted:
        _release(key)


@overload
async def with_file_mutation_queue(path: str | os.PathLike[str], fn: Callable[[], Awaitable[T]]) -> T: ...
@overload
async def with_file_mutation_queue(path: str | os.PathLike[str], fn: Callable[[], T]) -> T: ...
async def with_file_mutation_queue(path: str | os.PathLike[str], fn: Callable[[], Any]) -> Any:
    """Run ``fn()`` when every earlier operation on the same real file has finished.

    Returns what ``fn`` returns (awaited when it is awaitable); its exception
    propagates after the queue moved on. See the module docstring for how
    ``fn`` runs.
    """
    key = mutation_queue_key(path)
    waiter = _acquire_or_wait(key, asyncio.get_running_loop())
    if waiter is not None:
        try:
            await asyncio.shield(asyncio.wrap_future(waiter.turn))  # shielded: a cancelled caller leaves the turn set
        except BaseException:
            _give_up(key, waiter)
            raise
    release_here = True
    try:
        if inspect.iscoroutinefunction(fn):
            return await fn()
        # On the loop's default executor with the caller's contextvars (as ``asyncio.to_thread``), kept as a
        # future so that a cancelled caller can still learn when the thread really ends.
        context = contextvars.copy_context()
        work = asyncio.get_running_loop().run_in_executor(None, functools.partial(context.run, fn))
        try:
            # Shielded: cancelling this caller must not pretend the thread stopped.
            value = await asyncio.shield(work)
        except asyncio.CancelledError:
            if not work.done():
                # The thread cannot be stopped and is still touching the file:
                # the turn passes on only when it ends.
                release_here = False
                work.add_done_callback(lambda _finished: _release(key))
            raise
        if inspect.isawaitable(value):
            value = await value
        return value
    finally:
        if release_here:
            _release(key)


@contextmanager
def hold_file_mutation_queue(path: str | os.PathLike[str]) -> Iterator[None]:
    """The blocking form for thread code: ``with hold_file_mutation_queue(p): ...``.

    Never call it on an event loop's thread while an async holder of the same
    file may need that loop to finish: it would wait forever.
    """
    key = mutation_queue_key(path)
    waiter = _acquire_or_wait(key, None)
    if waiter is not None:
        waiter.turn.result()
    try:
        yield
    finally:
        _release(key)
