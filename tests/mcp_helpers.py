"""Helpers of the MCP tests: the demo server's command, a streamable HTTP demo server, process checks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEMO = str(Path(__file__).with_name("mcp_demo_server.py"))
"""``tests/mcp_demo_server.py``: a FastMCP server (see its docstring for its tools)."""


def demo(*args: str, **extra: object) -> dict[str, object]:
    """An ``mcpServers`` entry that runs the demo server over stdio (``args``: its mode, e.g. ``"hang"``)."""
    return {"command": sys.executable, "args": [DEMO, *args], **extra}


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, OSError):
        return False


def wait_gone(*pids: int, timeout: float = 15) -> list[int]:
    """The pids still alive after waiting up to ``timeout`` seconds for all of them to end."""
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_demo_server() -> Iterator[str]:
    """The demo server on streamable HTTP; yields its URL."""
    port = free_port()
    process = subprocess.Popen([sys.executable, DEMO, "http", str(port)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
