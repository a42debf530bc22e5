"""The file mutation queue: same real file → one after the other (FIFO); different files → at once.

Overlap is observed with events and counters, never with timing thresholds:
an operation that could run would run within a few loop iterations, so
"still waiting after the loop went round many times, and running once the
holder released" is the deterministic signal.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from pi_kernel.tools import file_queue
from pi_kernel.tools.file_queue import (
    hold_file_mutation_queue,
    mutation_queue_key,
    with_file_mutation_queue,
)


def active_queue_count() -> int:
    """How many files have an operation running: the keys in the queue's registry."""
    with file_queue._lock:
        return len(file_queue._queues)


async def spin(times: int = 50) -> None:
    """Let every ready task run for a while."""
    for _ in range(times):
        await asyncio.sleep(0)


class Tracker:
    """Records starts/ends and the most operations seen running at once."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.running = 0
        self.max_running = 0

    def op(self, name: str, gate: asyncio.Event | None = None):  # type: ignore[no-untyped-def]
        async def run() -> str:
            self.order.append(f"{name}:start")
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            try:
                if gate is not None:
                    await gate.wait()
                else:
                    await spin(5)
            finally:
                self.running -= 1
                self.order.append(f"{name}:end")
            return name

        return run


async def test_same_file_runs_strictly_one_after_the_other_in_call_order(tmp_path: Path) -> None:
    path = tmp_path / "same.txt"
    tracker = Tracker()
    gate = asyncio.Event()
    first = asyncio.create_task(with_file_mutation_queue(path, tracker.op("op0", gate)))
    await spin()
    rest = [asyncio.create_task(with_file_mutation_queue(path, tracker.op(f"op{i}"))) for i in range(1, 6)]
    await spin()
    assert tracker.order == ["op0:start"]  # everyone else waits behind the holder
    gate.set()
    results = await asyncio.gather(first, *rest)
    assert results == [f"op{i}" for i in range(6)]
    assert tracker.order == [entry for i in range(6) for entry in (f"op{i}:start", f"op{i}:end")]
    assert tracker.max_running == 1
    assert active_queue_count() == 0


async def test_different_files_run_concurrently(tmp_path: Path) -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    async def op(mine: asyncio.Event, other: asyncio.Event) -> bool:
        mine.set()
        # Completes only if the other operation is running at the same time.
        await asyncio.wait_for(other.wait(), timeout=10)
        return True

    results = await asyncio.gather(
        with_file_mutation_queue(tmp_path / "a.txt", lambda: op(a_started, b_started)),
        with_file_mutation_queue(tmp_path / "b.txt", lambda: op(b_started, a_started)),
    )
    assert results == [True, True]
    assert active_queue_count() == 0


async def test_symlink_alias_shares_the_queue_of_its_target(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("hello\n")
    alias = tmp_path / "alias.txt"
    alias.symlink_to(target)
    assert mutation_queue_key(alias) == mutation_queue_key(target)

    tracker = Tracker()
    gate = asyncio.Event()
    holder = asyncio.create_task(with_file_mutation_queue(target, tracker.op("target", gate)))
    await spin()
    waiter = asyncio.create_task(with_file_mutation_queue(alias, tracker.op("alias")))
    await spin()
    assert tracker.order == ["target:start"]
    gate.set()
    await asyncio.gather(holder, waiter)
    assert tracker.order == ["target:start", "target:end", "alias:start", "alias:end"]


async def test_new_file_under_a_symlinked_directory_shares_the_queue(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    link_dir = tmp_path / "link"
    link_dir.symlink_to(real_dir, target_is_directory=True)
    # Neither file exists yet: the key still resolves the directory link.
    assert mutation_queue_key(link_dir / "new.txt") == mutation_queue_key(real_dir / "new.txt")
    assert mutation_queue_key(tmp_path / "x" / ".." / "new.txt") == mutation_queue_key(tmp_path / "new.txt")

    tracker = Tracker()
    gate = asyncio.Event()
    holder = asyncio.create_task(with_file_mutation_queue(real_dir / "new.txt", tracker.op("real", gate)))
    await spin()
    waiter = asyncio.create_task(with_file_mutation_queue(link_dir / "new.txt", tracker.op("link")))
    await spin()
    assert "link:start" not in tracker.order
    gate.set()
    await asyncio.gather(holder, waiter)
    assert tracker.max_running == 1


async def test_a_failing_operation_does_not_block_the_ones_behind_it(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    gate = asyncio.Event()

    async def failing() -> None:
        await gate.wait()
        raise OSError("disk full")

    async def succeeding() -> str:
        return "ran"

    first = asyncio.create_task(with_file_mutation_queue(path, failing))
    await spin()
    second = asyncio.create_task(with_file_mutation_queue(path, succeeding))
    gate.set()
    with pytest.raises(OSError, match="disk full"):
        await first
    assert await second == "ran"
    assert active_queue_count() == 0


async def test_a_cancelled_waiter_leaves_the_line_and_the_queue_moves_on(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    tracker = Tracker()
    gate = asyncio.Event()
    holder = asyncio.create_task(with_file_mutation_queue(path, tracker.op("holder", gate)))
    await spin()
    cancelled = asyncio.create_task(with_file_mutation_queue(path, tracker.op("cancelled")))
    last = asyncio.create_task(with_file_mutation_queue(path, tracker.op("last")))
    await spin()
    cancelled.cancel()
    await spin()
    gate.set()
    await asyncio.gather(holder, last)
    assert cancelled.cancelled()
    assert tracker.order == ["holder:start", "holder:end", "last:start", "last:end"]
    assert active_queue_count() == 0


async def test_key_map_does_not_grow_with_the_number_of_files(tmp_path: Path) -> None:
    async def noop() -> None:
        return None

    await asyncio.gather(*(with_file_mutation_queue(tmp_path / f"f{i}.txt", noop) for i in range(200)))
    assert active_queue_count() == 0


async def test_sync_function_runs_off_the_loop_inside_the_queue(tmp_path: Path) -> None:
    loop_thread = threading.get_ident()

    def blocking_write() -> int:
        (tmp_path / "s.txt").write_text("data")
        return threading.get_ident()

    worker_thread = await with_file_mutation_queue(tmp_path / "s.txt", blocking_write)
    assert worker_thread != loop_thread
    assert (tmp_path / "s.txt").read_text() == "data"


async def test_thread_holder_and_async_caller_share_one_queue(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    held, release = threading.Event(), threading.Event()

    def thread_body() -> None:
        with hold_file_mutation_queue(path):
            held.set()
            release.wait(timeout=10)

    thread = threading.Thread(target=thread_body)
    thread.start()
    await asyncio.to_thread(held.wait, 10)
    ran = asyncio.Event()

    async def op() -> None:
        ran.set()

    task = asyncio.create_task(with_file_mutation_queue(os.fspath(path), op))
    await spin()
    assert not ran.is_set()
    release.set()
    await task
    assert ran.is_set()
    await asyncio.to_thread(thread.join, 10)
    assert active_queue_count() == 0


async def test_cancelling_a_sync_holder_keeps_the_turn_until_its_thread_ends(tmp_path: Path) -> None:
    """A cancelled caller cannot stop its worker thread, so the next caller must wait for that thread."""
    path = tmp_path / "w.txt"
    log: list[str] = []
    started, proceed = threading.Event(), threading.Event()

    def slow_write() -> None:
        log.append("holder:start")
        started.set()
        proceed.wait(timeout=10)
        log.append("holder:end")

    async def next_edit() -> None:
        log.append("next:start")

    holder = asyncio.create_task(with_file_mutation_queue(path, slow_write))
    try:
        await asyncio.to_thread(started.wait, 10)
        waiter = asyncio.create_task(with_file_mutation_queue(path, next_edit))
        await spin()
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder  # the cancellation itself is not delayed by the thread
        await spin()
        assert log == ["holder:start"]  # the thread still runs, so the next caller still waits
        assert active_queue_count() == 1
    finally:
        proceed.set()
    await asyncio.wait_for(waiter, 10)
    assert log == ["holder:start", "holder:end", "next:start"]
    assert active_queue_count() == 0
