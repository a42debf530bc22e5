"""MCP tool servers on the official ``mcp`` SDK.

``server_config.py`` reads the ``mcpServers`` shape; ``stdio.py`` runs a stdio server in its own process
group; ``server.py`` is one connection (start, list tools, call, stop); ``adapt.py`` turns an MCP tool into a
``ToolDefinition`` named ``<server>__<tool>`` and its results into content; ``manager.py`` owns the servers
of a session, on the loop its turns run on (the kernel's). User guide: ``docs/mcp.md``.
"""

from pi_kernel.tools.mcp.adapt import McpToolError, to_result, tool_definition, tool_name
from pi_kernel.tools.mcp.manager import McpManager
from pi_kernel.tools.mcp.server import McpServer, McpServerError
from pi_kernel.tools.mcp.server_config import McpServerConfig, parse_servers, server_config

__all__ = [
    "McpManager",
    "McpServer",
    "McpServerConfig",
    "McpServerError",
    "McpToolError",
    "parse_servers",
    "server_config",
    "to_result",
    "tool_definition",
    "tool_name",
]
