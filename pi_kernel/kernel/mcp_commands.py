"""``%pi mcp``: list, add, remove and restart the session's MCP servers.

- ``%pi mcp`` — every server, its state (``not started``, ``running``,
  ``failed``, ``crashed``, ...), how it is reached, and its tools;
- ``%pi mcp add NAME [--trust-read-only] -- COMMAND ARGS...`` — a stdio server;
- ``%pi mcp add NAME [--trust-read-only] URL`` — a streamable HTTP server;
- ``%pi mcp remove NAME`` — stop it and drop its tools;
- ``%pi mcp restart NAME`` — start it again (after a failed start, say).

A server added here starts at once, so the answer shows its tools or why it
did not start; servers from the configuration start before the first ``%%pi``
turn. ``--trust-read-only`` is the configuration's ``"trustReadOnlyHint":
true`` (see ``docs/mcp.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pi_kernel.kernel.session import McpUnavailable

if TYPE_CHECKING:
    from pi_kernel.kernel.session import PiSession


class CommandError(Exception):
    """A ``%pi mcp`` command that cannot be done; printed as a usage error (as ``line_commands``' own)."""

    def _render_traceback_(self) -> list[str]:
        return [f"UsageError: {self}"]  # masked on its way out (``outgoing``)


USAGE = (
    "%pi mcp | %pi mcp add NAME [--trust-read-only] -- COMMAND ARGS... | %pi mcp add NAME [--trust-read-only] URL"
    " | %pi mcp remove NAME | %pi mcp restart NAME"
)


def mcp(session: PiSession, words: list[str]) -> str:
    try:
        return _mcp(session, words)
    except McpUnavailable as error:
        raise CommandError(str(error)) from None


def _mcp(session: PiSession, words: list[str]) -> str:
    if not words:
        return session.mcp.describe()
    action, rest = words[0], words[1:]
    if action == "add":
        return _add(session, rest)
    if action in ("remove", "restart") and len(rest) == 1:
        name = rest[0]
        if name not in session.mcp.servers:
            known = ", ".join(session.mcp.names()) or "none"
            raise CommandError(f"no MCP server named {name!r} (known: {known})")
        if action == "remove":
            session.mcp.remove(name)
            return f"MCP server {name} removed."
        session.mcp.restart(name)
        return _report(session, name)
    raise CommandError(USAGE)


def _add(session: PiSession, words: list[str]) -> str:
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
    return _report(session, name)


def _report(session: PiSession, name: str) -> str:
    """The state of one server after a start, and its tools (or why it did not start)."""
    session.mcp.drop_notices(name)  # shown right here, not again at the next turn
    lines = session.mcp.describe().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return "\n".join(lines[start:end])
