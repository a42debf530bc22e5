"""The ``bash`` tool: run a command, stream its output, stop it on timeout or abort.

Port of pi's ``bash.ts``. The command runs as ``<shell> -c <command>`` (pi's
choice of shell: ``/bin/bash``, else ``bash`` on PATH, else ``sh``) in the
context's cwd, in a new session so that it and everything it starts form one
process group. Output (stdout and stderr through one pipe, so their order is
kept) streams to ``on_update`` at most ``update_interval`` apart (10 Hz),
each update holding the current tail. The final text is the tail of the
output (last 2000 lines / 50 KB) with pi's trailer naming the temp file that
holds all of it.

Endings, as pi reports them (raised, so the loop makes an error result):
a non-zero exit adds ``Command exited with code N``; a timeout kills the
process group and adds ``Command timed out after N seconds``; an abort kills
it and adds ``Command aborted``. Killing is SIGTERM to the group, then
SIGKILL to whatever is left once the shell is gone (or after
``KILL_GRACE_SECONDS``). A command killed by a signal from outside is
reported as an error too (pi treats that as success, which hides OOM kills).
When the shell exits normally, background processes it started may keep
running (``nohup server &`` works, as in pi); their output is no longer read.

``details``: ``{"exit_code": int | None, "truncation": dict | None,
"full_output_path": str | None}``; updates carry the same keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal as signals
from collections.abc import Callable, Mapping

from pydantic import BaseModel, Field

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.tools.builtin.output import OutputSpool
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.paths import resolve_tool_cwd
from pi_kernel.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES

UPDATE_INTERVAL_SECONDS = 0.1
KILL_GRACE_SECONDS = 1.0
"""How long the shell gets to exit on SIGTERM before the group is SIGKILLed."""
EXIT_STDIO_GRACE_SECONDS = 0.1
"""After the shell exits, how long to wait for the pipe to close (pi: 100 ms)."""
_READ_SIZE = 65536


class BashParams(BaseModel):
    command: str = Field(description="Bash command to execute")
    timeout: float | None = Field(default=None, description="Timeout in seconds (optional, no default timeout)")


def default_shell() -> str:
    if os.path.exists("/bin/bash"):
        return "/bin/bash"
    return shutil.which("bash") or "sh"


def format_seconds(seconds: float) -> str:
    """``5`` for 5.0, ``0.5`` for 0.5 (as JavaScript prints numbers)."""
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


class CommandStopped(Exception):
    """The command ended by timeout or abort (``reason``: ``"timeout"`` or ``"aborted"``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def create_bash_tool(
    *,
    shell: str | None = None,
    command_prefix: str | None = None,
    env: Mapping[str, str] | None = None,
    update_interval: float = UPDATE_INTERVAL_SECONDS,
) -> ToolDefinition:
    """The ``bash`` tool (asks for approval by default).

    ``shell``: the program run as ``shell -c command``; ``command_prefix``: lines
    run before every command (pi's ``commandPrefix``); ``env``: variables added
    to the process environment; ``update_interval``: seconds between streamed updates.
    """

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
        environment = {**os.environ, **(env or {})}
        spool = OutputSpool("pi-bash")
        emitter = _ThrottledEmitter(spool, on_update)
        timeout = params.timeout if params.timeout is not None and params.timeout > 0 else None
        try:
            exit_code = await run_command(
                [shell or default_shell(), "-c", command],
                cwd,
                environment,
                spool,
                emitter,
                timeout,
                signal,
                update_interval,
            )
        except CommandStopped as stopped:
            output, _details = spool.final()
            prefix = "" if output == "(no output)" else f"{output}\n\n"
            if stopped.reason == "aborted":
                raise RuntimeError(f"{prefix}Command aborted") from None
            raise RuntimeError(
                f"{prefix}Command timed out after {format_seconds(params.timeout or 0)} seconds"
            ) from None
        finally:
            spool.close()
        output, details = spool.final()
        if exit_code < 0:
            name = _signal_name(-exit_code)
            raise RuntimeError(f"{output}\n\nCommand was terminated by signal {-exit_code} ({name})")
        if exit_code != 0:
            raise RuntimeError(f"{output}\n\nCommand exited with code {exit_code}")
        return AgentToolResult([TextContent(output)], details={"exit_code": exit_code, **details})

    return ToolDefinition(
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
        text, details = self._spool.snapshot() if self._spool.total_bytes else ("", {})
        with contextlib.suppress(Exception):  # a broken listener must not stop the command
            self._on_update(
                AgentToolResult([TextContent(text)] if text else [], details={"exit_code": None, **details})
            )


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
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    remove_listener = (
        signal.add_listener(lambda _reason: loop.call_soon_threadsafe(stop.set)) if signal is not None else None
    )
    assert process.stdout is not None
    reader = asyncio.ensure_future(_pump(process.stdout, spool, emitter))
    ticker = asyncio.ensure_future(_tick(emitter, update_interval))
    exited = asyncio.ensure_future(process.wait())
    stopped = asyncio.ensure_future(stop.wait())
    emitter.send(force=True)  # pi sends an empty update at once: the UI shows the call as running
    try:
        done, _pending = await asyncio.wait({exited, stopped}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        reason = None if exited in done else ("aborted" if stop.is_set() else "timeout")
        if reason is not None:
            await _terminate_group(process)
        code = await process.wait()
        with contextlib.suppress(asyncio.TimeoutError):  # a background child may hold the pipe open
            await asyncio.wait_for(asyncio.shield(reader), EXIT_STDIO_GRACE_SECONDS)
        if reason is not None:
            raise CommandStopped(reason)
        return code
    finally:
        if remove_listener is not None:
            remove_listener()
        for task in (reader, ticker, exited, stopped):
            task.cancel()
        if process.returncode is None:  # cancelled from outside: no time for grace
            _kill_group(process.pid, signals.SIGKILL)
        _close_pipes(process)


async def _pump(stream: asyncio.StreamReader, spool: OutputSpool, emitter: _ThrottledEmitter) -> None:
    while True:
        data = await stream.read(_READ_SIZE)
        if not data:
            return
        spool.add(data)
        emitter.mark()


async def _tick(emitter: _ThrottledEmitter, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        emitter.send()


async def _terminate_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group; SIGKILL what is left once the shell is gone (or after the grace)."""
    _kill_group(process.pid, signals.SIGTERM)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(process.wait()), KILL_GRACE_SECONDS)
    _kill_group(process.pid, signals.SIGKILL)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _close_pipes(process: asyncio.subprocess.Process) -> None:
    """Close our end of the pipe even when a background child still holds its end."""
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return "unknown signal"


__all__ = ["BashParams", "CommandStopped", "create_bash_tool", "default_shell", "format_seconds", "run_command"]
