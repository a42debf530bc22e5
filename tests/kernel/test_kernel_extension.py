"""``%load_ext pi_kernel`` in a stock ipykernel gives the same magics and the same agent turns.

The stock kernel is started with ``PI_APPROVAL=deny`` in its environment, so
this module also checks that the extension reads the environment.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import FAKE_KEY, KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def stock(server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    root = tmp_path_factory.mktemp("stock")
    spec = root / "kernels" / "stock"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "stock", "language": "python"}))
    env = kernel_env(server.base_url, PI_APPROVAL="deny")
    with KernelDriver("stock", env=env, jupyter_path=root) as driver:
        yield driver


AGENT_KIND = "import pi_kernel\n(type(pi_kernel.agent).__name__, hasattr(pi_kernel.agent, 'is_running'))"


def test_load_ext_gives_the_magics(stock: KernelDriver) -> None:
    assert stock.run("%pi").status == "error"  # not loaded yet
    # Without the extension, once imported (``tool`` imports it), the name is the agent package: the
    # contract promises the session agent only in the Pi kernel or after %load_ext.
    assert stock.run("from pi_kernel import tool\n" + AGENT_KIND).text.strip() == "('module', False)"
    assert stock.run("%load_ext pi_kernel").status == "ok"
    status = stock.run("%pi").text
    assert "fake-model" in status and "mode: deny" in status
    # From then on the package attribute is the session agent, though the subpackage was imported first.
    assert stock.run(AGENT_KIND).text.strip() == "('SessionAgent', True)"
    same = "from pi_kernel import agent\nfrom pi_kernel.kernel.extension import get_session\n"
    assert stock.run(same + "agent.state is get_session().agent.state").text.strip() == "True"


def test_pi_cells_run_in_the_stock_kernel(stock: KernelDriver, server: FakeOpenAI) -> None:
    stock.run(
        'from pi_kernel import tool\n@tool(approval="ask")\ndef add(a: int, b: int) -> int:\n'
        '    """Add."""\n    return a + b\n'
    )
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("Denied, as configured."))
    result = stock.run("%%pi\nAdd 1 and 2", cell_id="x")
    assert result.status == "ok" and "Denied, as configured." in result.text
    tool_messages = [m for m in server.last_body["messages"] if m["role"] == "tool"]
    assert "approval policy: deny" in tool_messages[-1]["content"]
    roles = stock.run("from pi_kernel import agent\n[m.role for m in agent.state.messages]").text
    assert roles.strip() == "['user', 'assistant', 'tool_result', 'assistant']"  # the session agent, here too


def test_the_extension_never_shows_the_key(stock: KernelDriver, tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    for command in ("%pi model", "%pi models", f"%pi save {path}"):
        assert stock.run(command).status == "ok"
    assert FAKE_KEY not in path.read_text()
    assert not [m for m in stock.iopub_log if FAKE_KEY in str(m)]


def test_traitlets_configure_the_pi_kernel(server: FakeOpenAI, tmp_path: Path) -> None:
    """``c.PiKernel.<name>`` in the kernel's config file, and on its command line, win over the environment,
    which wins over the ``.env`` file in the kernel's working directory (read, but its key never shown)."""
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text('c.PiKernel.builtin_tools = ["read"]\n')
    spec = tmp_path / "kernels" / "configured"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "pi_kernel", "-f", "{connection_file}"]
    argv += ["--PiKernel.model=configured-model", "--PiKernel.approval=read-only"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "configured", "language": "python"}))
    env = kernel_env(server.base_url, PI_APPROVAL="deny", IPYTHONDIR=str(tmp_path / "ipython"))
    dotenv_key = "sk-dotenv-SECRET-9876543210"
    workdir = tmp_path / "work"
    workdir.mkdir()
    dotenv = (
        f"DEEPSEEK_API_KEY={dotenv_key}\nPI_WORKSPACE_ROOT=/dotenv-root\nPI_APPROVAL_TIMEOUT=42\nPI_APPROVAL=auto\n"
    )
    (workdir / ".env").write_text(dotenv)
    with KernelDriver("configured", env=env, jupyter_path=tmp_path, cwd=workdir) as driver:
        status = driver.run("%pi").text
        read = driver.run(
            "import os\nfrom pi_kernel.kernel.extension import get_session\n"
            "settings = get_session().settings\n"
            "key_read = os.environ['DEEPSEEK_API_KEY'].endswith('SECRET-9876543210')\n"
            "(settings.workspace_root, settings.approval_timeout, key_read)"
        ).text
        models = driver.run("%pi models").text
        leaked = [m["msg_type"] for m in driver.iopub_log if dotenv_key in str(m)]
    assert "configured-model" in status and "mode: read-only" in status  # not .env's auto, not the env's deny
    assert "tools:     read\n" in status, status
    assert read.strip() == "('/dotenv-root', 60.0, True)"  # .env fills what the environment leaves unset
    assert "deepseek:deepseek-chat" in models  # the key from .env made DeepSeek available
    assert leaked == []
