"""The stdio transport of an MCP server: a child process in its own process group.

The SDK's ``stdio_client`` ends a server by closing its stdin and kills the process tree only when the
server outlives a grace period, so a server that exits on time leaves the processes it started behind
(``tests/tools/test_mcp_hostile.py::test_the_sdks_own_stdio_client_leaves_a_setsid_grandchild_running``
shows it, and fails once an SDK ends them: then use the SDK's transport);
it also writes the server's stderr to ``sys.stderr``, which in a kernel has no file descriptor. This
transport is the same exchange (newline-delimited JSON-RPC, the SDK's ``SessionMessage``, the SDK's
default environment: no API key of the kernel's environment reaches a server unless its ``env`` names
it), except that:

- the last ``STDERR_KEPT_CHARS`` of the server's stderr are kept in memory, whose tail explains a failed
  start or a crash (``StdioProcess.stderr_tail``);
- on close the whole process group is ended (SIGTERM, then SIGKILL) after the server had its chance to
  exit, and then every descendant, also one that left the group with ``setsid()``: each server's
  environment carries a tag (``TAG_VARIABLE``) that what it starts inherits, found in ``/proc``;
- a reply the SDK cannot parse (nested too deep, say) or longer than ``MAX_LINE_CHARS`` answers its
  request at once with a JSON-RPC error instead of leaving it to wait for its timeout; lines are gathered
  in pieces (linear time), an oversized one is not kept;
- every live group and tag is recorded (``LIVE_GROUPS``, ``LIVE_TAGS``) so that the kernel's exit
  (``kill_all_groups``, at shutdown and by ``atexit``) ends them without an event loop, and told to the
  reaper (``reaper.py``, started with the first server), which ends them when the kernel dies without a
  word (SIGKILL).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import mcp_types
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from pi_kernel.tools.mcp.server_config import McpServerConfig

EXIT_GRACE_SECONDS = 2.0
"""How long a server may take to exit after its stdin closes, before its group is signalled."""
TERM_GRACE_SECONDS = 1.0
"""Between SIGTERM and SIGKILL of the group."""
STDERR_TAIL_CHARS = 2000
STDERR_KEPT_CHARS = 64 * 1024
"""What is kept of a server's stderr (the end): the log never grows without bound."""
TAG_VARIABLE = "PI_MCP_SERVER_TAG"
"""Set in each stdio server's environment (a random value per server): its descendants inherit it."""
MAX_LINE_CHARS = 16 * 1024 * 1024
"""The longest message a server may send (one line); a longer reply answers its request with an error."""
HEAD_CHARS = 4096
"""What is kept of an oversized line: enough to find the id of the request it answers."""
_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')

LIVE_GROUPS: set[int] = set()
"""Process groups of servers started and not ended yet (the leader's pid)."""
LIVE_TAGS: set[str] = set()
"""The tags of the servers started and not ended yet."""


_reaper: subprocess.Popen[bytes] | None = None


def _tell_reaper(*lines: str) -> None:
    """``+PGID`` / ``-PGID``, ``tag``/``untag TAG`` to the reaper (started on first use); a reaper that is gone
    is restarted once. Called as a server starts and ends, on the servers' one loop (``McpManager``)."""
    global _reaper
    for _ in range(2):
        if _reaper is None or _reaper.poll() is not None:
            script = str(Path(__file__).with_name("reaper.py"))
            _reaper = subprocess.Popen([sys.executable, "-I", script], stdin=subprocess.PIPE, start_new_session=True)
        try:
            assert _reaper.stdin is not None
            _reaper.stdin.write("".join(f"{line}\n" for line in lines).encode())
            _reaper.stdin.flush()
            return
        except OSError:
            _reaper = None


def kill_all_groups() -> None:
    """SIGKILL every live server group and tagged process: the kernel is exiting (no loop needed, safe to
    call twice)."""
    for pgid in list(LIVE_GROUPS):
        _signal_all([pgid], signal.SIGKILL, os.killpg)
        LIVE_GROUPS.discard(pgid)
    for tag in list(LIVE_TAGS):
        _signal_all(descendants(None, tag), signal.SIGKILL)
        LIVE_TAGS.discard(tag)


