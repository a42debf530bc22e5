"""MCP servers in the settings: the ``mcpServers`` mapping from ``c.PiKernel.mcp_servers`` or ``PI_MCP_CONFIG``.

Only the outer shape is read here (at kernel start, without importing the
``mcp`` SDK or the tools); each entry is checked when the session first uses
its servers (``pi_kernel.tools.mcp.server_config.parse_servers``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def mcp_servers(value: Any) -> dict[str, Any]:
    """The ``name → entry`` mapping of a ``{"mcpServers": {...}}`` document, of the inner mapping, or of
    either as JSON text (entries are checked later, see ``PiSettings.mcp_servers``)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise ValueError(f"not valid JSON ({error})") from None
    if isinstance(value, Mapping) and "mcpServers" in value:
        value = value["mcpServers"]
    if not isinstance(value, Mapping):
        raise ValueError('not an object such as {"mcpServers": {"NAME": {"command": "...", "args": []}}}')
    return {str(name): entry for name, entry in value.items()}


def mcp_servers_file(path: str) -> dict[str, Any]:
    """``PI_MCP_CONFIG``: the servers of a JSON file in the ``mcpServers`` shape."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read {path!r} ({error.strerror or error})") from None
    except RuntimeError as error:  # ``~user`` naming nobody
        raise ValueError(f"cannot read {path!r} ({error})") from None
    return mcp_servers(text)
