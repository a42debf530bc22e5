"""The ``bash`` tool: output, exit codes, throttled streaming, timeout and abort killing the group, truncation."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from builtin_helpers import call_tool, make_ctx, text_of
from scripted_model import ScriptedModel, run_loop, text_message, tool_call, tool_call_message, tool_results, user

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortController
from pi_kernel.tools import wrap_tool_definition
from pi_kernel.tools.builtin import create_bash_tool
from pi_kernel.tools.builtin.output import DEFAULT_MAX_BYTES, OutputSpool
from pi_kernel.tools.paths import WorkspaceError

BASH = create_bash_tool()


def process_alive(pid: int) -> bool:
    """Alive and not a zombie (PID 1 of a container may not reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def wait_until_dead(pid: int, attempts: int = 250) -> bool:
    for _ in range(attempts):
        if not process_alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_output_of_a_successful_command(tmp_path: Path) -> None:
    result = await call_tool(BASH, {"command": "echo out; echo err >&2; pwd"}, make_ctx(tmp_path))
    assert text_of(result) == f"out\nerr\n{tmp_path}\n"
    assert result.details == {"exit_code": 0, "truncation": None, "full_output_path": None}


async def test_no_output_says_so(tmp_path: Path) -> None:
    assert text_of(await call_tool(BASH, {"command": "true"}, make_ctx(tmp_path))) == "(no output)"


async def test_non_zero_exit_is_an_error_with_the_output_and_pi_text(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as failed:
        await call_tool(BASH, {"command": "echo partial; echo oops >&2; exit 3"}, make_ctx(tmp_path))
    assert str(failed.value) == "partial\noops\n\n\nCommand exited with code 3"


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    command = f"echo started; sleep 30 & echo $! > {pid_file}; wait"
    with pytest.raises(RuntimeError) as failed:
        await call_tool(BASH, {"command": command, "timeout": 0.5}, make_ctx(tmp_path))
    assert str(failed.value) == "started\n\n\nCommand timed out after 0.5 seconds"
    assert await wait_until_dead(int(pid_file.read_text()))


async def test_abort_kills_the_process_group_promptly(tmp_path: Path) -> None:
    controller = AbortController()
    updates: list[AgentToolResult] = []
    command = "sleep 30 & echo child=$!; wait"
    task = asyncio.create_task(
        call_tool(BASH, {"command": command}, make_ctx(tmp_path), signal=controller.signal, updates=updates)
    )
    child_pid = None
    for _ in range(500):  # until the streamed output names the child
        texts = [text_of(update) for update in updates]
        found = next((re.search(r"child=(\d+)", text) for text in texts if "child=" in text), None)
        if found:
            child_pid = int(found.group(1))
            break
        await asyncio.sleep(0.01)
    assert child_pid is not None and process_alive(child_pid)
    started = time.monotonic()
    controller.abort()
    with pytest.raises(RuntimeError) as failed:
        await task
    assert str(failed.value) == f"child={child_pid}\n\n\nCommand aborted"
    assert time.monotonic() - started < 10  # far below the sleep's 30 s
    assert await wait_until_dead(child_pid)


async def test_a_child_that_ignores_sigterm_is_killed_too(tmp_path: Path) -> None:
    controller = AbortController()
    pid_file = tmp_path / "stubborn.pid"
    command = f"bash -c 'trap \"\" TERM; echo $$ > {pid_file}; sleep 30' & wait"
    task = asyncio.create_task(call_tool(BASH, {"command": command}, make_ctx(tmp_path), signal=controller.signal))
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.01)
    stubborn = int(pid_file.read_text())
    controller.abort()
    with pytest.raises(RuntimeError, match=r"Command aborted$"):
        await task
    assert await wait_until_dead(stubborn)


async def test_already_aborted_signal_runs_nothing(tmp_path: Path) -> None:
    controller = AbortController()
    controller.abort()
    with pytest.raises(RuntimeError, match=r"^Command aborted$"):
        await call_tool(BASH, {"command": f"touch {tmp_path / 'ran'}"}, make_ctx(tmp_path), signal=controller.signal)
    assert not (tmp_path / "ran").exists()


async def test_updates_stream_the_tail_and_are_throttled(tmp_path: Path) -> None:
    updates: list[AgentToolResult] = []
    command = "for i in $(seq 1 15); do seq 1 100; sleep 0.05; done; echo last"
    started = time.monotonic()
    result = await call_tool(BASH, {"command": command}, make_ctx(tmp_path), updates=updates)
    elapsed = time.monotonic() - started
    assert text_of(result).endswith("100\nlast\n")
    assert updates[0].content == []  # the immediate "running" update, as pi sends
    # 1,500 lines came in many chunks; at most one update per 100 ms (plus the first) went out.
    assert 3 <= len(updates) <= elapsed / 0.1 + 2
    shown = [text_of(update) for update in updates[1:]]
    assert all(len(text.split("\n")) <= 2000 for text in shown)
    assert shown[-1] != shown[0]  # the tail moved on


async def test_long_output_keeps_the_tail_and_saves_everything(tmp_path: Path) -> None:
    result = await call_tool(BASH, {"command": "seq 1 5000"}, make_ctx(tmp_path))
    text = text_of(result)
    path = result.details["full_output_path"]
    assert text.startswith("3002\n") and text.endswith(
        f"5000\n\n\n[Showing lines 3002-5001 of 5001. Full output: {path}]"
    )
    assert Path(path).read_text() == "".join(f"{i}\n" for i in range(1, 5001))
    assert result.details["truncation"]["truncated_by"] == "lines"
    os.unlink(path)


async def test_output_longer_than_memory_keeps_counts_the_whole_output(tmp_path: Path) -> None:
    """Memory keeps ~100 KB; the trailer's line numbers still count every line (288 KB here)."""
    result = await call_tool(BASH, {"command": "seq 1 50000"}, make_ctx(tmp_path))
    text = text_of(result)
    path = result.details["full_output_path"]
    assert text.startswith("48002\n") and text.endswith(
        f"50000\n\n\n[Showing lines 48002-50001 of 50001. Full output: {path}]"
    )
    full = Path(path).read_bytes()
    assert full == "".join(f"{i}\n" for i in range(1, 50001)).encode()
    truncation = result.details["truncation"]
    assert (truncation["total_lines"], truncation["total_bytes"]) == (50001, len(full))
    os.unlink(path)


def test_the_kept_tail_never_shrinks_below_what_the_model_is_shown() -> None:
    """A small chunk after a big one must not leave only the small one in memory."""
    spool = OutputSpool("pi-test")
    spool.add(b"a" * 101_000)
    spool.add(b"b" * 3_000)
    text, details = spool.final()
    assert text.startswith("a" * (DEFAULT_MAX_BYTES - 3_000) + "b" * 3_000)
    assert details["truncation"]["total_bytes"] == 104_000
    assert spool.full_output_path is not None
    os.unlink(spool.full_output_path)


async def test_one_huge_line_keeps_its_end_and_names_its_size(tmp_path: Path) -> None:
    result = await call_tool(BASH, {"command": "head -c 200000 /dev/zero | tr '\\0' a"}, make_ctx(tmp_path))
    path = result.details["full_output_path"]
    assert (
        text_of(result) == "a" * 51200 + f"\n\n[Showing last 50.0KB of line 1 (line is 195.3KB). Full output: {path}]"
    )
    assert os.path.getsize(path) == 200000
    os.unlink(path)


async def test_background_process_does_not_hold_the_result(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    result = await call_tool(BASH, {"command": f"sleep 30 & echo $! > {pid_file}; echo done"}, make_ctx(tmp_path))
    assert text_of(result) == "done\n"
    background = int(pid_file.read_text())
    try:
        assert process_alive(background)  # pi's semantics: left running, its output no longer read
    finally:
        os.kill(background, signal.SIGKILL)


async def test_working_directory_checks(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="Working directory does not exist"):
        await call_tool(BASH, {"command": "true"}, make_ctx(tmp_path / "gone"))
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(WorkspaceError, match="outside the workspace root"):
        await call_tool(BASH, {"command": "true"}, make_ctx(tmp_path, root))
    result = await call_tool(BASH, {"command": "pwd"}, make_ctx(root, root))
    assert text_of(result) == f"{root}\n"


async def test_bash_through_the_agent_loop_streams_updates_and_reports_errors(tmp_path: Path) -> None:
    tool = wrap_tool_definition(create_bash_tool(), make_ctx(tmp_path))
    calls = [
        tool_call("bash", {"command": "for i in 1 2 3 4 5; do echo tick $i; sleep 0.06; done"}),
        tool_call("bash", {"command": "echo bad; exit 2"}),
    ]
    model = ScriptedModel([tool_call_message(*calls), text_message("done")])
    events, messages = await run_loop(model, [user("run")], tools=[tool])
    ok, failed = tool_results(messages)
    assert not ok.is_error and ok.content[0].text.endswith("tick 5\n")  # type: ignore[union-attr]
    assert failed.is_error and failed.content[0].text == "bad\n\n\nCommand exited with code 2"  # type: ignore[union-attr]
    updates = [event for event in events if event.type == "tool_execution_update" and event.tool_call_id == calls[0].id]
    assert len(updates) >= 2


def test_bash_runs_on_an_event_loop_outside_the_main_thread(tmp_path: Path) -> None:
    """A second loop in a worker thread (a user's ``asyncio.run`` off the kernel thread) can run commands too."""
    box: dict[str, object] = {}

    def in_thread() -> None:
        box["result"] = asyncio.run(call_tool(BASH, {"command": "echo from-thread"}, make_ctx(tmp_path)))

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join(timeout=60)
    result = box["result"]
    assert isinstance(result, AgentToolResult) and text_of(result) == "from-thread\n"


SPOOL_KEY = "sk-spool-SECRET-0123456789abcdefXYZ"


async def test_the_full_output_file_is_private_masked_and_removed_at_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool file once was world-readable, held the keys a command printed, and was never removed."""
    monkeypatch.setenv("PI_TEST_API_KEY", SPOOL_KEY)
    command = f'for i in $(seq 1 4000); do echo "line $i {SPOOL_KEY}"; done'  # bash's own env has no key
    result = await call_tool(BASH, {"command": command}, make_ctx(tmp_path))
    path = Path(result.details["full_output_path"])
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    full = path.read_text()
    assert full.count("line ") == 4000 and full.count("***") == 4000 and SPOOL_KEY[5:17] not in full
    code = (
        "import asyncio, sys\nsys.path.insert(0, 'tests')\n"
        "from builtin_helpers import call_tool, make_ctx\nfrom pi_kernel.tools.builtin import create_bash_tool\n"
        "r = asyncio.run(call_tool(create_bash_tool(), {'command': 'seq 1 5000'}, make_ctx('.')))\n"
        "print(r.details['full_output_path'])"
    )
    repo = Path(__file__).resolve().parents[2]
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        cwd=repo,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    out, _ = await done.communicate()
    other = Path(out.decode().strip())
    assert other.name.startswith("pi-bash-") and not other.exists() and not other.parent.exists()  # gone at exit


def test_the_end_kept_of_an_over_long_last_line_holds_no_piece_of_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output cut from the end keeps the end of a last line longer than the limit: that end may begin inside a
    key, in a piece too short for the mask to know, so the line is masked before it is cut."""
    from pi_kernel.ai.secrets import mask
    from pi_kernel.tools.builtin.output import truncate_tail

    key = "sk-test-SECRET-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    for n in range(1, len(key) + 1):
        kept = mask(truncate_tail("x" * 100 + key + "y" * (50 * 1024 - n)).content)
        assert not any(kept.startswith(key[-size:]) for size in range(2, len(key) + 1)), (n, kept[:40])
