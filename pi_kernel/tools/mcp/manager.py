"""``McpManager``: the session's MCP servers, on the loop the turns run on.

A server's SDK session lives in a task of its own (``McpServer._serve``) on the event loop that started it:
in a kernel, the kernel's own loop, where every ``%%pi`` turn runs too (``pi_kernel.kernel.cell_runner``);
in IPython outside a kernel, IPython's asyncio loop. So a tool call is a plain ``await`` (an abort cancels
it, which tells the server ``notifications/cancelled``): no thread, no loop of the manager's own, no hop
between loops. A call from another loop (a kernel subshell's turn) is refused with a clear error.

Servers start lazily: ``add`` only records a server; ``ensure_started`` (before each ``%%pi`` turn) starts
those not started yet, concurrently, and registers their tools in the session's ``ToolRegistry`` as
``<server>__<tool>`` (``adapt.py``). A server that fails leaves a notice (``take_notices``) and the others
keep working; so does a tool whose definition cannot be made (an invalid input schema, say): it is left out
with a one-line notice naming it, and ``%pi mcp`` lists it as left out, with why. ``close`` (kernel
shutdown, from any thread) stops the servers and ends their process groups and every descendant
(``stdio.py``); ``atexit`` ends what is left if the kernel exits without closing.
"""

from __future__ import annotations

import asyncio
import atexit
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import mcp_types

from pi_kernel.tools.definition import ToolDefinition
from pi_kernel.tools.mcp.adapt import tool_definition, tool_name, trusted_read_only, unique_tool_name
from pi_kernel.tools.mcp.server import McpServer, McpServerError
from pi_kernel.tools.mcp.server_config import McpServerConfig
from pi_kernel.tools.mcp.stdio import kill_all_groups
from pi_kernel.tools.registry import ToolRegistry

CLOSE_SECONDS = 10.0
_atexit_registered = False


