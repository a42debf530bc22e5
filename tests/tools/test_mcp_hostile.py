"""Hostile MCP servers (results, tool names, schemas, URLs), approval rules and allowed_models entries.

A real stdio server (``hostile_mcp_server.py``) answering with replies the SDK cannot take: nested
too deep, or huge.

One bad MCP tool breaks nothing else; a misbehaving server process is seen, bounded and ended.

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
import base64
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import mcp_types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_helpers import alive, demo, wait_gone

from pi_kernel.ai import ImageContent
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.model_resolution import is_allowed, model_from_spec
from pi_kernel.tools import ToolDefinition, ToolRegistry
from pi_kernel.tools.mcp import McpManager, McpToolError, server_config, to_result
from pi_kernel.tools.mcp.server import McpServer, McpServerError
from pi_kernel.tools.mcp.server_config import McpServerConfig
from pi_kernel.tools.mcp.stdio import STDERR_KEPT_CHARS

REPO = Path(__file__).resolve().parents[2]


def _image_result(data: bytes, mime: str) -> mcp_types.CallToolResult:
    block = mcp_types.ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime)
    return mcp_types.CallToolResult(content=[block])


def test_an_undecodable_image_from_a_server_never_reaches_the_model() -> None:
    """A server's "image/png" that is not an image is passed to the provider as is (``fit_image`` sends
    what Pillow cannot open when it is small): every later request of the conversation is refused (400
    invalid image), so one hostile result makes the session unsendable."""
    result = to_result("evil", "shot", _image_result(b"<html>not an image</html>", "image/png"))
    assert not any(isinstance(part, ImageContent) for part in result.content), result.content


def test_an_image_with_a_mime_type_providers_refuse_is_not_sent() -> None:
    """The server's mime type is copied into the data URL: ``image/x-evil`` or ``image/svg+xml``."""
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'
    result = to_result("evil", "shot", _image_result(svg, "image/svg+xml"))
    assert not any(isinstance(part, ImageContent) for part in result.content), result.content


def _tool(name: str, read_only: bool = False) -> mcp_types.Tool:
    annotations = mcp_types.ToolAnnotations(read_only_hint=True) if read_only else None
    return mcp_types.Tool(name=name, input_schema={"type": "object"}, annotations=annotations, description=name)


def _register(manager: McpManager, name: str, tools: list[mcp_types.Tool], trust: bool = False) -> None:
    server = McpServer(server_config(name, {"command": "true", "trustReadOnlyHint": trust}))
    server.tools, server.state = tools, "running"
    manager.servers[name] = server
    manager._register(server)


def test_two_tools_of_one_server_that_sanitize_to_one_name_are_not_silently_shadowed() -> None:
    """``get.item`` and ``get_item`` both become ``docs__get_item``: the registry keeps only the last,
    so the model (and an approval card) calling ``docs__get_item`` runs the other tool than the one
    ``%pi mcp`` lists first, without any notice."""
    registry = ToolRegistry()
    manager = McpManager({}, registry)
    _register(manager, "docs", [_tool("get.item", read_only=True), _tool("get_item")], trust=True)
    names = [info.name for info in registry.list()]
    assert len(names) == 2 or manager.take_notices(), names


def test_an_mcp_tool_does_not_replace_a_tool_of_the_session_with_its_name() -> None:
    """A ``@tool`` named ``docs__search`` and the tool ``search`` of server ``docs``: the MCP tool
    gets a name of its own (with a notice) instead of silently replacing the session's tool."""

    async def run(*_args: object) -> None:
        return None

    registry = ToolRegistry()
    mine = ToolDefinition(name="docs__search", label="mine", description="mine", parameters={}, execute=run)
    registry.add(mine)
    manager = McpManager({}, registry)
    _register(manager, "docs", [_tool("search")])
    assert registry.get("docs__search") is mine
    assert len(registry.names()) == 2 and manager.take_notices()
    listed = manager.describe()
    assert next(name for name in registry.names() if name != "docs__search") in listed