def _parents() -> dict[int, int]:
    """Every process's parent (pid → ppid), read from ``/proc``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            with suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_bytes()
                parents[int(entry)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return parents


def descendants(root: int | None, tag: str) -> list[int]:
    """The processes started from ``root`` (its children, theirs, ...) and those whose environment holds
    ``TAG_VARIABLE=tag`` (what left the group, or lost its parent, with ``setsid()``), and theirs."""
    parents = _parents()
    marker = f"{TAG_VARIABLE}={tag}".encode()
    found = {root} if root is not None else set()
    for pid in parents:
        if pid != os.getpid():
            with suppress(OSError):
                if marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    found.add(pid)
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    waiting = list(found)
    while waiting:
        for child in children.get(waiting.pop(), []):
            if child not in found and child != os.getpid():
                found.add(child)
                waiting.append(child)
    found.discard(root if root is not None else -1)
    return sorted(found)


def _signal_all(pids: list[int], number: int, send: Callable[[int, int], None] = os.kill) -> None:
    """Signal each process (``send=os.killpg``: each process group) that is still there."""
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            send(pid, number)


class StdioProcess:
    def __init__(self, process: Process, tag: str) -> None:
        self.process = process
        self.tag = tag
        self.exited = anyio.Event()
        self.stderr_closed = anyio.Event()
        self._stderr: list[str] = []
        self._stderr_chars = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    def note_stderr(self, text: str) -> None:
        """Keep ``text`` and at most the last ``STDERR_KEPT_CHARS`` before it."""
        self._stderr.append(text)
        self._stderr_chars += len(text)
        if self._stderr_chars > 2 * STDERR_KEPT_CHARS:
            kept = "".join(self._stderr)[-STDERR_KEPT_CHARS:]
            self._stderr, self._stderr_chars = [kept], len(kept)

    def stderr_tail(self, limit: int = STDERR_TAIL_CHARS) -> str:
        """The last lines the server wrote to stderr (empty when none)."""
        return "".join(self._stderr)[-limit:].strip()

    @property
    def stderr_kept(self) -> int:
        """How many characters of stderr are held (at most ``2 * STDERR_KEPT_CHARS``)."""
        return self._stderr_chars


@asynccontextmanager
async def stdio_transport(
    config: McpServerConfig, on_exit: Callable[[StdioProcess], Any] | None = None
) -> AsyncIterator[tuple[Any, Any, StdioProcess]]:
    """``(read_stream, write_stream, process)`` for a ``ClientSession``; ends the server's group on exit.
    ``on_exit(process)`` runs when the server's stdout closes (it exited or crashed) while in use."""
    assert config.command is not None
    tag = secrets.token_hex(8)
    process = await anyio.open_process(
        [config.command, *config.args],
        # The SDK's default environment (HOME, PATH, USER...: no keys of the kernel's reach a third-party
        # server), the entry's own env, and the tag its descendants inherit.
        env={**get_default_environment(), **config.env, TAG_VARIABLE: tag},
        stderr=subprocess.PIPE,
        cwd=config.cwd,
        start_new_session=True,
    )
    LIVE_GROUPS.add(process.pid)
    LIVE_TAGS.add(tag)
    _tell_reaper(f"+{process.pid}", f"tag {tag}")
    server = StdioProcess(process, tag)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    closing = False

    async def stdout_reader() -> None:
        assert process.stdout is not None
        pieces: list[str] = []
        size = 0
        head: str | None = None  # the start of a line over MAX_LINE_CHARS (its pieces are dropped)
        try:
            async with read_writer:
                async for chunk in TextReceiveStream(process.stdout, encoding="utf-8", errors="replace"):
                    *ended, rest = chunk.split("\n")
                    for piece in ended:
                        if head is not None:
                            message: SessionMessage | Exception | None = _refuse(head, "longer than 16 MB")
                        else:
                            line = "".join([*pieces, piece])
                            message = _parse(line) if line.strip() else None
                        pieces, size, head = [], 0, None
                        if message is not None:
                            await read_writer.send(message)
                    if head is None and rest:
                        pieces.append(rest)
                        size += len(rest)
                        if size > MAX_LINE_CHARS:
                            head, pieces, size = "".join(pieces)[:HEAD_CHARS], [], 0
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            if not closing:
                with anyio.move_on_after(1.0):  # the exit code, for the notice
                    await process.wait()
                with anyio.move_on_after(0.5):  # its last words (a descendant may hold stderr open)
                    await server.stderr_closed.wait()
            server.exited.set()
            if not closing and on_exit is not None:
                on_exit(server)

    async def stderr_reader() -> None:
        assert process.stderr is not None
        try:
            async for chunk in TextReceiveStream(process.stderr, encoding="utf-8", errors="replace"):
                server.note_stderr(chunk)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            server.stderr_closed.set()

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the connection end instead of waiting forever

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(stdout_reader)
            group.start_soon(stderr_reader)
            group.start_soon(stdin_writer)
            try:
                yield read_stream, write_stream, server
            finally:
                closing = True
                with anyio.CancelScope(shield=True):
                    await _stop(process, write_stream, tag)
                    with anyio.move_on_after(0.5):  # its last words, for the notice of a failed start
                        await server.stderr_closed.wait()
                group.cancel_scope.cancel()
    finally:
        if process.returncode is None or descendants(None, tag):  # a start that failed or was cancelled
            with anyio.CancelScope(shield=True):
                await _end_descendants(process, tag)
        LIVE_GROUPS.discard(process.pid)
        LIVE_TAGS.discard(tag)
        _tell_reaper(f"-{process.pid}", f"untag {tag}")


