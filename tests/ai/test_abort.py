"""``AbortController`` / ``AbortSignal``: listeners, waiting, and aborts from other threads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from pi_kernel.ai import AbortController


def test_listeners_run_once_with_the_reason_and_abort_is_idempotent() -> None:
    controller = AbortController()
    heard: list[Any] = []
    controller.signal.add_listener(heard.append)
    assert not controller.signal.aborted and controller.signal.reason is None
    controller.abort("first")
    controller.abort("second")
    assert heard == ["first"]
    assert controller.signal.aborted and controller.signal.reason == "first"


def test_default_reason_and_late_listener_runs_at_once() -> None:
    controller = AbortController()
    controller.abort()
    heard: list[Any] = []
    controller.signal.add_listener(heard.append)
    assert heard == ["Operation aborted"]


def test_removed_listener_is_not_called_and_a_broken_one_does_not_stop_the_others() -> None:
    controller = AbortController()
    heard: list[str] = []

    def broken(_reason: Any) -> None:
        raise RuntimeError("listener bug")

    remove = controller.signal.add_listener(lambda _reason: heard.append("removed"))
    controller.signal.add_listener(broken)
    controller.signal.add_listener(lambda _reason: heard.append("kept"))
    remove()
    controller.abort()
    assert heard == ["kept"]


async def test_wait_wakes_when_another_thread_aborts() -> None:
    controller = AbortController()
    waiter = asyncio.ensure_future(controller.signal.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    thread = threading.Thread(target=controller.abort, args=("from a widget thread",))
    thread.start()
    reason = await asyncio.wait_for(waiter, 2)
    thread.join()
    assert reason == "from a widget thread"
    assert await controller.signal.wait() == "from a widget thread"  # already aborted: at once
