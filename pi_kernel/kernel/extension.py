"""Wiring a session into an IPython shell: ``%load_ext pi_kernel`` and the Pi kernel both use ``attach``.

This module owns the session of the process (``get_session``), its
``attach`` / ``detach``, ``run_pi_cell``, what a rewritten ``%%pi`` cell
awaits, and ``run_pi_line``, what a rewritten ``%pi mcp add`` / ``compact``
line awaits. ``attach`` registers the ``%pi``/``%%pi`` magics, the cell rewriter that makes
them awaitable (with its ``pre_run_cell``/``post_run_cell`` hooks, which tell a
cell run from inside another), the ``pre_run_cell`` hook (cell ids, ``@tool``
wiring, comm targets), the ``post_run_cell`` hook (the cell history), the
comm targets themselves and the mask on what the kernel sends (``outgoing``).
It is cheap: nothing here imports the agent, the tools or a provider;
``pi_kernel.kernel.cell_runner`` and ``pi_kernel.kernel.line_commands``,
which do, are imported lazily, when the first such cell runs.

Settings come from a ``.env`` file in the working directory (filling unset
variables only, under the rules in ``config.load_dotenv``), the environment, then ``c.PiKernel.*`` config (also read in
a stock kernel's config) and finally ``overrides`` (the Pi kernel's traitlets).

A bad value never stops the kernel: it runs in the kernel's constructor, where
an exception kills the process and JupyterLab restarts it forever. It is
logged, that setting keeps its lower layer's value (the default, in the end),
and the session shows the warning once, in its first ``%pi`` / ``%%pi`` output.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pi_kernel.kernel import agent_proxy, outgoing
from pi_kernel.kernel.config import PiSettings, apply_config, load_dotenv, settings_from_env
from pi_kernel.kernel.magics import PiMagics, make_cell_rewriter, print_output
from pi_kernel.kernel.outgoing import install_payload_gate, make_undumpable
from pi_kernel.kernel.session import PiSession

logger = logging.getLogger("pi_kernel.kernel")


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
    """What a rewritten ``%%pi`` cell awaits (``magics.RUNNER``): a turn of this process's session."""
    # Here, not at the top: the cell runner pulls in pi_kernel.ai and the tools, which the kernel should
    # not pay for at start (this module loads with it).
    from pi_kernel.kernel.cell_runner import run_cell

    outgoing.claim_request()  # this cell is pi's: what it sends is masked, whatever its code names
    await run_cell(get_session(), body, line)


async def run_pi_line(line: str) -> None:
    """What a rewritten ``%pi mcp add|remove|restart`` cell awaits (``magics.LINE_RUNNER``): the command,
    on the loop its MCP servers live on."""
    from pi_kernel.kernel.cell_runner import show_notices
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
    rewriter = make_cell_rewriter(shell)
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
    agent_proxy.install_agent_proxy(get_session)
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
