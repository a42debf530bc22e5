"""One bad MCP tool breaks nothing else; a misbehaving server process is seen, bounded and ended.

Real servers (``tests/mcp_misfit_server.py``, a raw stdio server; ``tests/mcp_demo_server.py``, FastMCP)
through the SDK, in the session's ``McpManager``:

- a tool whose input schema is not a valid JSON schema once made ``%pi mcp add`` fail while ``%pi mcp``
  said "running" and none of that server's tools were registered; now it is left out with a one-line notice
  naming it, its server's other tools and every other server work, and ``%pi mcp`` says it is left out;
- a server that exits at start once showed no stderr (the log was removed before it was read);
- ``--token ghp_...`` / ``--password=...`` in a server's command line showed in clear in ``%pi mcp``;
- a grandchild that called ``setsid()`` outlived the kernel (only the process group was ended); the SDK's own
  ``stdio_client`` still leaves it running, which is why ``tools.mcp.stdio`` is ours;
- the stderr log grew without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_helpers import alive, demo, wait_gone

from pi_kernel.tools import ToolRegistry
from pi_kernel.tools.definition import ToolDefinition
from pi_kernel.tools.mcp import McpManager, server_config
from pi_kernel.tools.mcp.server import McpServer
from pi_kernel.tools.mcp.server_config import McpServerConfig
from pi_kernel.tools.mcp.stdio import STDERR_KEPT_CHARS

MISFIT = str(Path(__file__).resolve().parent.parent / "mcp_misfit_server.py")


def misfit(*args: str) -> dict[str, object]:
    return {"command": sys.executable, "args": [MISFIT, *args]}


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The servers' loop, as a kernel's is: every start and call runs on it."""
    made = asyncio.new_event_loop()
    yield made
    made.close()


@pytest.fixture
def manager(loop: asyncio.AbstractEventLoop) -> Iterator[McpManager]:
    made = McpManager(registry=ToolRegistry())
    yield made
    made.close()


def start(manager: McpManager, loop: asyncio.AbstractEventLoop, config: McpServerConfig) -> McpServer:
    """``%pi mcp add``: record the server, then start it on the servers' loop."""
    manager.add(config)
    return loop.run_until_complete(manager.start_server(config.name))


def call(manager: McpManager, loop: asyncio.AbstractEventLoop, name: str, args: dict[str, object]) -> str:
    assert manager.registry is not None
    definition = manager.registry.get(name)
    assert definition is not None, f"{name} not in {manager.registry.names()}"
    result = loop.run_until_complete(definition.execute("call-1", args, None, None, None))  # type: ignore[arg-type]
    return str(result.content[0].text)  # type: ignore[union-attr]


def test_a_tool_with_an_invalid_schema_is_left_out_and_the_rest_work(
    manager: McpManager, loop: asyncio.AbstractEventLoop
) -> None:
    start(manager, loop, server_config("demo", demo()))
    start(manager, loop, server_config("misfit", misfit("badschema")))
    assert manager.registry is not None
    names = set(manager.registry.names())
    assert {"misfit__good", "misfit__also_good"} <= names and "misfit__broken" not in names
    assert "demo__echo" in names  # the other server is untouched
    notices = manager.take_notices()
    assert len(notices) == 1 and "\n" not in notices[0], notices
    assert 'MCP server "misfit": its tool "broken" is left out' in notices[0] and "nonsense" in notices[0]
    listing = manager.describe()
    assert "misfit: running" in listing and "misfit__good [asks]" in listing
    assert "    broken: left out:" in listing and "misfit__broken [" not in listing  # the truth: not registered
    assert call(manager, loop, "misfit__also_good", {"n": 2}) == 'also_good: {"n": 2}'
    assert call(manager, loop, "demo__echo", {"text": "hi"}) == "echo: hi"
    loop.run_until_complete(manager.restart("misfit"))  # a restart registers the same way
    assert "misfit__good" in manager.registry.names() and "misfit__broken" not in manager.registry.names()


def test_servers_started_together_each_register_despite_a_bad_tool(
    manager: McpManager, loop: asyncio.AbstractEventLoop
) -> None:
    """From the configuration (``PI_MCP_CONFIG``) servers start together: a bad tool in the first once
    stopped every server after it from registering."""
    manager.servers.clear()
    for name, entry in (("misfit", misfit("badschema")), ("demo", demo())):
        manager.add(server_config(name, entry))
    loop.run_until_complete(manager.ensure_started())
    assert manager.registry is not None
    assert {"misfit__good", "misfit__also_good", "demo__echo"} <= set(manager.registry.names())
    assert [notice for notice in manager.take_notices() if '"broken"' in notice]


