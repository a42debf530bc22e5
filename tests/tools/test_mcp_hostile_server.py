"""A real stdio server (``hostile_mcp_server.py``) answering with replies the SDK cannot take: nested
too deep, or huge."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from pi_kernel.tools import ToolRegistry
from pi_kernel.tools.mcp import McpManager, McpToolError, server_config
from pi_kernel.tools.mcp.server import McpServerError

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