class McpManager:
    def __init__(self, configs: Mapping[str, McpServerConfig] | None = None, registry: ToolRegistry | None = None):
        global _atexit_registered
        self.registry = registry
        self.servers: dict[str, McpServer] = {name: McpServer(config) for name, config in (configs or {}).items()}
        self._tool_names: dict[str, dict[str, str]] = {}
        """Server name → its tool's own name → the name it has in the registry (the tools it put there)."""
        self._left_out: dict[str, dict[str, str]] = {}
        """Server name → its tool's own name → why it is not in the registry (an invalid schema, say)."""
        self._notices: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the servers live on: the first that started one."""
        self._stopping: set[asyncio.Task[None]] = set()
        if not _atexit_registered:
            atexit.register(kill_all_groups)
            _atexit_registered = True

    def _here(self) -> asyncio.AbstractEventLoop:
        """The running loop, which must be the servers' loop (the first to start one becomes it)."""
        loop = asyncio.get_running_loop()
        if self._loop is None or self._loop.is_closed():
            self._loop = loop
        elif self._loop is not loop:
            raise McpServerError(
                "The MCP servers of this session run on another event loop (the kernel's): use them from a "
                "%%pi turn or a cell on that loop."
            )
        return loop

    def _stop_soon(self, server: McpServer) -> None:
        """Stop ``server`` without waiting (a synchronous caller): a task on its loop when that runs here;
        otherwise the process group ends at ``close``."""
        if server.state in ("not started", "failed") or self._loop is None:
            return
        running = _running_loop()
        if running is self._loop:
            task = running.create_task(server.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        elif running is None and not self._loop.is_closed() and not self._loop.is_running():
            self._loop.run_until_complete(server.stop())

    def names(self) -> list[str]:
        return list(self.servers)

    def pending(self) -> list[str]:
        """Servers that a turn would start (configured, not started yet)."""
        return [name for name, server in self.servers.items() if server.state == "not started"]

    def add(self, config: McpServerConfig, start: bool = False) -> McpServer:
        """Add (or replace) a server, not started yet: ``ensure_started`` (before each turn) or
        ``start_server`` starts it. ``start=True`` is refused: starting waits on the servers' loop."""
        if start:
            raise ValueError("McpManager.add only records a server: await start_server(name) to start it now")
        old = self.servers.pop(config.name, None)
        if old is not None:
            self._unregister(config.name)
            self._stop_soon(old)
        server = self.servers[config.name] = McpServer(config)
        return server

    async def start_server(self, name: str) -> McpServer:
        """Start one server now (``%pi mcp add``) and register its tools; ``KeyError`` for an unknown name."""
        server = self.servers[name]
        self._here()
        await self._start([server])
        return server

    async def remove(self, name: str) -> None:
        """Stop the server and forget it and its tools; ``KeyError`` for an unknown name."""
        server = self.servers.pop(name)
        self._unregister(name)
        if server.state not in ("not started", "failed"):
            self._here()
            await asyncio.wait_for(server.stop(), CLOSE_SECONDS)

    async def restart(self, name: str) -> McpServer:
        server = self.servers[name]
        self._here()
        await server.restart()
        self._after_start(server)
        return server

    async def ensure_started(self) -> None:
        """Start the servers not started yet, on the running loop (the turn's)."""
        waiting = [self.servers[name] for name in self.pending()]
        if waiting:  # shielded: a caller that stops waiting (an interrupt) leaves the start to finish
            try:
                self._here()
            except McpServerError as error:  # a turn on another loop (a kernel subshell) goes without them
                self._notice(str(error))
                return
            start = asyncio.ensure_future(self._start(waiting))
            self._stopping.add(start)  # held until done, like a stop
            start.add_done_callback(self._stopping.discard)
            await asyncio.shield(start)

    async def _start(self, servers: list[McpServer]) -> None:
        await asyncio.gather(*(server.start() for server in servers), return_exceptions=True)
        for server in servers:
            self._after_start(server)

    def _after_start(self, server: McpServer) -> None:
        if server.state == "running":
            try:
                self._register(server)
            except Exception as error:  # noqa: BLE001 - one server's tools never break the others
                self._notice(f'MCP server "{server.name}": its tools are left out: {_one_line(error)}')
        else:
            self._notice(f'MCP server "{server.name}" did not start: {server.error}')

    def _register(self, server: McpServer) -> None:
        if self.registry is None:
            return
        own = set(self._tool_names.get(server.name, {}).values())
        taken = set(self.registry.names()) - own
        definitions: list[tuple[str, ToolDefinition]] = []
        left_out: dict[str, str] = {}

        def leave_out(tool: str, why: str) -> None:
            left_out[tool] = why
            self._notice(f'MCP server "{server.name}": its tool "{tool}" is left out: {why}')

        for tool in server.tools:
            try:
                definition = tool_definition(server.config, tool, self.call)
            except Exception as error:  # noqa: BLE001 - an invalid schema, a name providers refuse: this tool only
                leave_out(tool.name, _one_line(error))
                continue
            if definition.name in taken:
                unique = unique_tool_name(server.name, tool.name)
                if unique in taken:
                    leave_out(tool.name, f"the names {definition.name} and {unique} are taken")
                    continue
                self._notice(
                    f'MCP server "{server.name}": its tool "{tool.name}" is named {unique}, '
                    f"since {definition.name} is taken by another tool"
                )
                definition = replace(definition, name=unique)
            taken.add(definition.name)
            definitions.append((tool.name, definition))
        for stale in own - {definition.name for _, definition in definitions}:
            if stale in self.registry:
                self.registry.remove(stale)
        chosen: dict[str, str] = {}
        for own_name, definition in definitions:
            try:  # the registry (or a listener of it) may refuse one tool: that tool only is left out
                self.registry.add(definition)
            except Exception as error:  # noqa: BLE001
                leave_out(own_name, _one_line(error))
                continue
            chosen[own_name] = definition.name
        self._tool_names[server.name] = chosen
        self._left_out[server.name] = left_out

    def _unregister(self, server_name: str) -> None:
        self._left_out.pop(server_name, None)
        for name in self._tool_names.pop(server_name, {}).values():
            if self.registry is not None and name in self.registry:
                self.registry.remove(name)

    async def call(
        self, server_name: str, tool: str, arguments: dict[str, Any], signal: Any
    ) -> mcp_types.CallToolResult:
        """Call ``tool`` of ``server_name``; an abort of ``signal`` cancels the call on the server."""
        server = self.servers.get(server_name)
        if server is None:
            raise McpServerError(f'MCP server "{server_name}" was removed from this session.')
        loop = self._here()
        task = loop.create_task(self._call(server, tool, arguments))
        aborted = asyncio.ensure_future(signal.wait()) if signal else None
        if aborted is not None:
            aborted.add_done_callback(lambda _aborted: task.cancel())  # an abort (from any thread) cancels the call
        try:
            return await task
        except asyncio.CancelledError:
            if signal is not None and signal.aborted:
                raise McpServerError(f'The call of {tool} on MCP server "{server_name}" was cancelled.') from None
            raise
        finally:
            if aborted is not None:
                aborted.cancel()

    async def _call(self, server: McpServer, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        before = server.state
        try:
            return await server.call(tool, arguments)
        except McpServerError as error:
            if server.state in ("crashed", "failed") and before == "running":
                self._notice(str(error))
            raise
        finally:
            if before != "running" and server.state == "running":
                self._register(server)  # restarted by this call: its tools may have changed

    def _notice(self, text: str) -> None:
        self._notices.append(text)  # on the servers' loop; read between turns on the same thread

    def take_notices(self) -> list[str]:
        """Failures not shown yet (each once)."""
        notices, self._notices = self._notices, []
        return notices

    def drop_notices(self, server_name: str) -> None:
        """Forget the notices about one server (its state was just shown)."""
        self._notices = [notice for notice in self._notices if f'"{server_name}"' not in notice]

    def describe(self) -> str:
        """``%pi mcp``: each server, its state, how it is reached, and its tools."""
        if not self.servers:
            return "No MCP servers. Add one with %pi mcp add NAME -- COMMAND ARGS... or %pi mcp add NAME URL"
        lines: list[str] = []
        for name, server in self.servers.items():
            config = server.config
            trust = ", trusts readOnlyHint" if config.trust_read_only_hint else ""
            lines.append(f"{name}: {server.state} ({config.transport}: {config.describe()}{trust})")
            if server.error and server.state in ("failed", "crashed"):
                lines += [f"    {line}" for line in server.error.splitlines()[:12]]
            registered = self._tool_names.get(name, {})
            left_out = self._left_out.get(name, {})
            for tool in server.tools if server.state == "running" else []:
                if tool.name in left_out:
                    lines.append(f"    {tool.name}: left out: {left_out[tool.name]}"[:300])
                    continue
                kind = "read-only" if trusted_read_only(tool, config) else "asks"
                about = ((tool.description or "").strip().splitlines() or [""])[0][:100]
                shown = registered.get(tool.name, tool_name(name, tool.name))
                lines.append(f"    {shown} [{kind}] {about}".rstrip())
        return "\n".join(lines)

    def close(self) -> None:
        """Stop every server; never raises, safe to call twice. On their loop when it can still run them
        (from ipykernel's control thread while it runs; to the end when idle); their process groups end in
        every case (``kill_all_groups``)."""
        loop, self._loop = self._loop, None
        servers = list(self.servers.values())
        if loop is not None and not loop.is_closed() and any(s.state != "not started" for s in servers):
            running = _running_loop()
            try:
                if loop.is_running() and running is not loop:
                    asyncio.run_coroutine_threadsafe(_stop_all(servers), loop).result(CLOSE_SECONDS)
                elif running is None:
                    loop.run_until_complete(asyncio.wait_for(_stop_all(servers), CLOSE_SECONDS))
            except Exception:  # noqa: BLE001 - shutting down: the groups are killed below anyway
                pass
        kill_all_groups()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _one_line(error: BaseException) -> str:
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return text if len(text) <= 200 else text[:197] + "..."


async def _stop_all(servers: list[McpServer]) -> None:
    await asyncio.gather(*(server.stop() for server in servers), return_exceptions=True)
