"""Wiring a session into an IPython shell: ``%load_ext pi_kernel`` and the Pi kernel both use ``attach``.

This module owns the session of the process (``get_session``, ``attach`` / ``detach``), the ``%pi`` /
``%%pi`` magics, the cell rewriter that makes them awaitable, and the older ``from pi_kernel import agent``
spelling. ``attach`` registers the magics, the rewriter (with its ``pre_run_cell``/``post_run_cell`` hooks,
which tell a cell run from inside another), the ``pre_run_cell`` hook (cell ids, ``@tool`` wiring, comm
targets), the ``post_run_cell`` hook (the cell history), the comm targets themselves and the mask on what
the kernel sends (``outgoing``). It is cheap: ``pi_kernel.kernel.cell_runner`` and
``pi_kernel.kernel.line_commands``, which pull in the agent, the tools and a provider (about 100 ms), are
imported lazily, when the first ``%pi`` / ``%%pi`` runs.

**Settings** come from a ``.env`` file in the working directory (filling unset variables only, under the
rules in ``config.load_dotenv``), the environment, then ``c.PiKernel.*`` config (also read in a stock
kernel's config) and finally ``overrides`` (the Pi kernel's traitlets). A bad value never stops the kernel:
it runs in the kernel's constructor, where an exception kills the process and JupyterLab restarts it
forever. It is logged, that setting keeps its lower layer's value (the default, in the end), and the
session shows the warning once, in its first ``%pi`` / ``%%pi`` output.

**``%%pi [--model NAME] [--no-tools] [--max-turns N] [--approve MODE]``** + a prompt: one turn of the
session's agent, run one way: as a task on the shell's own event loop. ``PiCellRewriter`` (an IPython
``input_transformers_post`` entry) turns such a cell into ``await run_pi_cell(body, line)`` wherever
IPython runs top-level ``await`` on asyncio (ipykernel, the terminal), so the turn runs inside the
kernel's event loop; ``%pi mcp add|remove|restart`` and ``%pi compact`` lines at a cell's top level
likewise become ``await run_pi_line(line)`` (MCP sessions live on that loop too), also when written as
``get_ipython().run_line_magic("pi", f"...")``. The ``%%pi`` cell magic itself runs only where that
rewrite did not happen: outside a kernel with ``%autoawait off`` (no loop runs: the turn runs to the end
on IPython's loop, approvals on stdin only), or where the kernel's loop is busy running this very cell:
``%autoawait off`` in a kernel, or a ``%%pi`` cell run from inside another (``%%capture``, ``%%time``,
``%run``, ``shell.run_cell``), found by ``CellDepth``. There it says so and what to do
(``cell_runner.run_cell_sync``) instead of starting a loop of its own.

``%pi`` line commands: see ``line_commands.HELP``. The line is not expanded as IPython does for most
magics (``{expr}`` / ``$name``): ``%pi allow ID --args {"a": 1}`` is JSON, and expansion would turn it
into something else (or nothing) silently.

**``from pi_kernel import agent``** in a session gives the session's agent, the older spelling of
``pi_kernel.session().agent``, kept for notebooks already written. ``pi_kernel.agent`` is also the name of
a subpackage, and importing a subpackage sets it as an attribute of its parent, which a module
``__getattr__`` never overrides. So ``attach`` gives the ``pi_kernel`` module a class whose ``agent``
property returns ``SessionAgent``: a proxy that reads and writes the session's ``Agent``, and falls back
to the package's names (``pi_kernel.agent.Agent``, ``pi_kernel.agent.loop``) for what the agent does not
have. Outside a session nothing changes.

Long: the wiring of a session into a shell, the magics and the old ``pi_kernel.agent`` spelling are the one way in.
"""

from __future__ import annotations

import ast
import importlib
import logging
import sys
import threading
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from IPython.core.async_helpers import _asyncio_runner
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from pi_kernel.kernel import outgoing
from pi_kernel.kernel.config import PiSettings, apply_config, load_dotenv, settings_from_env
from pi_kernel.kernel.outgoing import install_payload_gate, make_undumpable
from pi_kernel.kernel.session import PiSession, show_notices

logger = logging.getLogger("pi_kernel.kernel")


