"""Interrupting a ``%%pi`` cell with the kernel's interrupt (SIGINT), as the toolbar button does.

In every case: the cell ends "Interrupted", every tool call of the
conversation has exactly one result, and the next ``%%pi`` works (the fake
server accepts the history and the kernel answers).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Chunks, FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import (
    ADD_TOOL_CELL,
    KernelDriver,
    approval_requests,
    assert_one_result_per_call,
    conversation_tool_calls,
    kernel_env,
)

pytestmark = pytest.mark.kernel

SETUP = ADD_TOOL_CELL


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
        yield driver


def assert_interrupted_then_usable(kernel: KernelDriver, server: FakeOpenAI, result: Any, calls: int = 0) -> None:
    """The cell ended "Interrupted"; the session's conversation and the next request's replayed history
    give each of the turn's ``calls`` tool calls exactly one result; the next ``%%pi`` works.
    Each test starts from ``%pi reset``, so the conversation holds only that turn's calls."""
    assert result.status == "error" and result.reply["ename"] == "PiInterrupted", result.text
    assert "Interrupted" in result.text
    held = conversation_tool_calls(kernel)
    server.enqueue(text_chunks("Still here."))
    after = kernel.run("%%pi\nAre you still there?")
    assert after.status == "ok" and "Still here." in after.text
    assert held == calls
    assert_one_result_per_call(server.last_body["messages"], expected_calls=calls)


def test_interrupt_during_the_stream(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    server.enqueue(Chunks(text_chunks("word " * 100, parts=100), delay=0.3))
    started: dict[str, float] = {"updates": 0}

    def on_iopub(message: dict[str, Any]) -> None:
        if message["msg_type"] == "update_display_data":
            started["updates"] += 1
            if started["updates"] == 3:
                started["at"] = time.monotonic()
                kernel.interrupt()

    result = kernel.run("%%pi\nTalk", cell_id="stream", on_iopub=on_iopub, timeout=60)
    assert time.monotonic() - started["at"] < 10  # well before the 30 s the stream would take
    assert server.wait_for(lambda fake: fake.client_disconnects >= 1, timeout=5)  # the HTTP stream was closed
    assert_interrupted_then_usable(kernel, server, result)


def test_interrupt_while_tool_call_arguments_stream(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """The model is still writing a call's arguments: nothing runs (a cut call is never executed), the
    half-written call leaves no unanswered call behind, and the next turn's history is valid."""
    kernel.run("%pi reset")
    server.enqueue(Chunks(tool_call_chunks([("add", {"a": 12345678, "b": 87654321})], parts=60), delay=0.3))
    comm_id = kernel.comm_open("pi.approval")  # a front end that could approve: nothing may even ask
    seen: dict[str, Any] = {"updates": 0, "asked": []}

    def on_iopub(message: dict[str, Any]) -> None:
        seen["asked"].append(approval_requests(message))
        if message["msg_type"] == "update_display_data":
            seen["updates"] += 1
            if seen["updates"] == 3:
                seen["at"] = time.monotonic()
                kernel.interrupt()

    result = kernel.run("%%pi\nAdd two big numbers", cell_id="args", on_iopub=on_iopub, timeout=60)
    kernel.comm_close(comm_id)
    assert time.monotonic() - seen["at"] < 10  # well before the 18 s the stream would take
    assert server.wait_for(lambda fake: fake.client_disconnects >= 1, timeout=5)
    assert [request for request in seen["asked"] if request] == []  # no approval asked for a cut call
    cut = kernel.run(
        "from pi_kernel.kernel.extension import get_session as _s\n"
        "_m = [m for m in _s().agent.state.messages if m.role == 'assistant'][-1]\n"
        "print(_m.stop_reason, [c.name for c in _m.tool_calls])"
    ).text
    assert cut.strip() == "aborted ['add']"  # the half-written call is kept, in the aborted message
    assert_interrupted_then_usable(kernel, server, result)
    assert not any(message["role"] == "tool" for message in server.last_body["messages"])  # nothing ran


def test_interrupt_during_an_approval_wait(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]))
    comm_id = kernel.comm_open("pi.approval")
    state: dict[str, Any] = {}

    def on_iopub(message: dict[str, Any]) -> None:
        request = approval_requests(message)
        if request and "at" not in state:
            state["at"], state["id"] = time.monotonic(), request["tool_call_id"]
            kernel.interrupt()

    result = kernel.run("%%pi\nAdd twice", cell_id="approval", on_iopub=on_iopub, timeout=30)
    kernel.comm_close(comm_id)
    assert time.monotonic() - state["at"] < 10  # not the approval timeout
    assert "Operation aborted" in result.text or "Interrupted by the user" in result.text
    resolved = [
        data["decision"]
        for data in (message["data"] for message in kernel.comm_messages)
        if data.get("event") == "resolved" and data["request"]["tool_call_id"] == state["id"]
    ]
    assert resolved == [{"kind": "deny", "reason": "Interrupted by the user", "source": "interrupt"}]
    assert_interrupted_then_usable(kernel, server, result, calls=2)


