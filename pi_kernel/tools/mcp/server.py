"""One MCP server connection on the SDK's ``ClientSession``: start, list tools, call, stop.

A ``McpServer`` lives on the manager's event loop (``manager.py``). The session and its transport are async
context managers with task groups, which must be entered and left by one task: ``_serve`` is that task. It
connects (stdio or streamable HTTP), initializes, lists the tools, then waits until asked to stop or until
the server's process exits; leaving it ends the transport (for stdio: the server's whole process group).

States: ``not started``, ``starting``, ``running``, ``failed`` (the start failed: ``error`` says why, with
the end of the server's stderr), ``crashed`` (the server exited while in use), ``stopped``. A call on a
server that is not running starts it first (so a crashed server is restarted by the next call); a failed
start is not retried by calls (``restart`` does), so a broken server costs one wait, not one per call.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from pi_kernel.tools.mcp.server_config import McpServerConfig
from pi_kernel.tools.mcp.stdio import StdioProcess, stdio_transport

MAX_TOOL_PAGES = 100


class McpServerError(RuntimeError):
    """A server that cannot serve a call (not running, crashed, too slow)."""


class McpServer:
    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.state = "not started"
        self.error: str | None = None
        self.tools: list[mcp_types.Tool] = []
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._starting: asyncio.Future[None] | None = None
        self._process: StdioProcess | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def pid(self) -> int | None:
        """The stdio server's process id while it runs."""
        return self._process.pid if self._process is not None and self.state == "running" else None

    async def start(self) -> None:
        """Connect and list the tools; on failure ``state`` is ``failed`` and ``error`` says why."""
        if self.state == "running":
            return
        if self._starting is not None:  # another caller is starting it: wait for that start (never raises)
            await asyncio.wait([self._starting])
            return
        await self._finish_task()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._starting, self.state, self.error = ready, "starting", None
        self._stop = asyncio.Event()
        self._task = loop.create_task(self._serve(ready), name=f"mcp-{self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.config.start_timeout)
        except asyncio.TimeoutError:
            ready.cancel()
            await self._cancel_task()
            self._fail(f"it did not answer within {self.config.start_timeout:g} s of starting")
        except Exception as error:  # noqa: BLE001 - any start failure is a state the user reads
            await self._cancel_task()
            self._fail(_describe(error))
        finally:
            self._starting = None

    async def stop(self) -> None:
        await self._finish_task()
        if self.state in ("running", "starting"):
            self.state = "stopped"

    async def restart(self) -> None:
        await self.stop()
        self.state = "not started"
        await self.start()

    async def _finish_task(self) -> None:
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 5.0)
        except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - a transport that will not close: cancel it
            self._task = task
            await self._cancel_task()

    async def _cancel_task(self) -> None:
        """Cancel the serving task (a start that failed or hangs); its transport still ends the server."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def _fail(self, reason: str) -> None:
        self.state = "failed"
        log = self._process.stderr_tail() if self._process is not None else ""
        self.error = f"{reason}\n{log}".strip() if log and log not in reason else reason

    def _exited(self, process: StdioProcess) -> None:
        """The stdio server's output closed while in use (it exited or crashed)."""
        code = process.process.returncode
        log = process.stderr_tail()
        if self.state == "running":
            self.state = "crashed"
            said = f"; it said:\n{log}" if log else ""
            self.error = f"the server process exited (code {code if code is not None else 'unknown'}){said}"
        if self._stop is not None:
            self._stop.set()

    async def _serve(self, ready: asyncio.Future[None]) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.config.command:
                    read, write, self._process = await stack.enter_async_context(
                        stdio_transport(self.config, on_exit=self._exited)
                    )
                else:
                    client = create_mcp_http_client(headers=self.config.headers or None)
                    await stack.enter_async_context(client)
                    read, write = await stack.enter_async_context(
                        streamable_http_client(str(self.config.url), http_client=client)
                    )
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.tools = await _list_tools(session)
                self._session, self.state = session, "running"
                if not ready.done():
                    ready.set_result(None)
                assert self._stop is not None
                await self._stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else McpServerError("start cancelled"))
            elif self.state == "running":
                self.state, self.error = "crashed", _describe(error)
            if not isinstance(error, Exception):
                raise
        finally:
            self._session = None

    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """``tools/call``; ``McpServerError`` with a clear text when the server cannot answer."""
        if self.state in ("not started", "crashed", "stopped"):
            await self.start()
        session = self._session
        if self.state != "running" or session is None:
            raise McpServerError(f'MCP server "{self.name}" is not running ({self.state}): {self.error or ""}'.strip())
        timeout = self.config.call_timeout
        try:
            return await asyncio.wait_for(session.call_tool(tool, arguments), timeout)
        except asyncio.TimeoutError:
            raise McpServerError(
                f'MCP server "{self.name}" did not answer the call of {tool} within {timeout:g} s '
                '(its "timeout" setting, in milliseconds).'
            ) from None
        except Exception as error:  # noqa: BLE001 - whatever the transport raised, the model reads a clear text
            await asyncio.sleep(0.05)  # let a crash be noticed (the process exit) before explaining
            if self.state == "crashed":
                raise McpServerError(f'MCP server "{self.name}" stopped during the call: {self.error}') from None
            what = "refused" if isinstance(error, MCPError) else "failed during"
            raise McpServerError(f'MCP server "{self.name}" {what} the call of {tool}: {_describe(error)}') from None


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _describe(error: BaseException) -> str:
    """A start failure in one readable line (task groups wrap the cause in exception groups)."""
    while inner := getattr(error, "exceptions", None):  # an exception group
        error = inner[0]
    if isinstance(error, FileNotFoundError):
        return f"the command was not found ({error.filename or error})"
    if isinstance(error, MCPError) and "closed" in str(error).lower():
        return "the server closed the connection before it was ready"
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
