"""The sync tools' worker threads: a hung call the run gave up on never starves the calls after it (issue 13)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pi_kernel.agent import tool_execution
from pi_kernel.agent.tool_execution import WorkerPool, run_in_worker


async def test_hung_calls_given_up_on_do_not_starve_the_next_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_execution, "_pool", WorkerPool(max_workers=2))
    release = threading.Event()
    started = threading.Semaphore(0)

    def hang() -> str:
        started.release()
        release.wait(30)  # a sync tool blocked in a C call: nothing can stop its thread
        return "late"

    try:
        hung = [asyncio.ensure_future(run_in_worker(hang)) for _ in range(2)]
        for _ in hung:
            assert await asyncio.to_thread(started.acquire, True, 10)
        for task in hung:
            task.cancel()  # what an abort does to calls that ignore it
        await asyncio.gather(*hung, return_exceptions=True)
        assert await asyncio.wait_for(run_in_worker(lambda: "quick"), 5) == "quick"
        queued = [asyncio.ensure_future(run_in_worker(lambda n=n: n)) for n in range(5)]
        assert await asyncio.wait_for(asyncio.gather(*queued), 5) == [0, 1, 2, 3, 4]
    finally:
        release.set()
