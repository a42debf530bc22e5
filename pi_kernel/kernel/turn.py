"""``Turn``: one ``%%pi`` cell's run, made at its start and passed to what acts for it.

The ``PiSession`` lives as long as the kernel: the agent, the tool registry,
the settings, the conversation and its kept versions. A ``Turn`` lives as long
as one cell and holds what is true only for it: its options, the model and
turn limit it runs with (given to ``Agent.prompt`` as per-run overrides, never
set on the agent), its view, who can answer its approvals (``widgets``,
``raw_input``, ``blocking``), the ``execute_request`` it answers (``parent``)
and its cancel flag (``cancel``; the session's ``interrupt`` also aborts the
agent's run and denies waiting approvals).

``cell_runner.run_turn`` makes it and hands it on explicitly: to the approval
gate (``SessionApprovals.gate(turn)``), to the request hook (``no_tools``),
to the tools' context (``bind_tools``). The session knows only which turn runs
now (``PiSession.turn``), for an interrupt and for commands that must wait.

How a per-turn service reaches the tools (the turn's undo journal, say): it
is a field of the ``Turn``, made by ``run_turn``; ``bind_tools`` sets it on
the session's ``ToolContext`` (a typed field there, ``None`` between turns)
as the turn starts, and ``run_turn``'s ``finally`` sets ``None`` back. A tool
reads ``ctx.journal``; nothing outlives the turn. (The registry's wrapped
tools hold the session's one ``ToolContext``: a copy per turn would mean
re-wrapping every tool each turn, and resetting their retry budgets.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_kernel.kernel.views import TurnOptions, TurnView

if TYPE_CHECKING:  # the agent and tools layers load with the first turn, not at kernel start
    from pi_kernel.ai import Model
    from pi_kernel.tools.definition import ToolContext
    from pi_kernel.tools.turn_journal import TurnJournal


@dataclass
class Turn:
    """The ``%%pi`` cell that runs: see the module docstring."""

    options: TurnOptions
    cell_id: str | None
    model: Model
    """The model of this turn (``--model``, else the session's)."""
    max_turns: int | None
    """Model requests this turn may make (``--max-turns``, else the setting); ``None``: no limit."""
    view: TurnView | None = None
    allow_stdin: bool = False
    raw_input: Callable[[str], str] | None = None
    """The front-end's ``input()`` for this cell, when it allows stdin."""
    widgets: bool = False
    """The front-end that sent the cell renders widgets (its approvals are answered there)."""
    blocking: bool = False
    """The cell blocks the shell (IPython outside a kernel with ``%autoawait off``: the turn runs to its end on
    IPython's loop, ``cell_runner.run_cell_sync``): no click or comm message reaches it."""
    parent: dict[str, Any] | None = None
    """The cell's ``execute_request`` (in a kernel): the parent of the ``busy`` that ``reassert_busy`` sends."""
    interrupted: bool = False
    journal: TurnJournal | None = None
    """The turn's undo journal (``undo``): the tools record what they change into it."""

    def cancel(self) -> None:
        """An interrupt reached this turn (the session also aborts the agent and denies waiting approvals)."""
        self.interrupted = True

    @property
    def stdin(self) -> Callable[[str], str] | None:
        """Who asks on stdin for this turn, if anyone may."""
        return self.raw_input if self.allow_stdin else None

    def bind_tools(self, ctx: ToolContext) -> None:
        """The turn starts: the tools' context gets this turn's state (relative paths from the cwd of now)."""
        ctx.cwd = Path.cwd()
        ctx.journal = self.journal