async def _end_descendants(process: Process, tag: str) -> None:
    """End the server (if it still runs), its group and every descendant (``descendants``)."""
    found = descendants(process.pid, tag)
    if process.returncode is None:
        _signal_all([process.pid], signal.SIGTERM, os.killpg)
    _signal_all(found, signal.SIGTERM)
    with anyio.move_on_after(TERM_GRACE_SECONDS):
        while descendants(None, tag) or process.returncode is None:
            await anyio.sleep(0.05)
    _signal_all([process.pid], signal.SIGKILL, os.killpg)
    _signal_all(descendants(process.pid, tag) + found, signal.SIGKILL)
    with anyio.move_on_after(TERM_GRACE_SECONDS):
        await process.wait()


async def _stop(process: Process, write_stream: Any, tag: str) -> None:
    """Close stdin, give the server ``EXIT_GRACE_SECONDS`` to exit, then end its whole group and every
    descendant."""
    await write_stream.aclose()
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    with anyio.move_on_after(EXIT_GRACE_SECONDS):
        while process.returncode is None:
            await anyio.sleep(0.02)
    found = descendants(process.pid, tag)  # before the group ends: a child's parent link is still there
    await terminate_posix_process_tree(process, TERM_GRACE_SECONDS)  # also what the server started
    with anyio.move_on_after(TERM_GRACE_SECONDS):
        await process.wait()
    if found or descendants(None, tag):
        await _end_descendants(process, tag)


def _parse(line: str) -> SessionMessage | Exception:
    """The server's message; a reply that cannot be read answers its request with an error (else the
    request would wait for its timeout); anything else unreadable goes to the session as the error."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        refused = _refuse(line, f"not a valid reply ({first})")
        return refused if refused is not None else error


def _refuse(line: str, why: str) -> SessionMessage | None:
    """A JSON-RPC error answering the request ``line`` replies to (None when it names no id or is a request)."""
    request_id: Any = None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # too deep or cut: the first "id" is the reply's own (SDK order)
        found = _ID.search(line[:HEAD_CHARS])
        if found is not None and '"method"' not in line[: found.start()]:
            request_id = json.loads(found.group(1))
    else:
        if isinstance(message, dict) and "method" not in message:
            request_id = message.get("id")
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return None
    error = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"The server's reply was {why}.")
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
