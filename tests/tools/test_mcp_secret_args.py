"""Seam: MCP tools vs the secret-read policy.

approval docstring: a call that may read secrets "always asks a person, whatever the mode,
override or 'always allow' said". ApprovalPolicy.secret_reason only looks at *top-level string*
arguments of non-built-in tools, so an MCP call whose path sits in a list or a nested object
(the reference filesystem server's read_multiple_files(paths=[...]) is the common case) runs
unseen under a `fs__*=auto` override, "always allow", or a trusted readOnlyHint.
"""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from pi_kernel.tools.approval import ApprovalPolicy
from pi_kernel.tools.mcp.adapt import tool_definition
from pi_kernel.tools.mcp.server_config import McpServerConfig


async def _never(*_: Any) -> Any:  # the server is never reached: only the approval decision is asked
    raise AssertionError("not called")


def _fs_tool(name: str, schema: dict[str, Any], trust: bool = False) -> Any:
    tool = mcp_types.Tool(
        name=name,
        inputSchema=schema,
        annotations=mcp_types.ToolAnnotations(readOnlyHint=True),
    )
    return tool_definition(McpServerConfig(name="fs", command="x", trust_read_only_hint=trust), tool, _never)


LIST_SCHEMA = {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}}
NESTED_SCHEMA = {
    "type": "object",
    "properties": {"target": {"type": "object", "properties": {"path": {"type": "string"}}}},
}


def test_top_level_path_asks_control() -> None:  # passes: the policy's intent
    definition = _fs_tool("read_text_file", {"type": "object", "properties": {"path": {"type": "string"}}})
    policy = ApprovalPolicy(mode="ask")
    policy.set_override("fs__*", "auto")
    assert policy.decide(definition, {"path": ".env"}) == "ask"


@pytest.mark.parametrize(
    ("name", "schema", "args"),
    [
        ("read_multiple_files", LIST_SCHEMA, {"paths": ["notes.txt", ".env"]}),
        ("read_multiple_files", LIST_SCHEMA, {"paths": ["~/.aws/credentials"]}),
        ("read_nested", NESTED_SCHEMA, {"target": {"path": "/proc/self/environ"}}),
    ],
)
def test_secret_path_inside_list_or_object_still_asks_under_override(
    name: str, schema: dict[str, Any], args: dict[str, Any]
) -> None:
    policy = ApprovalPolicy(mode="ask")
    policy.set_override("fs__*", "auto")
    assert policy.decide(_fs_tool(name, schema), args) == "ask"


def test_secret_path_in_list_asks_for_trusted_read_only_tool() -> None:
    policy = ApprovalPolicy(mode="read-only")
    definition = _fs_tool("read_multiple_files", LIST_SCHEMA, trust=True)
    assert policy.decide(definition, {"paths": [".env"]}) == "ask"


def test_secret_path_in_list_asks_after_always_allow() -> None:
    policy = ApprovalPolicy(mode="ask")
    policy.always_allowed.add("fs__read_multiple_files")
    assert policy.decide(_fs_tool("read_multiple_files", LIST_SCHEMA), {"paths": [".env"]}) == "ask"


def test_shell_like_mcp_tool_printing_the_environment_asks_under_override() -> None:
    """An MCP shell server (run_command) is judged only by 'does a string name a secret file', so a
    command text that dumps the environment or cats a secret file runs unseen under `sh__*=auto`."""
    schema = {"type": "object", "properties": {"command": {"type": "string"}}}
    tool = mcp_types.Tool(name="run_command", inputSchema=schema)
    definition = tool_definition(McpServerConfig(name="sh", command="x"), tool, _never)
    policy = ApprovalPolicy(mode="ask")
    policy.set_override("sh__*", "auto")
    assert policy.decide(definition, {"command": "cat .env; printenv"}) == "ask"