RUNNER = "__import__('pi_kernel.kernel.extension', fromlist=['run_pi_cell']).run_pi_cell"
LINE_RUNNER = "__import__('pi_kernel.kernel.extension', fromlist=['run_pi_line']).run_pi_line"
AWAITED_LINES = ("mcp add", "mcp remove", "mcp restart", "compact")
"""``%pi`` lines that wait on the loop (MCP servers start and stop there; ``compact`` asks the model):
awaited where they are a statement of the cell's top level (``_await_pi_lines``)."""


def _pi_cell_magic_call(code: str) -> tuple[str, str] | None:
    """``(line, body)`` if ``code`` is IPython's translation of a ``%%pi`` cell."""
    if "run_cell_magic" not in code:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    call = _pi_magic(tree.body[0].value, "run_cell_magic")
    values = [arg.value for arg in call.args if isinstance(arg, ast.Constant)] if call is not None else []
    if call is None or len(call.args) != 3 or len(values) != 3 or not all(isinstance(v, str) for v in values):
        return None
    return str(values[1]), str(values[2])


def awaited_line(line: str) -> bool:
    """Whether a ``%pi`` line is one of ``AWAITED_LINES``."""
    words = line.split()
    return bool(words) and (words[0] in AWAITED_LINES or " ".join(words[:2]) in AWAITED_LINES)


