"""Kernel interrupts during a ``%%pi`` cell.

ipykernel runs an async cell under its own SIGINT handler, which cancels the
cell's task from a callback (``ipkernel._cancel_on_sigint``). Two problems for
an agent turn: cancelling mid-flight loses the bookkeeping that gives every
tool call exactly one result, and the callback is added without waking the
event loop, so an interrupt during a pending ``await`` lands only when
something else wakes the loop (ipykernel issue #881).

While a turn runs, ``interrupt_hook`` replaces that handler: the first SIGINT
schedules ``on_interrupt`` (abort the agent, deny pending approvals) on the
loop with ``call_soon_threadsafe``, which also wakes it; the turn then ends
on its own with an "aborted" message. A second SIGINT falls back to the
previous handler (ipykernel's cancel) for a turn that does not stop. The
handler only schedules work: a signal handler runs between two bytecodes of
whatever the main thread was doing, possibly while it holds a lock.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


def _wake() -> None:
    """Nothing: scheduling it thread-safely is what wakes the selector."""


@contextmanager
def interrupt_hook(on_interrupt: Callable[[], None], loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Route SIGINT to ``on_interrupt`` (run on ``loop``) while the block runs.

    Outside the main thread (a subshell) signals cannot be handled: the hook is a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    interrupts = 0

    def handler(signum: int, frame: FrameType | None) -> Any:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            loop.call_soon_threadsafe(on_interrupt)
            return None
        try:
            if callable(previous):
                return previous(signum, frame)
            raise KeyboardInterrupt
        finally:
            loop.call_soon_threadsafe(_wake)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, previous)