def test_a_server_that_exits_at_start_shows_its_stderr(manager: McpManager, loop: asyncio.AbstractEventLoop) -> None:
    server = start(manager, loop, server_config("dies", misfit("exit")))
    assert server.state == "failed"
    listing = manager.describe()
    assert "dies: failed" in listing and "fatal: the setting FOO_URL is missing" in listing, listing


def test_secrets_in_a_server_command_line_are_masked(manager: McpManager, loop: asyncio.AbstractEventLoop) -> None:
    token, password = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "correct-horse-battery"
    entry = misfit("args", "--token", token, f"--password={password}", "--api-key", "plainvalue123", "-p", "8080")
    start(manager, loop, server_config("secretive", entry))
    listing = manager.describe()
    assert "secretive: running" in listing
    for secret in (token, password, "plainvalue123"):
        assert secret not in listing, listing
    assert "--token *** --password=*** --api-key *** -p 8080" in listing


def test_a_grandchild_that_left_the_group_does_not_outlive_the_session(
    tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    manager = McpManager(registry=ToolRegistry())
    try:
        server = start(manager, loop, server_config("forks", misfit("setsid", str(pid_file))))
        for _ in range(200):
            if pid_file.exists():
                break
            loop.run_until_complete(asyncio.sleep(0.05))
        grandchild = int(pid_file.read_text())
        assert alive(grandchild)
        group = Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1].split()[2]
        assert server.pid is not None and group != str(server.pid)  # it left the server's process group
    finally:
        manager.close()
    assert wait_gone(grandchild, timeout=15) == []


def test_the_sdks_own_stdio_client_leaves_a_setsid_grandchild_running(
    tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    """Why ``tools.mcp.stdio`` keeps its own transport (issue 25, point 7): the SDK's ``stdio_client``, closed,
    leaves running the grandchild that ours ends (the test above). Should this fail, an SDK ends it too."""
    pid_file = tmp_path / "grandchild.pid"

    async def open_and_close() -> int:
        server = StdioServerParameters(command=sys.executable, args=[MISFIT, "setsid", str(pid_file)])
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with stdio_client(server, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                while not pid_file.exists():
                    await asyncio.sleep(0.05)
        return int(pid_file.read_text())

    grandchild = loop.run_until_complete(asyncio.wait_for(open_and_close(), 30))
    try:
        assert wait_gone(grandchild, timeout=2) == [grandchild], "the SDK now meets the guarantee: switch to it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(grandchild, signal.SIGKILL)


def test_the_stderr_log_is_capped(manager: McpManager, loop: asyncio.AbstractEventLoop) -> None:
    server = start(manager, loop, server_config("noisy", misfit("spew", "8")))
    assert server.state == "running"
    assert call(manager, loop, "noisy__good", {}) == "good: {}"
    process = server._process
    assert process is not None
    assert process.stderr_kept <= 2 * STDERR_KEPT_CHARS  # 8 MB written, at most 128 KB held
    assert process.stderr_tail().endswith("x" * 100)


class RefusingRegistry(ToolRegistry):
    """A registry that refuses one tool's ``add`` (a listener that raises, say)."""

    def add(self, definition: ToolDefinition, *, enabled: bool | None = None) -> ToolDefinition:
        if definition.name == "misfit__also_good":
            raise RuntimeError("a listener refused misfit__also_good")
        return super().add(definition, enabled=enabled)


def test_a_tool_the_registry_refuses_is_listed_as_left_out_and_the_rest_are_registered(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """``registry.add`` ran outside the per-tool ``try``: when it raised, ``%pi mcp`` still listed every tool
    as registered (``misfit__also_good [asks]``) and the tools added before it were never unregistered."""
    manager = McpManager(registry=RefusingRegistry())
    try:
        start(manager, loop, server_config("misfit", misfit("badschema")))
        assert manager.registry is not None
        assert "misfit__good" in manager.registry.names() and "misfit__also_good" not in manager.registry.names()
        listing = manager.describe()
        assert "misfit: running" in listing and "misfit__good [asks]" in listing, listing
        assert "    also_good: left out: a listener refused misfit__also_good" in listing, listing
        assert "misfit__also_good [" not in listing, listing
        assert [notice for notice in manager.take_notices() if '"also_good" is left out' in notice]
        assert call(manager, loop, "misfit__good", {}) == "good: {}"
        loop.run_until_complete(manager.remove("misfit"))
        assert "misfit__good" not in manager.registry.names()  # what it registered is unregistered
    finally:
        manager.close()
