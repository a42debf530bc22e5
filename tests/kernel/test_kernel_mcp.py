"""MCP servers in the real Pi kernel: configuration, ``%pi mcp``, approval, failures, interrupt, shutdown.

The model is the scripted OpenAI-compatible server; the MCP servers are real
processes (``mcp-server-time`` from PyPI, the FastMCP demo server of
``tests/mcp_demo_server.py``) reached through the SDK.

Misbehaving MCP servers in the real Pi kernel: one bad tool breaks nothing else, ``%pi mcp`` tells the truth.

Found by an adversary: a tool with an invalid JSON schema made ``%pi mcp add`` fail while ``%pi mcp`` said
"running"; from ``PI_MCP_CONFIG`` the first ``%%pi`` failed with a ``ToolSchemaError`` traceback and later
turns had no MCP tools from any server. A server that exited at start showed no stderr; ``--token`` /
``--password=`` showed in clear; a ``setsid()`` grandchild outlived the kernel. The servers are real
processes (``tests/mcp_misfit_server.py``, ``tests/mcp_demo_server.py``); the model is the scripted server.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, assert_one_result_per_call, kernel_env
from mcp_helpers import DEMO, alive, demo, http_demo_server, wait_gone

pytestmark = pytest.mark.kernel

PY = sys.executable
CLEAR_OVERRIDES = "from pi_kernel.kernel.extension import get_session; get_session().policy.overrides.clear()"


def tool_results(body: dict[str, Any]) -> list[str]:
    return [message["content"] for message in body["messages"] if message["role"] == "tool"]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        added = driver.run(f"%pi mcp add demo -- {PY} {DEMO}").text
        assert "demo: running" in added and "demo__echo [asks]" in added, added
        yield driver


def call(kernel: KernelDriver, server: FakeOpenAI, tool: str, args: dict[str, Any], cell_id: str) -> str:
    """One ``%%pi`` turn in which the model calls ``tool``; returns what the tool answered the model."""
    server.enqueue(tool_call_chunks([(tool, args)]), text_chunks("Done."))
    result = kernel.run(f"%%pi\nCall {tool}", cell_id=cell_id, timeout=60)
    assert result.status == "ok", result.text
    return tool_results(server.last_body)[-1]


def test_configured_servers_start_lazily_reach_the_model_and_leave_nothing_behind(
    server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    """``PI_MCP_CONFIG`` and ``c.PiKernel.mcp_servers`` add up; nothing starts before the first turn;
    a server that cannot start is a notice and ``%pi mcp`` shows it failed while the others work;
    shutting the kernel down ends the servers and what they started."""
    config = tmp_path / "mcp.json"
    time_server = {"command": PY, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    config.write_text(json.dumps({"mcpServers": {"time": time_server, "broken": {"command": "no-such-mcp-xyz"}}}))
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(f"c.PiKernel.mcp_servers = {{'demo': {demo()!r}}}\n")
    env = kernel_env(server.base_url, PI_MCP_CONFIG=str(config), IPYTHONDIR=str(tmp_path / "ipython"))
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        before = driver.run("%pi mcp").text
        assert re.findall(r"^(\w+): not started", before, re.M) == ["time", "broken", "demo"], before
        server.enqueue(text_chunks("Hello."))
        first = driver.run("%%pi\nHello", cell_id="first", timeout=90)
        assert first.status == "ok" and 'MCP server "broken" did not start: the command was not found' in first.text
        sent = {tool["function"]["name"] for tool in server.last_body["tools"]}
        assert {"time__get_current_time", "time__convert_time", "demo__echo", "demo__spawn"} <= sent
        listing = driver.run("%pi mcp").text
        assert "time: running" in listing and "demo: running" in listing and "broken: failed" in listing
        assert "time__get_current_time [asks]" in listing
        driver.run("%pi approve demo__spawn=auto time__*=auto")
        child = int(call(driver, server, "demo__spawn", {}, "spawn"))
        assert '"timezone": "UTC"' in call(driver, server, "time__get_current_time", {"timezone": "UTC"}, "time")
        pids = driver.run(
            "from pi_kernel.kernel.extension import get_session\n"
            "print(*[s.pid for s in get_session().mcp.servers.values() if s.pid])"
        ).text.split()
        servers = [int(pid) for pid in pids]
        assert len(servers) == 2 and alive(child) and all(alive(pid) for pid in servers)
    assert wait_gone(child, *servers) == []


def test_approval_policy_per_server_per_tool_and_trusted_read_only_hint(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    kernel.run("%pi reset")
    asked = call(kernel, server, "demo__echo", {"text": "hi"}, "a1")
    assert "nobody can approve" in asked  # an MCP tool asks by default (and nobody can answer here)
    assert "demo__*=auto" in kernel.run("%pi approve demo__*=auto demo__fail=deny").text
    try:
        assert call(kernel, server, "demo__echo", {"text": "hi"}, "a2") == "echo: hi"
        assert "disabled by the approval policy" in call(kernel, server, "demo__fail", {"message": "x"}, "a3")
        added = kernel.run(f"%pi mcp add trusty --trust-read-only -- {PY} {DEMO}").text
        assert "trusty__peek [read-only]" in added and "trusty__echo [asks]" in added, added
        kernel.run("%pi approve read-only")
        assert call(kernel, server, "trusty__peek", {"key": "k"}, "a4") == "peeked k"
        assert "this session is read-only" in call(kernel, server, "trusty__echo", {"text": "t"}, "a5")
        kernel.run("%pi approve ask")
        assert call(kernel, server, "trusty__peek", {"key": "k"}, "a6") == "peeked k"  # no question asked
        assert "nobody can approve" in call(kernel, server, "trusty__echo", {"text": "t"}, "a7")
    finally:
        kernel.run("%pi mcp remove trusty")
        kernel.run("%pi approve ask")
        kernel.run(CLEAR_OVERRIDES)
    assert "trusty" not in kernel.run("%pi mcp").text
    assert_one_result_per_call(server.last_body["messages"])


def test_crash_and_hang_give_clear_results_and_the_kernel_keeps_working(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    kernel.run("%pi reset")
    kernel.run('from pi_kernel.kernel.extension import get_session; get_session().policy.overrides["*"] = "auto"')
    slow = json.dumps(demo(timeout=1000))  # a call may take 1 s
    kernel.run(f"from pi_kernel.tools.mcp import server_config\nget_session().mcp.add(server_config('slow', {slow}))")
    try:
        server.enqueue(tool_call_chunks([("demo__crash", {})]), text_chunks("It crashed."))
        crashed = kernel.run("%%pi\nCrash it", cell_id="c1", timeout=60)
        assert crashed.status == "ok"
        result = tool_results(server.last_body)[-1]
        assert 'MCP server "demo" stopped during the call' in result and "code 3" in result
        assert 'pi_kernel: MCP server "demo" stopped during the call' in crashed.text  # the notice
        assert "demo: crashed" in kernel.run("%pi mcp").text
        assert call(kernel, server, "demo__echo", {"text": "again"}, "c2") == "echo: again"  # restarted
        # a hang: the slow server's calls time out after its "timeout"
        hung = call(kernel, server, "slow__sleep", {"seconds": 60}, "c3")
        assert 'MCP server "slow" did not answer the call of sleep within 1 s' in hung
        assert call(kernel, server, "demo__echo", {"text": "fine"}, "c4") == "echo: fine"
    finally:
        kernel.run(CLEAR_OVERRIDES)
        kernel.run("%pi mcp remove slow")
    assert_one_result_per_call(server.last_body["messages"])


def test_interrupt_cancels_an_mcp_call(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    kernel.run("%pi approve demo__sleep=auto")
    try:
        server.enqueue(tool_call_chunks([("demo__sleep", {"seconds": 120})]))
        state: dict[str, float] = {}

        def on_iopub(message: dict[str, Any]) -> None:
            if "at" not in state and server.pending == 0:
                state["at"] = time.monotonic()
                threading.Timer(2.0, kernel.interrupt).start()

        result = kernel.run("%%pi\nSleep", cell_id="i1", on_iopub=on_iopub, timeout=90)
        assert result.status == "error" and result.reply["ename"] == "PiInterrupted", result.text
        assert time.monotonic() - state["at"] < 20  # not the 120 s the call would take
        server.enqueue(text_chunks("Back."))
        assert kernel.run("%%pi\nStill there?", cell_id="i2").status == "ok"
        results = tool_results(server.last_body)
        assert len(results) == 1 and ("was cancelled" in results[0] or "Operation aborted" in results[0])
        assert_one_result_per_call(server.last_body["messages"], expected_calls=1)
        assert call(kernel, server, "demo__sleep", {"seconds": 0}, "i3") == "slept 0.0"  # the server still answers
    finally:
        kernel.run(CLEAR_OVERRIDES)


def test_add_a_streamable_http_server_and_remove_it(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    with http_demo_server() as url:
        added = kernel.run(f"%pi mcp add web {url}").text
        assert f"web: running (http: {url})" in added and "web__echo [asks]" in added, added
        kernel.run("%pi approve web__echo=auto")
        try:
            assert call(kernel, server, "web__echo", {"text": "over http"}, "h1") == "echo: over http"
        finally:
            kernel.run(CLEAR_OVERRIDES)
        assert "MCP server web removed." in kernel.run("%pi mcp remove web").text
    assert "web__echo" not in kernel.run("%pi tools").text
    bad = kernel.run("%pi mcp add bad-one").text
    assert "UsageError: %pi mcp" in bad
    assert "no MCP server named 'nope'" in kernel.run("%pi mcp remove nope").text


def test_mcp_lines_wait_on_the_kernels_loop_where_a_cell_can_await(kernel: KernelDriver) -> None:
    """The servers live on the kernel's loop (issue 25): a ``%pi mcp add`` written as the tutorial writes it
    (``run_line_magic`` with an f-string, after other code) is awaited there and shows the running server;
    inside a block, where the cell cannot await it, it says what to do instead of blocking the loop."""
    written = f'import sys\nget_ipython().run_line_magic("pi", f"mcp add twin -- {{sys.executable}} {DEMO}")'
    added = kernel.run(written).text
    assert "twin: running" in added and "twin__echo [asks]" in added, added
    try:
        nested = kernel.run("if True:\n    %pi mcp remove twin")
        assert nested.status == "error" and "run `%pi mcp remove ...` as a cell of its own" in nested.text
        assert "twin: running" in kernel.run("%pi mcp").text
    finally:
        assert "MCP server twin removed." in kernel.run("%pi mcp remove twin").text


def test_interrupt_while_servers_start_stops_the_wait(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """A server stuck at start holds the turn only until the interrupt; the kernel stays usable."""
    kernel.run("%pi reset")
    stuck = json.dumps(demo("hang", startTimeout=120000))
    kernel.run(
        "from pi_kernel.kernel.extension import get_session\nfrom pi_kernel.tools.mcp import server_config\n"
        f"get_session().mcp.add(server_config('stuck', {stuck}), start=False)"
    )
    requests = len(server.chat_requests)
    try:
        state: dict[str, float] = {}

        def on_iopub(message: dict[str, Any]) -> None:
            if "at" not in state and message["msg_type"] == "status":
                state["at"] = time.monotonic()
                threading.Timer(2.0, kernel.interrupt).start()

        result = kernel.run("%%pi\nHello", cell_id="s1", on_iopub=on_iopub, timeout=90)
        assert result.status == "error" and result.reply["ename"] == "PiInterrupted", result.text
        assert time.monotonic() - state["at"] < 20  # not the 120 s the start may take
        assert len(server.chat_requests) == requests  # the turn stopped before asking the model
        assert "stuck: starting" in kernel.run("%pi mcp").text
    finally:
        kernel.run("%pi mcp remove stuck")
    server.enqueue(text_chunks("Hi."))
    assert kernel.run("%%pi\nHello again", cell_id="s2").status == "ok"


def test_mcp_settings_add_up_and_bad_ones_fall_back(tmp_path: Path) -> None:
    from pi_kernel.kernel.config import apply_config, settings_from_env

    file = tmp_path / "mcp.json"
    file.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}))
    problems: list[str] = []
    settings = settings_from_env({"PI_MCP_CONFIG": str(file)}, problems=problems)
    settings = apply_config(settings, {"mcp_servers": '{"b": {"url": "http://h/mcp"}}'}, problems)
    assert settings.mcp_servers == {"a": {"command": "x"}, "b": {"url": "http://h/mcp"}} and problems == []
    settings_from_env({"PI_MCP_CONFIG": str(tmp_path / "missing.json")}, problems=problems)
    apply_config(settings, {"mcp_servers": "[1, 2]"}, problems)
    assert problems[0].startswith("PI_MCP_CONFIG: cannot read") and "no MCP servers from that file" in problems[0]
    assert problems[1].startswith("PiKernel.mcp_servers: not an object such as")


# --------------------------------------------------------------------------- kernel mcp misfits


MISFIT = str(Path(__file__).resolve().parent.parent / "mcp_misfit_server.py")


@pytest.fixture(scope="module")
def misfit_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def test_a_bad_tool_from_the_configuration_breaks_no_turn_and_no_other_server(
    misfit_server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    pid_file = tmp_path / "grandchild.pid"
    servers = {
        "misfit": {"command": PY, "args": [MISFIT, "badschema"]},
        "demo": demo(),
        "forks": {"command": PY, "args": [MISFIT, "setsid", str(pid_file)]},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    env = kernel_env(misfit_server.base_url, PI_MCP_CONFIG=str(config), PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as kernel:
        misfit_server.enqueue(text_chunks("Hello."))
        first = kernel.run("%%pi\nHello", timeout=90)
        assert first.status == "ok" and "Hello." in first.text and "Traceback" not in first.text, first.text
        notices = [line for line in first.text.splitlines() if '"broken"' in line]
        assert len(notices) == 2, first.text  # one line for each server that lists it ("forks" too)
        assert 'MCP server "misfit": its tool "broken" is left out' in notices[0]
        assert 'MCP server "forks": its tool "broken" is left out' in notices[1]
        sent = {tool["function"]["name"] for tool in misfit_server.last_body["tools"]}
        assert {"misfit__good", "misfit__also_good", "demo__echo", "forks__good"} <= sent
        assert "misfit__broken" not in sent
        misfit_server.enqueue(tool_call_chunks([("misfit__also_good", {"n": 7})]), text_chunks("Done."))
        second = kernel.run("%%pi\nCall it", timeout=90)
        assert second.status == "ok" and '"broken"' not in second.text  # the notice is shown once
        results = [m["content"] for m in misfit_server.last_body["messages"] if m["role"] == "tool"]
        assert results[-1] == 'also_good: {"n": 7}'
        assert {"misfit__good", "demo__echo"} <= {tool["function"]["name"] for tool in misfit_server.last_body["tools"]}
        listing = kernel.run("%pi mcp").text
        assert "misfit: running" in listing and "    broken: left out:" in listing
        assert "misfit__broken [" not in listing and "misfit__good [asks]" in listing
        for _ in range(200):
            if pid_file.exists():
                break
            time.sleep(0.05)
        grandchild = int(pid_file.read_text())
        assert alive(grandchild)
    assert wait_gone(grandchild, timeout=20) == []  # the kernel's shutdown ended what left the group too


def test_pi_mcp_add_tells_the_truth_about_misfits(misfit_server: FakeOpenAI, pi_jupyter_path: str) -> None:
    with KernelDriver(env=kernel_env(misfit_server.base_url), jupyter_path=pi_jupyter_path) as kernel:
        added = kernel.run(f"%pi mcp add misfit -- {PY} {MISFIT} badschema")
        assert added.status == "ok" and "UsageError" not in added.text, added.text
        assert "misfit: running" in added.text and "misfit__good [asks]" in added.text
        assert "    broken: left out:" in added.text
        dies = kernel.run(f"%pi mcp add dies -- {PY} {MISFIT} exit").text
        assert "dies: failed" in dies and "fatal: the setting FOO_URL is missing" in dies, dies
        token = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
        secretive = kernel.run(f"%pi mcp add secretive -- {PY} {MISFIT} args --token {token} --password=hunter2-x")
        listing = kernel.run("%pi mcp").text
        for shown in (secretive.text, listing):
            assert token not in shown and "hunter2-x" not in shown and "--token *** --password=***" in shown
        assert "misfit: running" in listing and "dies: failed" in listing


def test_a_kernel_killed_without_a_word_leaves_no_setsid_grandchild(
    misfit_server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    """SIGKILL skips ``atexit``: the reaper ends the server's group and the processes carrying its tag."""
    pid_file = tmp_path / "grandchild.pid"
    with KernelDriver(env=kernel_env(misfit_server.base_url), jupyter_path=pi_jupyter_path) as kernel:
        added = kernel.run(f"%pi mcp add forks -- {PY} {MISFIT} setsid {pid_file}").text
        assert "forks: running" in added, added
        for _ in range(200):
            if pid_file.exists():
                break
            time.sleep(0.05)
        grandchild = int(pid_file.read_text())
        kernel_pid = int(kernel.run("import os; print(os.getpid())").text.strip())
        assert alive(grandchild)
        os.kill(kernel_pid, signal.SIGKILL)
        assert wait_gone(grandchild, timeout=20) == []
