"""``Throttle``: at most one redraw per interval, and the last change always drawn.

Events arrive per token (2,000 a second and more); a front end cannot take a
message per token (the field notes measured lost updates and a stuck busy
indicator). A view marks itself dirty and calls ``request()``; the throttle
runs ``flush`` at once if the last flush is older than ``interval`` (so the
first token shows without delay), else once at the end of the interval with
everything that changed meanwhile (the trailing flush: the final state always
lands). The clock and the timer are injected, so tests drive it
deterministically.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any, Protocol


class TimerHandle(Protocol):
    def cancel(self) -> Any: ...


Scheduler = Callable[[float, Callable[[], None]], TimerHandle]
"""``scheduler(delay_seconds, callback) -> handle`` with ``handle.cancel()``."""


def loop_scheduler(delay: float, callback: Callable[[], None]) -> TimerHandle:
    """The default ``Scheduler``: the loop running when it is called."""
    return asyncio.get_running_loop().call_later(delay, callback)


class Throttle:
    def __init__(
        self,
        flush: Callable[[], None],
        interval: float = 0.05,
        *,
        clock: Callable[[], float] = time.monotonic,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._flush = flush
        self.interval = interval
        """Shortest time between two flushes (0.05 s: 20 updates per second)."""
        self._clock = clock
        self._scheduler = scheduler if scheduler is not None else loop_scheduler
        self._last = -math.inf
        self._timer: TimerHandle | None = None
        self._timer_at = math.inf
        self.flushes = 0
        """How many times ``flush`` ran."""

    def request(self, delay: float = 0.0) -> None:
        """Flush no later than ``delay`` seconds from now, and no sooner than the interval allows."""
        now = self._clock()
        when = max(now + delay, self._last + self.interval)
        if self._timer is not None and self._timer_at <= when:
            return  # an earlier flush will carry this change too
        self.cancel()
        if when <= now:
            self._run()
            return
        try:
            self._timer = self._scheduler(when - now, self._fire)
        except RuntimeError:  # no event loop to wait on: draw now rather than never
            self._run()
            return
        self._timer_at = when

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = math.inf

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        self._run()

    def _run(self) -> None:
        self._last = self._clock()
        self.flushes += 1
        self._flush()
