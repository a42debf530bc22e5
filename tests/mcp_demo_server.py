"""A FastMCP server for the MCP tests: ``python tests/mcp_demo_server.py [stdio | http PORT | hang]``.

Tools: ``echo`` (text), ``add`` (structured output), ``peek`` (annotated
``readOnlyHint``), ``fail`` (``isError``), ``pixel`` (an image), ``crash``
(the process exits mid-call), ``sleep`` (a call that hangs), ``spawn``
(starts a child process that would outlive the server, returns its pid),
``getenv`` (what the server's environment holds).
``hang`` starts a process that never answers (a server stuck at start).
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import time

try:
    from mcp.server.mcpserver import Image, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef]
    from mcp.server.fastmcp import Image  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
from mcp.types import ToolAnnotations

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("demo")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two whole numbers."""
    return {"sum": a + b}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def peek(key: str) -> str:
    """Look something up (changes nothing)."""
    return f"peeked {key}"


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


@server.tool()
def pixel() -> Image:
    """A one-pixel PNG."""
    return Image(data=PNG_1X1, format="png")


@server.tool()
def crash() -> str:
    """The server process exits during the call."""
    print("demo server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def spawn() -> str:
    """Start a long-lived child process; returns its pid."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    return str(child.pid)


@server.tool()
def getenv(name: str) -> str:
    """The value of an environment variable of the server process ("(unset)" when it has none)."""
    return os.environ.get(name, "(unset)")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "hang":
        time.sleep(600)
    elif mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