@pytest.mark.parametrize("name", ["a_", "_a"])
def test_a_server_name_cannot_start_or_end_with_an_underscore(name: str) -> None:
    """Server ``a`` with tool ``__run`` and server ``a_`` with tool ``_run`` would both be ``a____run``."""
    with pytest.raises(ValueError, match="start or end"):
        server_config(name, {"command": "true"})


def test_a_deny_for_a_whole_server_is_not_undone_by_a_longer_auto_pattern() -> None:
    """docs/mcp.md: ``%pi approve shell__*=deny`` "never run the tools of shell". With another rule
    ``*read_file=auto`` (meant for some other server), the longer pattern wins and
    ``shell__read_file`` runs without asking."""
    from pi_kernel.tools.approval import ApprovalPolicy

    policy = ApprovalPolicy()
    policy.apply_spec(["shell__*=deny", "*read_file=auto"])
    assert policy.decide(None, {}, name="shell__read_file") != "run"


def test_an_exact_rule_still_wins_over_a_stricter_pattern() -> None:
    """docs/mcp.md: ``docs__*=ask docs__search=auto`` asks for all of docs except its search."""
    from pi_kernel.tools.approval import ApprovalPolicy, override_for

    policy = ApprovalPolicy()
    policy.apply_spec(["docs__*=deny", "docs__search=auto"])
    assert override_for(policy.overrides, "docs__search") == "auto"
    assert override_for(policy.overrides, "docs__fetch") == "deny"


def test_mcp_list_never_shows_credentials_written_into_a_server_url() -> None:
    """``%pi mcp`` prints the URL as configured (an admin's ``c.PiKernel.mcp_servers`` too), so
    ``https://user:password@host`` lands in the notebook's output; ``describe_model`` masks the same
    thing for base URLs (``pi_kernel.ai.secrets.mask``)."""
    url = "https://bob:hunter2-secret@mcp.example.com/mcp"
    manager = McpManager({"docs": server_config("docs", {"url": url})})
    assert "hunter2-secret" not in manager.describe()


def test_a_provider_qualified_entry_does_not_allow_that_text_as_a_model_id_elsewhere() -> None:
    """``deepseek:*`` (every model of DeepSeek) is also compared with the bare id, so any provider's
    model whose id starts with ``deepseek:`` passes: ``openrouter:deepseek:r1`` is allowed."""
    model = model_from_spec("openrouter:deepseek:r1", PiSettings())
    assert model.provider == "openrouter"
    assert not is_allowed(model, ("deepseek:*",))
    assert is_allowed(model_from_spec("deepseek:deepseek-reasoner", PiSettings()), ("deepseek:*",))
    assert is_allowed(model, ("*:deepseek:r1",))


def test_a_server_name_too_long_for_per_server_rules_is_refused() -> None:
    """With a 58-character server name every tool name would be cut before the ``__``, so the documented
    per-server rule ``<server>__*=deny`` would match none of its tools: such a name is refused."""
    with pytest.raises(ValueError, match="longer than 40"):
        server_config("acme-corporation-internal-knowledge-base-production-us-east", {"command": "true"})


def test_a_per_server_rule_applies_to_the_longest_names_allowed() -> None:
    """The longest server name allowed and a long tool name: the tool name keeps ``<server>__``."""
    from pi_kernel.tools.approval import ApprovalPolicy
    from pi_kernel.tools.mcp import tool_name

    server = "s" * 40
    server_config(server, {"command": "true"})  # accepted
    policy = ApprovalPolicy()
    policy.apply_spec([f"{server}__*=deny"])
    assert policy.decide(None, {}, name=tool_name(server, "search" * 20)) == "deny"


