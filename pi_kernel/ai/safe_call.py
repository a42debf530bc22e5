"""Calling the user's code with a time limit: ``SafeCaller`` runs it on a helper thread.

A call that does not return in time is abandoned (an exception is raised in
its thread, which stops Python code at its next bytecode) and the next call
gets a fresh thread, so one hanging ``repr`` costs one timeout. Code running
in C (a built-in ``repr`` of millions of items) cannot be stopped: callers
give such objects a bounded treatment instead (``static_read``).

Standard library only: the cell history uses it at kernel start.
"""

from __future__ import annotations

import ctypes
import queue
import threading
from collections.abc import Callable
from typing import Any

from pi_kernel.ai.static_read import class_name, exact_text

CALL_TIMEOUT = 1.0
"""Seconds one call of user code (a ``repr``) may take."""


class CallTimeout(Exception):
    """A guarded call took longer than its limit."""


class SafeCaller:
    """Runs calls of user code on a helper thread with a time limit.

    A call that does not return in time is abandoned (an exception is raised
    in its thread, which stops Python code at its next bytecode) and the next
    call gets a fresh thread, so one hanging ``repr`` costs one timeout.
    """

    def __init__(self, timeout: float = CALL_TIMEOUT) -> None:
        self.timeout = timeout
        self._jobs: queue.SimpleQueue[Any] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """``fn()``'s value; its exception re-raised; ``CallTimeout`` when it takes longer than ``timeout``
        (default: the caller's)."""
        with self._lock:  # one call at a time (the cell history's caller serves every subshell)
            limit = self.timeout if timeout is None else timeout
            if self._jobs is None or self._thread is None or not self._thread.is_alive():
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(target=_work, args=(self._jobs,), name="pi-describe", daemon=True)
                self._thread.start()
            done = threading.Event()
            box: dict[str, Any] = {}
            self._jobs.put((fn, box, done))
            if not done.wait(limit):
                thread, self._thread, self._jobs = self._thread, None, None
                if thread.ident is not None:
                    stop = ctypes.py_object(SystemExit)
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), stop)
                raise CallTimeout(f"took longer than {limit:g} s")
            if "error" in box:
                raise box["error"]
            return box.get("value")

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
        self._jobs, self._thread = None, None


def _work(jobs: queue.SimpleQueue[Any]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, box, done = job
        try:
            box["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - user code may raise anything; the caller gets it
            if isinstance(error, SystemExit):
                return  # abandoned after a timeout
            box["error"] = error
        finally:
            done.set()


def error_text(error: BaseException, caller: SafeCaller, chars: int = 120) -> str:
    """``Type: message`` of an exception the user's code raised; its ``str()`` is user code too (time limit)."""
    name = class_name(type(error))
    try:
        message = caller.call(lambda: exact_text(str(error)), 0.5)
    except BaseException:  # noqa: BLE001 - an exception whose message cannot be read
        return name
    flat = " ".join(message.split())
    return f"{name}: {flat if len(flat) <= chars else flat[: chars - 3] + '...'}"
