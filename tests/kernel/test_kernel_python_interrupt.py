"""The ``python`` tool on the kernel's main thread: interrupts stop it at once, top-level ``await`` works.

Through the real kernel (jupyter_client) and the scripted OpenAI-compatible server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, assert_one_result_per_call, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url, PI_WIDGETS="0"), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def tool_contents(server: FakeOpenAI) -> list[str]:
    return [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"]


def test_top_level_await_in_the_python_tool_works_in_a_kernel(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """python.py docstring: "Top-level await works". On the main thread the kernel's loop is running,
    so ``asyncio.run`` in ``_evaluate`` raises "cannot be called from a running event loop"."""
    kernel.run("%pi reset")
    server.enqueue(
        tool_call_chunks([("python", {"code": "import asyncio\nawait asyncio.sleep(0.01)\n6 * 7"})]),
        text_chunks("ok"),
    )
    result = kernel.run("%%pi --approve auto\nawait something", timeout=60)
    assert result.status == "ok", result.text
    assert tool_contents(server)[-1] == "42\n", tool_contents(server)


def test_interrupt_during_the_first_of_two_python_calls_does_not_run_the_second(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    """The SIGINT's abort is only scheduled on the (blocked) loop; the next python call of the same
    batch starts on the main thread before it runs, so it sleeps its whole time and the cell ends late."""
    kernel.run("%pi reset")
    marker = tmp_path / "state"
    first = f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('sleeping')\ntime.sleep(60)\n"
    second = "import time\ntime.sleep(25)\n'second ran'"
    server.enqueue(tool_call_chunks([("python", {"code": first}), ("python", {"code": second})]))
    state: dict[str, float] = {}

    def on_poll() -> None:
        if "at" not in state and marker.exists():
            state["at"] = time.monotonic()
            kernel.interrupt()

    result = kernel.run("%%pi --approve auto\nTwo sleeps", on_poll=on_poll, timeout=90)
    ended = time.monotonic()
    assert "at" in state, result.text
    assert result.reply.get("ename") == "PiInterrupted", result.text
    assert ended - state["at"] < 5, f"the cell ended {ended - state['at']:.1f} s after the interrupt"


def test_interrupt_stops_python_code_whose_bare_except_swallows_keyboardinterrupt(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    """Models often write ``try: ... except: pass`` in loops. On the main thread the turn's abort cannot
    run while the code blocks the loop, so neither the first nor a second interrupt ends the cell
    (on a worker the abort gave up on the call after its grace). Issue 13: "An interrupt ends the cell
    within a second or two whatever the turn holds"."""
    kernel.run("%pi reset")
    marker = tmp_path / "state"
    code = (
        f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('sleeping')\n"
        "for i in range(30):\n    try:\n        time.sleep(1)\n    except:\n        pass\n"
    )
    server.enqueue(tool_call_chunks([("python", {"code": code})]))
    state: dict[str, float] = {}

    def on_poll() -> None:
        if "at" not in state and marker.exists():
            state["at"] = time.monotonic()
            kernel.interrupt()
        elif "at" in state and "again" not in state and time.monotonic() - state["at"] > 2:
            state["again"] = time.monotonic()
            kernel.interrupt()  # a second interrupt, as a user would press it

    result = kernel.run("%%pi --approve auto\nLoop", on_poll=on_poll, timeout=90)
    ended = time.monotonic()
    assert "at" in state, result.text
    assert ended - state["at"] < 8, f"the cell ended {ended - state['at']:.1f} s after the interrupt"
    server.enqueue(text_chunks("Still here."))
    after = kernel.run("%%pi\nStill there?")
    assert after.status == "ok"
    assert_one_result_per_call(server.last_body["messages"], expected_calls=1)


def test_interrupt_cancels_top_level_await_code(kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path) -> None:
    """Code with top-level ``await`` runs on a loop of its own; an interrupt cancels it and the cell ends."""
    kernel.run("%pi reset")
    marker = tmp_path / "state"
    code = f"import asyncio, pathlib\npathlib.Path({str(marker)!r}).write_text('sleeping')\nawait asyncio.sleep(60)\n"
    server.enqueue(tool_call_chunks([("python", {"code": code})]))
    state: dict[str, float] = {}

    def on_poll() -> None:
        if "at" not in state and marker.exists():
            state["at"] = time.monotonic()
            kernel.interrupt()

    result = kernel.run("%%pi --approve auto\nAwait", on_poll=on_poll, timeout=90)
    ended = time.monotonic()
    assert "at" in state, result.text
    assert result.reply.get("ename") == "PiInterrupted", result.text
    assert ended - state["at"] < 5, f"the cell ended {ended - state['at']:.1f} s after the interrupt"
    server.enqueue(tool_call_chunks([("python", {"code": "await asyncio.sleep(0)\n'again'"})]), text_chunks("ok"))
    assert kernel.run("%%pi --approve auto\nAgain", timeout=60).status == "ok"
    assert tool_contents(server)[-1] == "'again'\n", tool_contents(server)


def test_hung_sync_tools_given_up_on_do_not_starve_the_next_tool(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    """Through the kernel: two sync tools hang (blocked in a C call, nothing can stop their threads) in a
    pool of two workers; after the interrupt gives up on them, a quick sync tool answers at once."""
    kernel.run("%pi reset")
    setup = (
        "import pathlib, threading\n"
        "from pi_kernel import tool\n"
        "from pi_kernel.agent import tool_execution\n"
        "tool_execution._pool = tool_execution.WorkerPool(max_workers=2)\n"
        "release = threading.Event()\n"
        "@tool\n"
        "def hang(name: str) -> str:\n"
        '    """Hang."""\n'
        f"    pathlib.Path({str(tmp_path)!r}, name).write_text('started')\n"
        "    release.wait(120)\n"
        "    return 'late'\n"
        "@tool\n"
        "def quick() -> str:\n"
        '    """Quick."""\n'
        "    return 'quick answer'\n"
    )
    assert kernel.run(setup).status == "ok"
    server.enqueue(tool_call_chunks([("hang", {"name": "a"}), ("hang", {"name": "b"})]))
    state: dict[str, float] = {}

    def on_poll() -> None:
        if "at" not in state and (tmp_path / "a").exists() and (tmp_path / "b").exists():
            state["at"] = time.monotonic()
            kernel.interrupt()

    try:
        result = kernel.run("%%pi --approve auto\nHang twice", on_poll=on_poll, timeout=60)
        assert "at" in state, result.text
        assert result.reply.get("ename") == "PiInterrupted", result.text
        server.enqueue(tool_call_chunks([("quick", {})]), text_chunks("Done."))
        started = time.monotonic()
        after = kernel.run("%%pi --approve auto\nQuick", timeout=60)
        assert after.status == "ok", after.text
        assert time.monotonic() - started < 10, "the quick tool waited for a worker"
        assert tool_contents(server)[-1] == "quick answer", tool_contents(server)
        assert_one_result_per_call(server.last_body["messages"], expected_calls=3)
    finally:
        kernel.run("release.set()\ntool_execution._pool = tool_execution.WorkerPool()")
