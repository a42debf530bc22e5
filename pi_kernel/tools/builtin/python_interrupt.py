"""Stopping the ``python`` tool's running code: SIGINT and aborts, and top-level ``await`` code.

``Interrupter`` turns a kernel interrupt (SIGINT, on the main thread) or the
turn's abort into ``KeyboardInterrupt`` in the running code; once fired, a
watchdog thread re-sends SIGINT every ``_RESEND_SECONDS`` until the code
returns, so code that swallows the interrupt (a bare ``except:``) is stopped
too. ``run_coroutine`` runs a cell's top-level ``await`` code on an event loop
of its own in a separate thread (in a kernel the main thread's loop is the
caller's); an interrupt cancels it.
"""

from __future__ import annotations

import asyncio
import ctypes
import signal as signals
import threading
import time
from collections.abc import Callable
from typing import Any

from pi_kernel.ai import AbortSignal

_RESEND_SECONDS = 0.1
_CANCEL_GRACE_SECONDS = 1.0


def run_coroutine(coroutine: Any) -> Any:
    """Run the cell's top-level ``await`` code on its own event loop, in a thread of its own.

    Not on this thread: in a kernel this is the main thread, whose event loop is running (blocked by
    this call). While it waits, a ``KeyboardInterrupt`` here (SIGINT, an abort) cancels the coroutine
    (``CancelledError`` at its ``await``) and waits up to ``_CANCEL_GRACE_SECONDS`` for it to end.
    """
    outcome: dict[str, Any] = {}
    finished = threading.Event()

    async def main() -> Any:
        outcome["task"] = asyncio.current_task()
        outcome["loop"] = asyncio.get_running_loop()
        if outcome.get("cancel"):  # interrupted before it started
            coroutine.close()
            raise asyncio.CancelledError
        return await coroutine

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(main())
        except BaseException as exception:  # noqa: BLE001 - re-raised on the calling thread
            outcome["error"] = exception
        finally:
            finished.set()

    threading.Thread(target=run, name="pi-python-await", daemon=True).start()
    # Only lock-free waits here: a KeyboardInterrupt raised inside a lock's acquire (Event.wait) can
    # leave the lock wedged, and repeated interrupts land wherever this thread is.
    deadline: float | None = None
    while not finished.is_set() and (deadline is None or time.monotonic() < deadline):
        try:
            time.sleep(0.02)
        except KeyboardInterrupt:
            if deadline is None:
                deadline = time.monotonic() + _CANCEL_GRACE_SECONDS
                outcome["cancel"] = True
                loop, task = outcome.get("loop"), outcome.get("task")
                if loop is not None and task is not None:
                    loop.call_soon_threadsafe(task.cancel)
    if deadline is not None:
        raise KeyboardInterrupt
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def as_cell_code(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, stopped by an interrupt as the cell's own code is (the ``repr`` of the cell's value: the
    user's code, run by IPython's formatters)."""
    return fn(*args)


def _is_cell_code(frame: Any) -> bool:
    return str(frame.f_code.co_filename).startswith("<python-tool-")


def _runs_cell_code(frame: Any) -> bool:
    """Whether the cell's code is on the stack from ``frame`` down (it may be calling library code)."""
    while frame is not None:
        if _is_cell_code(frame) or frame.f_code in (run_coroutine.__code__, as_cell_code.__code__):
            return True
        frame = frame.f_back
    return False


class Interrupter:
    """While active, an abort raises ``KeyboardInterrupt`` in the thread running the code."""

    def __init__(self, signal: AbortSignal | None, on_sigint: bool = False) -> None:
        self._signal = signal
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        self.fired = False
        self._remove: Callable[[], None] | None = None
        self._on_sigint = on_sigint and threading.current_thread() is threading.main_thread()
        self._previous_handler: Any = None
        self._active = False
        """Read by the SIGINT handler (no lock: it runs on this very thread, between two bytecodes)."""
        self._done = threading.Event()
        self._watchdog: threading.Thread | None = None

    def __enter__(self) -> Interrupter:
        with self._lock:
            self._thread_id = threading.get_ident()
        if self._signal is not None:
            self._remove = self._signal.add_listener(self._interrupt)
        if self._on_sigint:
            self._previous_handler = signals.signal(signals.SIGINT, self._sigint)
            self._active = True
            self._watchdog = threading.Thread(target=self._resend_sigint, name="pi-python-interrupt", daemon=True)
            self._watchdog.start()
        return self

    def _sigint(self, signum: int, frame: Any) -> None:
        """The previous handler first (the turn's hook schedules the turn's abort), then stop the code.

        Only the first SIGINT goes to the previous handler (the turn is aborted once; the repeats are
        ours). Code that swallows ``KeyboardInterrupt`` (a bare ``except:`` around a blocking call) is
        stopped anyway: a watchdog thread re-sends SIGINT every ``_RESEND_SECONDS`` until the code
        returns, and a repeat that lands outside the ``try`` ends it. Raised only while the cell's code
        is on the stack (not while it is compiled or cleaned up after).
        """
        previous = self._previous_handler
        if callable(previous) and not self.fired:
            try:
                previous(signum, frame)
            except KeyboardInterrupt:
                pass  # ours follows
        if self._active:
            self.fired = True
            if _runs_cell_code(frame):
                raise KeyboardInterrupt

    def _resend_sigint(self) -> None:
        """The watchdog (started with the code, as the handler must not start threads): once fired, re-send."""
        while not self._done.wait(_RESEND_SECONDS):
            if self.fired:
                signals.pthread_kill(threading.main_thread().ident or 0, signals.SIGINT)

    def _interrupt(self, _reason: Any) -> None:
        with self._lock:
            if self._thread_id is None:
                return
            self.fired = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self._thread_id), ctypes.py_object(KeyboardInterrupt)
            )

    def __exit__(self, *exc_info: Any) -> None:
        self._active = False
        self._done.set()
        if self._watchdog is not None:
            self._watchdog.join()  # a SIGINT it sent lands here, still in our handler (which now ignores it)
        if self._on_sigint and signals.getsignal(signals.SIGINT) == self._sigint:
            previous = self._previous_handler
            signals.signal(signals.SIGINT, previous if previous is not None else signals.default_int_handler)
        # Stop interrupting before leaving the user's code, and cancel an
        # interrupt that is scheduled but has not landed yet; one landing
        # during this very step is caught and the step retried.
        thread_id = threading.get_ident()
        while True:
            try:
                with self._lock:
                    self._thread_id = None
                    if self.fired:
                        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
                break
            except KeyboardInterrupt:
                self.fired = True
        if self._remove is not None:
            self._remove()
