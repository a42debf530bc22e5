"""``%pi mcp``: list, add, remove and restart the session's MCP servers.

- ``%pi mcp`` — every server, its state (``not started``, ``running``,
  ``failed``, ``crashed``, ...), how it is reached, and its tools;
- ``%pi mcp add NAME [--trust-read-only] -- COMMAND ARGS...`` — a stdio server;
- ``%pi mcp add NAME [--trust-read-only] URL`` — a streamable HTTP server;
- ``%pi mcp remove NAME`` — stop it and drop its tools;
- ``%pi mcp restart NAME`` — start it again (after a failed start, say).

A server added here starts at once, so the answer shows its tools or why it
did not start; servers from the configuration start before the first ``%%pi``
turn. Starting and stopping wait on the loop the servers live on (the
kernel's, see ``tools.mcp.manager``): ``add``, ``remove`` and ``restart`` are
coroutines (``mcp_async``), awaited where such a line is a cell of its own
(``extension.AWAITED_LINES``). Elsewhere (inside other code, ``%autoawait off``)
the synchronous ``mcp`` runs them to the end when no loop runs (IPython
outside a kernel) and otherwise says to run the line as a cell of its own.
``--trust-read-only`` is the configuration's ``"trustReadOnlyHint":
true`` (see ``docs/mcp.md``).

``pi_kernel.tools.mcp`` is imported lazily, once the session's MCP manager
exists: it needs the optional ``mcp`` SDK, whose absence ``session.mcp``
reports as ``McpUnavailable``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pi_kernel.kernel.command_error import CommandError
from pi_kernel.kernel.session import McpUnavailable

if TYPE_CHECKING:
    from pi_kernel.kernel.session import PiSession


USAGE = (
    "%pi mcp | %pi mcp add NAME [--trust-read-only] -- COMMAND ARGS... | %pi mcp add NAME [--trust-read-only] URL"
    " | %pi mcp remove NAME | %pi mcp restart NAME"
)


WAITS = (
    "%pi mcp {action} waits for the server on the kernel's event loop, which is busy running this cell: "
    "run `%pi mcp {action} ...` as a cell of its own (with %autoawait on)."
)


def mcp(session: PiSession, words: list[str]) -> str:
    """``%pi mcp ...`` from the synchronous magic (see the module docstring)."""
    try:
        if not words:
            return session.mcp.describe()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            from IPython.core.async_helpers import get_asyncio_loop

            return get_asyncio_loop().run_until_complete(_mcp(session, words))
        if words[0] in ("add", "remove", "restart"):
            raise CommandError(WAITS.format(action=words[0]))
        raise CommandError(USAGE)
    except McpUnavailable as error:
        raise CommandError(str(error)) from None


async def mcp_async(session: PiSession, words: list[str]) -> str:
    """``%pi mcp ...`` awaited on the servers' loop."""
    try:
        return await _mcp(session, words)
    except McpUnavailable as error:
        raise CommandError(str(error)) from None


async def _mcp(session: PiSession, words: list[str]) -> str:
    if not words:
        return session.mcp.describe()
    action, rest = words[0], words[1:]
    if action == "add":
        return await _add(session, rest)
    if action in ("remove", "restart") and len(rest) == 1:
        name = rest[0]
        if name not in session.mcp.servers:
            known = ", ".join(session.mcp.names()) or "none"
            raise CommandError(f"no MCP server named {name!r} (known: {known})")
        if action == "remove":
            await session.mcp.remove(name)
            return f"MCP server {name} removed."
        await session.mcp.restart(name)
        return _report(session, name)
    raise CommandError(USAGE)


async def _add(session: PiSession, words: list[str]) -> str:
    manager = session.mcp  # McpUnavailable without the SDK
    from pi_kernel.tools.mcp import server_config

    if not words:
        raise CommandError(USAGE)
    name, rest = words[0], words[1:]
    trust = "--trust-read-only" in rest[: rest.index("--")] if "--" in rest else "--trust-read-only" in rest
    if trust:
        rest.remove("--trust-read-only")
    entry: dict[str, object]
    if rest[:1] == ["--"] and len(rest) > 1:
        entry = {"command": rest[1], "args": rest[2:]}
    elif len(rest) == 1 and rest[0] != "--":
        entry = {"url": rest[0]}
    else:
        raise CommandError(USAGE)
    entry["trustReadOnlyHint"] = trust
    try:
        config = server_config(name, entry)
    except ValueError as error:
        raise CommandError(str(error)) from None
    manager.add(config)
    await manager.start_server(name)
    return _report(session, name)


def _report(session: PiSession, name: str) -> str:
    """The state of one server after a start, and its tools (or why it did not start)."""
    session.mcp.drop_notices(name)  # shown right here, not again at the next turn
    lines = session.mcp.describe().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return "\n".join(lines[start:end])
