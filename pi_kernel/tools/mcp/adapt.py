"""An MCP tool as a tool of the session: its name, its definition, its results.

- Name: ``<server>__<tool>``, safe for providers (``tool_name``); a name already taken (``get.item`` and
  ``get_item`` are both ``get_item``) ends with a hash of the server's and the tool's names instead
  (``unique_tool_name``), with a notice.
- Approval: every MCP tool asks and is not read-only, unless annotated ``readOnlyHint`` by a server the
  user trusts (``"trustReadOnlyHint": true``): the annotation is the server's own claim.
- Results (``to_result``): text stays text; images only when Pillow decodes them as PNG, JPEG, GIF or
  WebP (providers refuse a conversation holding anything else), bounded as the other tools bound theirs;
  other blocks a one-line note; ``isError`` makes the call an error result.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import TextContent
from pi_kernel.ai.messages import TooDeepError, clean_data
from pi_kernel.tools.definition import ToolDefinition
from pi_kernel.tools.mcp.server_config import McpServerConfig
from pi_kernel.tools.results import MODEL_IMAGE_TYPES, fit_image, image_blocks, verified_image_type

MAX_TOOL_NAME = 64
SEPARATOR = "__"
SNIPPET_CHARS = 160
_REFUSED = re.compile(r"[^A-Za-z0-9_-]")

CallTool = Callable[[str, str, dict[str, Any], Any], Awaitable[mcp_types.CallToolResult]]
"""``call(server, tool, arguments, signal) -> CallToolResult`` (the manager's)."""


class McpToolError(RuntimeError):
    """A call that ended in error: the server said ``isError``, or the server failed."""


def tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>``, safe for providers, at most 64 characters."""
    name = _REFUSED.sub("_", f"{server}{SEPARATOR}{tool}")
    return name if len(name) <= MAX_TOOL_NAME else _hashed(name, name)


def unique_tool_name(server: str, tool: str) -> str:
    """A name for a tool whose ``tool_name`` is taken: cut as needed, ending with a hash of the
    server's and the tool's own names (distinct for distinct tools, stable across restarts)."""
    return _hashed(_REFUSED.sub("_", f"{server}{SEPARATOR}{tool}"), f"{server}\0{tool}")


def _hashed(name: str, hashed: str) -> str:
    return f"{name[: MAX_TOOL_NAME - 9]}_{hashlib.sha1(hashed.encode()).hexdigest()[:8]}"


def parameters_of(tool: mcp_types.Tool) -> dict[str, Any]:
    """The tool's input schema as a raw JSON schema of an object (text made valid Unicode: a server's
    lone surrogate would otherwise have the tool refused)."""
    schema = dict(tool.input_schema or {})
    try:
        schema = clean_data(schema)
    except TooDeepError:
        pass  # refused with a clear error by the definition's schema check
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return schema


def trusted_read_only(tool: mcp_types.Tool, config: McpServerConfig) -> bool:
    hint = tool.annotations.read_only_hint if tool.annotations is not None else None
    return bool(hint) and config.trust_read_only_hint


def tool_definition(config: McpServerConfig, tool: mcp_types.Tool, call: CallTool) -> ToolDefinition:
    """The session's tool for ``tool`` of the server ``config``; ``call`` reaches the server."""
    description = (tool.description or "").strip() or f"The tool {tool.name} of the MCP server {config.name}."
    read_only = trusted_read_only(tool, config)
    first_line = description.splitlines()[0]
    snippet = first_line if len(first_line) <= SNIPPET_CHARS else first_line[: SNIPPET_CHARS - 3] + "..."

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any) -> AgentToolResult:
        arguments = dict(params) if isinstance(params, dict) else {}
        result = await call(config.name, tool.name, arguments, signal)
        return to_result(config.name, tool.name, result)

    return ToolDefinition(
        name=tool_name(config.name, tool.name),
        label=f"{config.name}: {tool.title or (tool.annotations.title if tool.annotations else None) or tool.name}",
        description=description,
        parameters=parameters_of(tool),
        execute=execute,
        prompt_snippet=f"(MCP {config.name}) {snippet}",
        approval="auto" if read_only else "ask",
        read_only=read_only,
        origin="mcp",
        mcp_server=config.name,
    )


def _image(data: str, mime_type: str) -> list[Any]:
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        return [TextContent(f"[image ({mime_type}) with invalid base64 data omitted]")]
    verified = verified_image_type(raw)
    if mime_type not in MODEL_IMAGE_TYPES or verified is None:
        return [TextContent(f"[image ({mime_type}, {len(raw)} bytes) omitted: not a PNG, JPEG, GIF or WebP image]")]
    omitted = f"[image ({mime_type}, {len(raw)} bytes) omitted: it cannot be brought under the limits]"
    return image_blocks(fit_image(raw, verified), omitted)


def _block(block: Any) -> list[Any]:
    if isinstance(block, mcp_types.TextContent):
        return [TextContent(block.text)]
    if isinstance(block, mcp_types.ImageContent):
        return _image(block.data, block.mime_type)
    if isinstance(block, mcp_types.AudioContent):
        return [TextContent(f"[audio ({block.mime_type}) omitted: audio is not passed to the model]")]
    if isinstance(block, mcp_types.ResourceLink):
        about = f": {block.description}" if block.description else ""
        return [TextContent(f"[resource {block.name} at {block.uri}{about}]")]
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return [TextContent(f"[resource {resource.uri}]\n{text}")]
        mime = resource.mime_type or ""
        blob = getattr(resource, "blob", None)
        if mime.startswith("image/") and isinstance(blob, str):
            return _image(blob, mime)
        return [TextContent(f"[resource {resource.uri} ({mime or 'binary'}) omitted]")]
    return [TextContent(f"[{getattr(block, 'type', 'unknown')} content omitted]")]


def to_result(server: str, tool: str, result: mcp_types.CallToolResult) -> AgentToolResult:
    """The ``AgentToolResult`` of an MCP call; raises ``McpToolError`` (an error result) on ``isError``."""
    content: list[Any] = [part for block in result.content for part in _block(block)]
    structured = result.structured_content
    if structured is not None and not any(isinstance(part, TextContent) for part in content):
        content.append(TextContent(json.dumps(structured, ensure_ascii=False, indent=2)))
    if result.is_error:
        texts = [part.text for part in content if isinstance(part, TextContent)]
        raise McpToolError("\n".join(texts) or f'The MCP tool "{tool}" of "{server}" failed without a message.')
    if not content:
        content = [TextContent("(no output)")]
    details: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool}
    if structured is not None:
        details["structured_content"] = structured
    return AgentToolResult(content=content, details=details)
