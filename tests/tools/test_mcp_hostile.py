"""Hostile MCP servers (results, tool names, schemas, URLs), approval rules and allowed_models entries."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import mcp_types
import pytest

from pi_kernel.ai import ImageContent
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.model_resolution import is_allowed, model_from_spec
from pi_kernel.tools import ToolDefinition
from pi_kernel.tools.mcp import McpManager, server_config, to_result
from pi_kernel.tools.mcp.server import McpServer
from pi_kernel.tools.registry import ToolRegistry

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
