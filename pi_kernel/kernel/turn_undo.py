"""The ``%%pi`` turns' undo journals, and ``%pi undo`` of a turn's effects.

Each turn gets a ``TurnJournal`` (``begin``, given to the tools as ``ToolContext.journal``); at its end
(``end``) the journal notes the files' final state and names what it cannot revert: the calls of
tools that keep no journal (``bash``, MCP and the user's own tools). ``%pi undo`` reverts the newest
turn whose effects were not undone yet (``undo_newest``): its variables, objects changed in place and
files at once, its notebook changes through the notebook bridge (asynchronously: the bridge answers on
the event loop the magic runs on, so the report is updated when they are done). Only when no turn
has anything left to undo does ``%pi undo`` bring back a replaced conversation (``undo.py``).

Memory: every journal's copies count against ``PI_UNDO_MEMORY``; a new turn drops the copies of the
oldest journals until the older ones hold at most half of it (their objects are then named as not
restored); the newest ``LIMIT`` journals are kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pi_kernel.ai import AssistantMessage, ToolCall
from pi_kernel.tools.turn_journal import NotebookEditor, TurnJournal, UndoReport

LIMIT = 20

JOURNALED_TOOLS = frozenset(
    {"python", "write", "edit", "read", "inspect", "cells", "edit_cell", "insert_cells", "delete_cells", "run_cells"}
)
"""Tools whose effects the journal records (or that change nothing)."""


class TurnJournals:
    def __init__(self) -> None:
        self._journals: list[TurnJournal] = []
        """Oldest first."""

    def begin(self, memory_budget: int, label: str) -> TurnJournal:
        """A journal for a new turn; older journals' copies give way while they hold over half the budget."""
        for older in self._journals:
            if sum(journal.held for journal in self._journals) <= memory_budget // 2:
                break
            older.release_copies()
        held = sum(journal.held for journal in self._journals)
        journal = TurnJournal(max(memory_budget - held, 0), label)
        self._journals.append(journal)
        del self._journals[:-LIMIT]
        return journal

    def end(self, journal: TurnJournal, messages: list[Any]) -> None:
        """The turn ended: note the files' state and the calls no journal covers; an empty journal goes."""
        journal.finish()
        for call in _tool_calls(messages):
            if call.name in JOURNALED_TOOLS:
                continue
            if call.name == "bash":
                command = str(call.arguments.get("command", ""))
                shown = command if len(command) <= 60 else command[:57] + "..."
                journal.note(f"call:{call.id}", f"bash `{shown}`: what a command did is not undone")
            else:
                journal.note(f"call:{call.id}", f"{call.name}: what this tool did is not undone")
        if journal.is_empty() and journal in self._journals:
            self._journals.remove(journal)

    def newest(self) -> TurnJournal | None:
        """The newest turn with effects not undone yet."""
        return next((journal for journal in reversed(self._journals) if not journal.undone), None)

    def describe(self) -> str:
        rows = [
            f"turn {journal.label!r}: {journal.summary()}" for journal in reversed(self._journals) if not journal.undone
        ]
        return "\n".join(rows)


def undo_newest(
    journals: TurnJournals,
    namespace: dict[str, Any] | None,
    notebook: NotebookEditor | None,
    show_later: Callable[[str], Callable[[str], None]],
) -> str | None:
    """Undo the newest turn's effects; ``None`` when no turn has any left.

    Returns the report on variables and files. Notebook changes need the bridge's answers, so they are
    undone by a task on the running event loop: ``show_later(text)`` shows a line now and returns how
    to replace it with the final report.
    """
    journal = journals.newest()
    if journal is None:
        return None
    report = journal.revert(namespace)
    head = f"Undid the turn {journal.label!r}."
    if not journal.notebook_changes:
        return f"{head}\n{report.text()}"
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None:  # no loop on this thread (a plain IPython shell): nothing can answer anyway
        asyncio.run(journal.revert_notebook(notebook, report))
        return f"{head}\n{report.text()}"
    update = show_later(f"{head}\n{report.text()}\nUndoing the notebook changes…")

    async def notebook_part() -> None:
        final = await journal.revert_notebook(notebook, report)
        update(f"{head}\n{final.text()}")

    loop.create_task(notebook_part())
    return ""


def _tool_calls(messages: list[Any]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            calls += [part for part in message.content if isinstance(part, ToolCall)]
    return calls


__all__ = ["TurnJournals", "UndoReport", "undo_newest"]