def _pi_magic(node: ast.expr, method: str) -> ast.Call | None:
    """``node`` if it is ``get_ipython().<method>('pi', ...)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method):
        return None
    target = node.func.value
    if not (isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "get_ipython"):
        return None
    first = node.args[0] if node.args else None
    return node if isinstance(first, ast.Constant) and first.value == "pi" else None


def _awaited_line_call(statement: ast.stmt) -> ast.expr | None:
    """The line argument of a top-level ``get_ipython().run_line_magic('pi', line)`` statement whose line
    (a string, or an f-string by its leading text) is one of ``AWAITED_LINES``."""
    if not isinstance(statement, ast.Expr):
        return None
    call = _pi_magic(statement.value, "run_line_magic")
    if call is None or len(call.args) != 2 or call.keywords:
        return None
    line = call.args[1]
    if isinstance(line, ast.Constant) and isinstance(line.value, str):
        text = line.value
    elif isinstance(line, ast.JoinedStr) and line.values and isinstance(line.values[0], ast.Constant):
        text = str(line.values[0].value)
    else:
        return None
    return line if awaited_line(text) else None


def _await_pi_lines(code: str) -> str:
    """``code`` with each top-level ``%pi`` line of ``AWAITED_LINES`` (as IPython translated it, or written
    as ``get_ipython().run_line_magic("pi", f"mcp add ...")``) turned into ``await run_pi_line(line)``."""
    if "run_line_magic" not in code:
        return code
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    lines = code.splitlines(keepends=True)

    def offset(lineno: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return sum(len(line) for line in lines[: lineno - 1]) + len(lines[lineno - 1].encode()[:col].decode())

    for statement in reversed(tree.body):
        line = _awaited_line_call(statement)
        if line is None or statement.end_lineno is None or statement.end_col_offset is None:
            continue
        argument = ast.get_source_segment(code, line)
        start = offset(statement.lineno, statement.col_offset)
        end = offset(statement.end_lineno, statement.end_col_offset)
        code = f"{code[:start]}await {LINE_RUNNER}({argument}){code[end:]}"
    return code


class CellDepth:
    """Which cells this thread runs now (IPython's ``pre_run_cell`` / ``post_run_cell``): a cell transformed
    while another runs is run from inside that one (``%%capture``, ``%%time``, ``%run``,
    ``shell.run_cell``). Such a cell cannot await on the loop that runs the outer one: IPython's synchronous
    ``run_cell`` would hand its top-level ``await`` to ``loop.run_until_complete`` ("This event loop is
    already running"). The kernel's own cells are transformed before their ``pre_run_cell``; ``%load_ext``
    attaches inside a cell, whose ``post_run_cell`` then finds nothing to remove.

    Not ``pre_execute`` / ``post_execute``: ipykernel's comm dispatch fires those around each comm handler
    and skips ``post_execute`` when a handler raises, which would leave the count up for good. IPython fires
    ``post_run_cell`` in a ``finally``; a cell is removed by its ``ExecutionInfo`` (``result.info``), so an
    unpaired ``post_run_cell`` (an empty cell returns before ``pre_run_cell``) removes nothing."""

    def __init__(self) -> None:
        self._running: dict[int, list[int]] = {}

    def enter(self, info: object = None) -> None:
        self._running.setdefault(threading.get_ident(), []).append(id(info))

    def leave(self, result: object = None) -> None:
        running = self._running.get(threading.get_ident())
        if not running:
            return
        key = id(getattr(result, "info", None))
        if key in running:
            del running[len(running) - 1 - running[::-1].index(key)]

    def inside_a_cell(self) -> bool:
        return bool(self._running.get(threading.get_ident()))


class PiCellRewriter:
    """The ``input_transformers_post`` entry for one shell (``pi_kernel`` marks it as ours)."""

    pi_kernel = True

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.depth = CellDepth()

    def __call__(self, lines: list[str]) -> list[str]:
        code = "".join(lines)
        if ("run_cell_magic" not in code and "run_line_magic" not in code) or not self.may_await():
            return lines
        found = _pi_cell_magic_call(code)
        if found is not None:
            line, body = found
            return [f"await {RUNNER}({body!r}, {line!r})\n"]
        awaited = _await_pi_lines(code)
        return awaited.splitlines(keepends=True) if awaited != code else lines

    def may_await(self) -> bool:
        """A top-level ``await`` in this cell runs on the shell's loop: autoawait is on and it is no cell
        run from inside another."""
        return can_await(self.shell) and not self.depth.inside_a_cell()


def can_await(shell: Any) -> bool:
    """IPython runs top-level ``await`` here, on asyncio."""
    return bool(getattr(shell, "autoawait", False)) and getattr(shell, "loop_runner", None) is _asyncio_runner


@magics_class
class PiMagics(Magics):
    def __init__(self, shell: Any, session: PiSession) -> None:
        super().__init__(shell)
        self.session = session

    @no_var_expand
    @line_cell_magic
    def pi(self, line: str, cell: str | None = None) -> None:
        """%pi commands and %%pi prompts (%pi help)."""
        from pi_kernel.kernel.cell_runner import run_cell_sync
        from pi_kernel.kernel.line_commands import run_line_command

        outgoing.claim_request()  # this cell is pi's now: what it sends is masked, whatever its code names
        show_notices(self.session)
        if cell is not None:
            run_cell_sync(self.session, cell, line, autoawait=can_await(self.shell))
            return

        print_output(run_line_command(self.session, line))


def print_output(output: str) -> None:
    """A ``%pi`` command's answer, masked here too: output captured in the cell (``%%capture``) never reaches
    ``outgoing``."""
    if output:
        outgoing.print_masked(output)


def session_settings(
    shell: Any, overrides: Mapping[str, Any] | None = None, problems: list[str] | None = None
) -> PiSettings:
    """The session's settings; each bad value is logged and added to ``problems`` (see the module doc)."""
    found: list[str] = []
    dotenv = load_dotenv(Path.cwd() / ".env")
    found.extend(f".env: {line}." for line in dotenv.ignored)
    settings = settings_from_env(problems=found)
    if dotenv.base_url and not settings.base_url:
        settings = settings_from_env({"OPENAI_BASE_URL": dotenv.base_url}, base=settings, problems=found)
        settings.base_url_from_dotenv = settings.base_url is not None
    config = getattr(shell, "config", None)
    section = config.get("PiKernel", {}) if config is not None and hasattr(config, "get") else {}
    # The Pi kernel's traitlets come from that same config: one pass, so one warning per bad value.
    values = {**dict(section), **{name: value for name, value in (overrides or {}).items() if value is not None}}
    settings = apply_config(settings, values, found)
    for problem in found:
        logger.warning("pi_kernel: %s", problem)
        if problems is not None:
            problems.append(problem)
    return settings


_session: PiSession | None = None
"""The session of this process (one IPython, one session)."""


def get_session(create: bool = True) -> PiSession:
    """The session of the running IPython (attached with default settings if needed)."""
    if _session is None and create:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            raise RuntimeError("pi_kernel's session needs IPython: run it in a Jupyter kernel or IPython")
        attach(shell)
    assert _session is not None
    return _session


async def run_pi_cell(body: str, line: str = "") -> None:
    """What a rewritten ``%%pi`` cell awaits (``RUNNER``): a turn of this process's session."""
    from pi_kernel.kernel.cell_runner import parse_options, run_turn

    outgoing.claim_request()  # this cell is pi's: what it sends is masked, whatever its code names
    session = get_session()
    show_notices(session)
    await run_turn(session, body, parse_options(line))


async def run_pi_line(line: str) -> None:
    """What a rewritten ``%pi mcp add|remove|restart`` cell awaits (``LINE_RUNNER``): the command,
    on the loop its MCP servers live on."""
    from pi_kernel.kernel.line_commands import run_line_command_async

    outgoing.claim_request()
    session = get_session()
    show_notices(session)
    print_output(await run_line_command_async(session, line))


def attach(shell: Any, overrides: Mapping[str, Any] | None = None, kernel: Any = None) -> Any:
    """The session of ``shell``, created and wired on first call."""
    global _session
    current = _session
    if current is not None and current.shell is shell:
        return current
    make_undumpable()  # commands the agent runs cannot read the kernel's /proc environ or memory (non-root)
    problems: list[str] = []
    session = PiSession(shell, session_settings(shell, overrides, problems), kernel, notices=problems)
    _session = session
    shell.register_magics(PiMagics(shell, session))
    transformers = shell.input_transformers_post
    transformers[:] = [t for t in transformers if not getattr(t, "pi_kernel", False)]
    rewriter = PiCellRewriter(shell)
    transformers.append(rewriter)
    shell.events.register("pre_run_cell", rewriter.depth.enter)
    shell.events.register("post_run_cell", rewriter.depth.leave)
    shell.events.register("pre_run_cell", session.note_cell)
    shell.events.register("post_run_cell", session.cell_history.post_run_cell)
    gate = install_payload_gate(shell)
    if gate is not None and gate.cell_started not in shell.events.callbacks["pre_run_cell"]:
        shell.events.register("pre_run_cell", gate.cell_started)
    session.frontend.ensure_targets()
    session.notebook.ensure_target()
    install_agent_proxy()
    outgoing.install_outgoing_mask(session.kernel, shell)
    return session


def detach(shell: Any) -> None:
    global _session
    session = _session
    if session is None or session.shell is not shell:
        return
    ours = [t for t in shell.input_transformers_post if getattr(t, "pi_kernel", False)]
    shell.input_transformers_post[:] = [t for t in shell.input_transformers_post if t not in ours]
    try:
        shell.events.unregister("pre_run_cell", session.note_cell)
        shell.events.unregister("post_run_cell", session.cell_history.post_run_cell)
        for rewriter in ours:
            shell.events.unregister("pre_run_cell", rewriter.depth.enter)
            shell.events.unregister("post_run_cell", rewriter.depth.leave)
    except ValueError:
        pass
    shell.magics_manager.magics["line"].pop("pi", None)
    shell.magics_manager.magics["cell"].pop("pi", None)
    session.frontend.remove_targets()
    session.notebook.remove_target()
    outgoing.remove_outgoing_mask(shell)
    _session = None


def load_ipython_extension(ipython: Any) -> None:
    attach(ipython).notebook.say_hello()  # a front-end already open connects its notebook bridge


def unload_ipython_extension(ipython: Any) -> None:
    detach(ipython)


# ---------------------------------------------------------------- the older ``pi_kernel.agent``


class SessionAgent:
    """Stands for the session's ``Agent`` (``await agent.prompt(...)``, ``agent.state.messages``)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        agent = get_session().agent
        try:
            return getattr(agent, name)
        except AttributeError:
            return getattr(importlib.import_module("pi_kernel.agent"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(get_session().agent, name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(get_session().agent)) | set(dir(importlib.import_module("pi_kernel.agent"))))

    def __repr__(self) -> str:
        return f"<session agent: {get_session().agent.state!r}>"


class _PiPackage(types.ModuleType):
    @property
    def agent(self) -> SessionAgent:
        return SessionAgent()

    @agent.setter
    def agent(self, package: Any) -> None:
        # importlib sets the subpackage here when ``pi_kernel.agent`` is imported.
        self.__dict__["agent"] = package


def install_agent_proxy() -> None:
    """Make ``pi_kernel.agent`` the agent of ``get_session()`` for the rest of this process."""
    module = sys.modules["pi_kernel"]
    if not isinstance(module, _PiPackage):
        module.__class__ = _PiPackage