def test_interrupt_during_a_stdin_approval_stops_the_question(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]))

    def interrupt_instead_of_answering(prompt: str) -> None:
        kernel.interrupt()

    result = kernel.run("%%pi\nAdd", cell_id="stdin", allow_stdin=True, on_input=interrupt_instead_of_answering)
    assert_interrupted_then_usable(kernel, server, result, calls=1)
    # The abandoned question's worker is gone: the next question gets its own answer.
    server.enqueue(tool_call_chunks([("add", {"a": 5, "b": 6})]), text_chunks("11."))
    answered = kernel.run("%%pi\nAdd again", cell_id="stdin2", allow_stdin=True, on_input=lambda prompt: "y")
    assert answered.status == "ok"
    assert [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"][-1] == "11"


def test_interrupt_during_a_bash_command_kills_its_process_group(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    if "bash" not in kernel.run("%pi tools").text:
        pytest.skip("the built-in bash tool is not available")
    kernel.run("%pi reset")
    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file}; sleep 30; echo never"
    server.enqueue(tool_call_chunks([("bash", {"command": command})]))
    state: dict[str, Any] = {}

    def on_poll() -> None:
        if "pgid" not in state and pid_file.exists() and pid_file.read_text().strip():
            state["pgid"] = int(pid_file.read_text())
            kernel.interrupt()

    result = kernel.run("%%pi --approve auto\nRun it", cell_id="bash", on_poll=on_poll, timeout=30)
    assert "pgid" in state, result.text
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _group_alive(state["pgid"]):
        time.sleep(0.05)
    assert not _group_alive(state["pgid"])
    assert_interrupted_then_usable(kernel, server, result, calls=1)


def test_python_cells_are_still_interrupted_as_usual(kernel: KernelDriver) -> None:
    state: dict[str, float] = {}

    def on_poll() -> None:
        if "at" not in state:
            state["at"] = time.monotonic() + 0.5
        elif state["at"] and time.monotonic() > state["at"]:
            state["at"] = 0
            kernel.interrupt()

    result = kernel.run("import time\ntime.sleep(30)", on_poll=on_poll, timeout=20)
    assert result.reply["ename"] == "KeyboardInterrupt"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def test_interrupt_stops_agent_run_python_and_the_next_call_answers_at_once(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 13, point 1: the ``python`` tool's code gets ``KeyboardInterrupt`` at once, even inside
    ``time.sleep`` (a C call), as a cell does; the namespace is free for the next call."""
    kernel.run("%pi reset")
    marker = tmp_path / "state"
    code = (
        f"import pathlib, time\nmarker = pathlib.Path({str(marker)!r})\nmarker.write_text('sleeping')\n"
        "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    marker.write_text('interrupted')\n    raise\n"
    )
    server.enqueue(tool_call_chunks([("python", {"code": code})]))
    state: dict[str, float] = {}

    def on_poll() -> None:
        if "at" not in state and marker.exists() and marker.read_text() == "sleeping":
            state["at"] = time.monotonic()
            kernel.interrupt()

    result = kernel.run("%%pi --approve auto\nSleep a minute", cell_id="py-sleep", on_poll=on_poll, timeout=90)
    assert "at" in state, result.text
    assert time.monotonic() - state["at"] < 5, "the sleep was not interrupted"
    assert marker.read_text() == "interrupted"  # KeyboardInterrupt was raised in the agent's code
    assert_interrupted_then_usable(kernel, server, result, calls=1)
    server.enqueue(tool_call_chunks([("python", {"code": "6 * 7"})]), text_chunks("42."))
    start = time.monotonic()
    after = kernel.run("%%pi --approve auto\nCompute", cell_id="py-next", timeout=60)
    assert after.status == "ok", after.text
    assert time.monotonic() - start < 5
    assert [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"][-1] == "42\n"
