"""The ``bash`` tool: run a command, stream its output, stop it on timeout or abort.

Port of pi's ``bash.ts``. The command runs as ``<shell> -c <command>`` (pi's choice of shell: ``/bin/bash``,
else ``bash`` on PATH, else ``sh``) in the context's cwd, with the kernel's environment less every variable
holding a secret (``paths.tool_environment``: ``env``, ``printenv`` and the command's own
``/proc/self/environ`` hold no key), in a new session so that it and everything it starts form one process
group. Output (stdout and stderr through one pipe, so their order is kept) streams to ``on_update`` at most
``update_interval`` apart, each update holding the current tail. The final text is the tail of the output
(last 2000 lines / 50 KB) with pi's trailer naming the temp file that holds all of it.

Endings, as pi reports them (raised, so the loop makes an error result): a non-zero exit adds ``Command
exited with code N``; a timeout kills the process group and adds ``Command timed out after N seconds``; an
abort kills it and adds ``Command aborted``. Killing is SIGTERM to the group, then SIGKILL to whatever is
left once the shell is gone (or after ``KILL_GRACE_SECONDS``). A command killed by a signal from outside is
reported as an error too (pi treats that as success, which hides OOM kills). When the shell exits
normally, background processes it started may keep running (``nohup server &`` works, as in pi); their
output is no longer read.

``details``: ``{"exit_code": int | None, "truncation": dict | None, "full_output_path": str | None}``;
updates carry the same keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal as signals
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.tools.builtin.output import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, OutputSpool
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.paths import resolve_tool_cwd, tool_environment

UPDATE_INTERVAL_SECONDS = 0.1
KILL_GRACE_SECONDS = 1.0
"""How long the shell gets to exit on SIGTERM before the group is SIGKILLed."""
EXIT_STDIO_GRACE_SECONDS = 0.1
"""After the shell exits, how long to wait for the pipe to close (pi: 100 ms)."""


class BashParams(BaseModel):
    command: str = Field(description="Bash command to execute")
    timeout: float | None = Field(default=None, description="Timeout in seconds (optional, no default timeout)")


def format_seconds(seconds: float) -> str:
    """``5`` for 5.0, ``0.5`` for 0.5 (as JavaScript prints numbers)."""
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


class CommandStopped(Exception):
    """The command ended by timeout or abort (the message: ``"timeout"`` or ``"aborted"``)."""


def create_bash_tool(
    *,
    shell: str | None = None,
    command_prefix: str | None = None,
    env: Mapping[str, str] | None = None,
    update_interval: float = UPDATE_INTERVAL_SECONDS,
) -> ToolDefinition:
    """``shell``: the program run as ``shell -c command``; ``command_prefix``: lines run before every command
    (pi's ``commandPrefix``); ``env``: variables added to the process environment (kept, also a secret one:
    the caller's choice); ``update_interval``: seconds between streamed updates."""

    async def execute(
        tool_call_id: str,
        params: BashParams,
        signal: AbortSignal | None,
        on_update: Callable[[AgentToolResult], None] | None,
        ctx: ToolContext,
    ) -> AgentToolResult:
        cwd = resolve_tool_cwd(ctx)
        if not os.path.isdir(cwd):
            raise FileNotFoundError(f"Working directory does not exist: {cwd}\nCannot execute bash commands.")
        if signal is not None and signal.aborted:
            raise RuntimeError("Command aborted")
        command = f"{command_prefix}\n{params.command}" if command_prefix else params.command
        program = shell or ("/bin/bash" if os.path.exists("/bin/bash") else shutil.which("bash") or "sh")  # pi's
        environment = tool_environment(env)  # no key variables: ``env``, its /proc/self/environ hold none
        spool = OutputSpool("pi-bash")
        emitter = _ThrottledEmitter(spool, on_update)
        timeout = params.timeout if params.timeout is not None and params.timeout > 0 else None
        try:
            exit_code = await run_command(
                [program, "-c", command], cwd, environment, spool, emitter, timeout, signal, update_interval
            )
        except CommandStopped as stopped:
            output, _details = spool.final()
            prefix = "" if output == "(no output)" else f"{output}\n\n"
            if str(stopped) == "aborted":
                raise RuntimeError(f"{prefix}Command aborted") from None
            raise RuntimeError(
                f"{prefix}Command timed out after {format_seconds(params.timeout or 0)} seconds"
            ) from None
        except BaseException:
            spool.close()
            raise
        output, details = spool.final()
        if exit_code < 0:
            name = _signal_name(-exit_code)
            raise RuntimeError(f"{output}\n\nCommand was terminated by signal {-exit_code} ({name})")
        if exit_code != 0:
            raise RuntimeError(f"{output}\n\nCommand exited with code {exit_code}")
        return AgentToolResult([TextContent(output)], details={"exit_code": exit_code, **details})

    return ToolDefinition(
        origin="builtin",
        secret_arguments={"command": "command"},  # what of a call may name secrets (approval.secret_reason)
        name="bash",
        label="bash",
        description=(
            "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated "
            f"to last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). If "
            "truncated, full output is saved to a temp file. Optionally provide a timeout in seconds."
        ),
        parameters=BashParams,
        execute=execute,
        prompt_snippet="Execute bash commands (ls, grep, find, etc.)",
        prompt_guidelines=("Use bash for file operations like ls, rg, find",),
        approval="ask",
    )


class _ThrottledEmitter:
    """Sends the output tail to ``on_update`` when new output came since the last send."""

    def __init__(self, spool: OutputSpool, on_update: Callable[[AgentToolResult], None] | None) -> None:
        self._spool = spool
        self._on_update = on_update
        self._dirty = False

    def mark(self) -> None:
        self._dirty = True

    def send(self, force: bool = False) -> None:
        if self._on_update is None or not (self._dirty or force):
            return
        self._dirty = False
        text, details = self._spool.snapshot()
        with contextlib.suppress(Exception):  # a broken listener must not stop the command
            self._on_update(
                AgentToolResult([TextContent(text)] if text else [], details={"exit_code": None, **details})
            )


class _CommandProtocol(asyncio.SubprocessProtocol):
    """Feeds output to the spool; tells when the shell exited and when its output pipe closed. (Not
    ``asyncio.create_subprocess_exec``: on Python 3.11 its ``Process.wait()`` returns only once every pipe is
    closed, so a background child holding the pipe, ``server &``, would hold the result.)"""

    def __init__(self, spool: OutputSpool, emitter: _ThrottledEmitter, loop: asyncio.AbstractEventLoop) -> None:
        self._spool = spool
        self._emitter = emitter
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self._spool.add(data if isinstance(data, bytes) else data.encode())
        self._emitter.mark()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1 and not self.output_closed.done():
            self.output_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def run_command(
    argv: list[str],
    cwd: str,
    env: Mapping[str, str],
    spool: OutputSpool,
    emitter: _ThrottledEmitter,
    timeout: float | None,
    signal: AbortSignal | None,
    update_interval: float = UPDATE_INTERVAL_SECONDS,
) -> int:
    """Run ``argv`` in its own process group; the exit code, or ``CommandStopped``."""
    loop = asyncio.get_running_loop()
    protocol = _CommandProtocol(spool, emitter, loop)
    transport, _ = await loop.subprocess_exec(
        lambda: protocol,
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    pid = transport.get_pid()
    ticker = asyncio.ensure_future(_tick(emitter, update_interval))
    stopped: asyncio.Future[Any] = asyncio.ensure_future(signal.wait()) if signal is not None else loop.create_future()
    emitter.send(force=True)  # pi sends an empty update at once: the UI shows the call as running
    try:
        waiting: set[asyncio.Future[Any]] = {protocol.exited, stopped}
        done, _pending = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        reason = None if protocol.exited in done else ("aborted" if stopped in done else "timeout")
        if reason is not None:
            await _terminate_group(pid, protocol.exited)
        with contextlib.suppress(asyncio.TimeoutError):  # a background child may hold the pipe open
            await asyncio.wait_for(asyncio.shield(protocol.output_closed), EXIT_STDIO_GRACE_SECONDS)
        if reason is not None:
            raise CommandStopped(reason)
        code = transport.get_returncode()
        assert code is not None
        return code
    finally:
        ticker.cancel()
        stopped.cancel()
        if transport.get_returncode() is None:  # cancelled from outside: no time for grace
            _kill_group(pid, signals.SIGKILL)
        transport.close()  # our end of the pipe, even when a background child holds the other


async def _tick(emitter: _ThrottledEmitter, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        emitter.send()


async def _terminate_group(pgid: int, exited: asyncio.Future[None]) -> None:
    """SIGTERM the process group; SIGKILL what is left once the shell is gone (or after the grace)."""
    _kill_group(pgid, signals.SIGTERM)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(exited), KILL_GRACE_SECONDS)
    _kill_group(pgid, signals.SIGKILL)


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return "unknown signal"
