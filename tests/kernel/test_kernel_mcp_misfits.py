"""Misbehaving MCP servers in the real Pi kernel: one bad tool breaks nothing else, ``%pi mcp`` tells the truth.

Found by an adversary: a tool with an invalid JSON schema made ``%pi mcp add`` fail while ``%pi mcp`` said
"running"; from ``PI_MCP_CONFIG`` the first ``%%pi`` failed with a ``ToolSchemaError`` traceback and later
turns had no MCP tools from any server. A server that exited at start showed no stderr; ``--token`` /
``--password=`` showed in clear; a ``setsid()`` grandchild outlived the kernel. The servers are real
processes (``tests/mcp_misfit_server.py``, ``tests/mcp_demo_server.py``); the model is the scripted server.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env
from mcp_helpers import alive, demo, wait_gone

pytestmark = pytest.mark.kernel

PY = sys.executable
MISFIT = str(Path(__file__).resolve().parent.parent / "mcp_misfit_server.py")


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def test_a_bad_tool_from_the_configuration_breaks_no_turn_and_no_other_server(
    server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    pid_file = tmp_path / "grandchild.pid"
    servers = {
        "misfit": {"command": PY, "args": [MISFIT, "badschema"]},
        "demo": demo(),
        "forks": {"command": PY, "args": [MISFIT, "setsid", str(pid_file)]},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    env = kernel_env(server.base_url, PI_MCP_CONFIG=str(config), PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as kernel:
        server.enqueue(text_chunks("Hello."))
        first = kernel.run("%%pi\nHello", timeout=90)
        assert first.status == "ok" and "Hello." in first.text and "Traceback" not in first.text, first.text
        notices = [line for line in first.text.splitlines() if '"broken"' in line]
        assert len(notices) == 2, first.text  # one line for each server that lists it ("forks" too)
        assert 'MCP server "misfit": its tool "broken" is left out' in notices[0]
        assert 'MCP server "forks": its tool "broken" is left out' in notices[1]
        sent = {tool["function"]["name"] for tool in server.last_body["tools"]}
        assert {"misfit__good", "misfit__also_good", "demo__echo", "forks__good"} <= sent
        assert "misfit__broken" not in sent
        server.enqueue(tool_call_chunks([("misfit__also_good", {"n": 7})]), text_chunks("Done."))
        second = kernel.run("%%pi\nCall it", timeout=90)
        assert second.status == "ok" and '"broken"' not in second.text  # the notice is shown once
        results = [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"]
        assert results[-1] == 'also_good: {"n": 7}'
        assert {"misfit__good", "demo__echo"} <= {tool["function"]["name"] for tool in server.last_body["tools"]}
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


def test_pi_mcp_add_tells_the_truth_about_misfits(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as kernel:
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
    server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    """SIGKILL skips ``atexit``: the reaper ends the server's group and the processes carrying its tag."""
    pid_file = tmp_path / "grandchild.pid"
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as kernel:
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