def test_a_server_schema_pattern_cannot_freeze_the_kernel() -> None:
    """A server's ``inputSchema`` may carry a catastrophic regex; validating the model's arguments
    runs it on the kernel's event loop (no interrupt reaches ``re``): ``^(a+)+$`` against 30 ``a`` and a
    ``!`` takes minutes. Run in a child process with a 10 s limit."""
    import subprocess

    code = (
        "from pi_kernel.ai.tool import Tool\n"
        "from pi_kernel.ai.tool import validate_tool_arguments\n"
        "from pi_kernel.ai import ToolCall\n"
        "t = Tool('t', 'd', {'type': 'object', 'properties': {'a': {'type': 'string', 'pattern': '^(a+)+$'}}})\n"
        "try:\n    validate_tool_arguments(t, ToolCall('1', 't', {'a': 'a' * 30 + '!'}))\n"
        "except Exception:\n    pass\n"
    )
    try:
        subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=10, check=True)
    except subprocess.TimeoutExpired:
        raise AssertionError("argument validation against a server's pattern ran over 10 s") from None


def test_a_pattern_too_slow_to_check_is_an_error_the_model_reads_and_good_patterns_still_apply() -> None:
    from pi_kernel.ai import ToolCall
    from pi_kernel.ai.tool import Tool, validate_tool_arguments

    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|aa)+$"}}}
    tool = Tool("t", "d", schema)
    with pytest.raises(Exception, match="could not be checked against the pattern"):  # re: minutes
        validate_tool_arguments(tool, ToolCall("1", "t", {"a": "a" * 40 + "!"}))
    with pytest.raises(Exception, match="does not match"):
        validate_tool_arguments(tool, ToolCall("2", "t", {"a": "b"}))
    assert validate_tool_arguments(tool, ToolCall("3", "t", {"a": "aaa"})) == {"a": "aaa"}


# --------------------------------------------------------------------------- mcp hostile server


SERVER = str(Path(__file__).resolve().parents[1] / "hostile_mcp_server.py")


def test_a_reply_too_deep_to_parse_is_an_error_at_once_not_a_wait_for_the_timeout() -> None:
    """The reply's line fails to parse (``_parse`` returns the error to the session), so the request
    never gets an answer: the call waits its whole ``timeout`` (10 minutes by default; 20 s here)
    instead of failing at once with a clear error."""
    manager = McpManager(registry=ToolRegistry())
    loop = asyncio.new_event_loop()  # the servers' loop, as a kernel's is
    try:
        manager.add(server_config("hostile", {"command": sys.executable, "args": [SERVER, "deep"], "timeout": 20000}))
        loop.run_until_complete(manager.start_server("hostile"))
        definition = manager.registry.get("hostile__get")  # type: ignore[union-attr]
        assert definition is not None
        started = time.monotonic()
        with pytest.raises((McpServerError, McpToolError)) as caught:
            loop.run_until_complete(definition.execute("c", {}, None, None, None))
        took = time.monotonic() - started
        assert took < 10, f"took {took:.1f} s: {caught.value}"
        assert "not a valid reply" in str(caught.value)
    finally:
        manager.close()
        loop.close()


def test_a_huge_reply_is_refused_quickly_not_buffered_quadratically() -> None:
    """One 40 MB text block: the transport joins each 64 KB chunk onto the whole buffer
    (``(buffer + chunk).split``), so it takes ~30 s here (quadratic; 100 MB takes minutes) and holds
    all of it in memory, although the model will only ever read ``max_tool_result_chars`` of it."""
    manager = McpManager(registry=ToolRegistry())
    loop = asyncio.new_event_loop()  # the servers' loop, as a kernel's is
    try:
        manager.add(server_config("huge", {"command": sys.executable, "args": [SERVER, "huge"], "timeout": 120000}))
        loop.run_until_complete(manager.start_server("huge"))
        definition = manager.registry.get("huge__get")  # type: ignore[union-attr]
        assert definition is not None
        started = time.monotonic()
        with pytest.raises(McpServerError, match="longer than 16 MB"):
            loop.run_until_complete(definition.execute("c", {}, None, None, None))
        took = time.monotonic() - started
        assert took < 10, f"a 40 MB reply took {took:.1f} s"
        assert manager.servers["huge"].state == "running"  # the server stays usable
    finally:
        manager.close()
        loop.close()


# --------------------------------------------------------------------------- mcp one bad tool


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
