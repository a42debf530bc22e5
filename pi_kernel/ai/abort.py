"""``AbortController`` / ``AbortSignal``: cancellation that crosses threads.

Modelled on the web platform's pair, as pi uses it. A signal is read from the
event loop (``await signal.wait()``), from worker threads running sync tools
(``signal.aborted``), and set from anywhere: a kernel interrupt handler, a
widget callback on a subshell thread. So listeners run on the aborting thread
and waiting futures are resolved through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


class AbortSignal:
    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._listeners: list[Callable[[Any], object]] = []
        self._lock = threading.Lock()

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def add_listener(self, listener: Callable[[Any], object]) -> Callable[[], None]:
        """Call ``listener(reason)`` on abort (at once if already aborted).

        Returns a function that removes the listener.
        """
        with self._lock:
            if not self._aborted:
                self._listeners.append(listener)
                return lambda: self._remove(listener)
        listener(self._reason)
        return lambda: None

    def _remove(self, listener: Callable[[Any], object]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    async def wait(self) -> Any:
        """Wait until aborted; returns the reason."""
        if self._aborted:
            return self._reason
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(reason: Any) -> None:
            if not future.done():
                future.set_result(reason)

        def wake(reason: Any) -> None:
            loop.call_soon_threadsafe(settle, reason)

        remove = self.add_listener(wake)
        try:
            return await future
        finally:
            remove()

    def throw_if_aborted(self) -> None:
        if self._aborted:
            raise asyncio.CancelledError(str(self._reason or "Operation aborted"))

    def _abort(self, reason: Any) -> None:
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
            self._reason = reason
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            try:
                listener(reason)
            except Exception:  # noqa: BLE001 - one broken listener must not stop the others
                pass


class AbortController:
    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        """Abort the signal; idempotent and safe from any thread."""
        self.signal._abort("Operation aborted" if reason is None else reason)
