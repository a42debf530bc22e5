"""What ``%pi undo`` reverts: a turn's effects (``TurnJournals``), else a replaced conversation
(``ConversationVersions``).

**Turns.** Each ``%%pi`` turn gets a ``TurnJournal`` (the tools' ``ToolContext.journal``); at its end it
notes the files' state and names what it cannot revert (``bash``, MCP and the user's tools). ``%pi undo``
reverts the newest turn not undone yet: variables, objects and files at once, notebook changes through
the bridge (the report updated when done). All journals' copies share ``PI_UNDO_MEMORY``: a new turn
drops the oldest journals' copies until they hold at most half of it.

**Conversations.** When no turn is left to undo, ``%pi undo`` brings back a conversation something
replaced (a re-run cell, a compaction, ``%pi reset``, ``load``, ``undo`` itself); the one it replaces is
kept in turn. Versions share their message objects with the conversation.

``pi_kernel.tools.turn_journal`` is imported lazily (``TurnJournals.begin``): the tools layer would cost
about 100 ms of kernel start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pi_kernel.ai.messages import AssistantMessage, ToolCall

if TYPE_CHECKING:
    from pi_kernel.tools.definition import ToolContext
    from pi_kernel.tools.turn_journal import TurnJournal

LIMIT = 20
"""Kept conversations, and kept turn journals."""


@dataclass(frozen=True)
class Version:
    messages: list[Any]
    cells: dict[str, int]
    """Cell id → first message of its turn, as they were."""
    reason: str
    """What replaced it: ``re-run of a cell``, ``%pi reset``, ..."""
    kept_at: float = field(default_factory=time.time)

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.kept_at))
        return f"{len(self.messages)} messages, kept at {when} before {self.reason}"


class ConversationVersions:
    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._versions: list[Version] = []
        """Oldest first."""

    def keep(self, messages: list[Any], cells: dict[str, int], reason: str) -> None:
        """Keep a conversation about to be replaced (an empty one is not worth keeping)."""
        if not messages:
            return
        self._versions.append(Version(list(messages), dict(cells), reason))
        del self._versions[: -self.limit]

    def take(self, number: int = 1) -> Version:
        """Remove and return the ``number``-th newest version; ``IndexError`` says what exists."""
        if not 1 <= number <= len(self._versions):
            kept = len(self._versions)
            raise IndexError(f"no kept conversation number {number} (kept: {kept})" if kept else "nothing to undo")
        return self._versions.pop(-number)

    def describe(self) -> str:
        rows = [f"{number}: {version.describe()}" for number, version in enumerate(reversed(self._versions), 1)]
        return "\n".join(rows) if rows else "nothing to undo"


def was_compacted(before: list[Any] | None, after: list[Any], replaced: int) -> bool:
    """Whether ``after`` (a summary, then kept messages) is ``before`` with its first ``replaced`` summarised."""
    if before is None:
        return False
    kept = after[1:]
    return len(before) == replaced + len(kept) and before[replaced:] == kept


logger = logging.getLogger("pi_kernel")

JOURNALED_TOOLS = frozenset(
    {"python", "write", "edit", "read", "inspect", "cells", "edit_cell", "insert_cells", "delete_cells", "run_cells"}
)
"""Tools whose effects the journal records (or that change nothing)."""


class UndoHost(Protocol):
    """What an undo reads and sets of the session."""

    undo_news: str | None

    @property
    def tool_context(self) -> ToolContext: ...

    @property
    def turn_journals(self) -> TurnJournals: ...


class TurnJournals:
    def __init__(self) -> None:
        self._journals: list[TurnJournal] = []
        """Oldest first."""
        self._offer: tuple[TurnJournal, Any] | None = None
        """The newest turn's "Undo this turn" button (a widget view's ``UndoOffer``) and its journal."""

    def offer(self, view: object, journal: TurnJournal, host: UndoHost) -> None:
        """Show ``view``'s Undo button for ``journal``'s turn; the previous one becomes a line naming ``%pi undo``."""
        self.retire_offer()
        offer_undo = getattr(view, "offer_undo", None)
        if not callable(offer_undo) or journal not in self._journals or journal.undone:
            return

        def on_click(show: Callable[[str], None]) -> None:
            def show_later(first: str) -> Callable[[str], None]:
                show(first)
                return show

            text = undo_turn(host, journal, show_later)
            if text:
                show(text)

        self._offer = (journal, offer_undo(on_click))

    def retire_offer(self, journal: TurnJournal | None = None, text: str | None = None) -> None:
        """Replace the Undo button (only if it is ``journal``'s, when given) by ``text`` or its plain line."""
        if self._offer is None or (journal is not None and self._offer[0] is not journal):
            return
        _journal, offer = self._offer
        self._offer = None
        try:
            offer.retire() if text is None else offer.retire(text)
        except Exception:
            logger.exception("pi_kernel: retiring an undo button failed")

    def begin(self, memory_budget: int, label: str) -> TurnJournal:
        """A journal for a new turn; older journals' copies give way while they hold over half the budget."""
        from pi_kernel.tools.turn_journal import TurnJournal

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
        for message in messages:
            for call in message.content if isinstance(message, AssistantMessage) else []:
                if not isinstance(call, ToolCall) or call.name in JOURNALED_TOOLS:
                    continue
                command = str(call.arguments.get("command", ""))
                shown = command if len(command) <= 60 else command[:57] + "..."
                what = (
                    f"bash `{shown}`: what a command did" if call.name == "bash" else f"{call.name}: what this tool did"
                )
                journal.note(f"call:{call.id}", f"{what} is not undone")
        if journal.is_empty() and journal in self._journals:
            self._journals.remove(journal)

    def newest(self) -> TurnJournal | None:
        """The newest turn with effects not undone yet."""
        return next((journal for journal in reversed(self._journals) if not journal.undone), None)

    def describe(self) -> str:
        newest_first = [journal for journal in reversed(self._journals) if not journal.undone]
        return "\n".join(f"turn {journal.label!r}: {journal.summary()}" for journal in newest_first)


def undo_turn(
    host: UndoHost, journal: TurnJournal | None, show_later: Callable[[str], Callable[[str], None]]
) -> str | None:
    """Undo the turn of ``journal`` (``None``: the newest with effects left); returns the report, ``None``
    when there is no turn. Notebook changes need the bridge's answers: a task on the running loop undoes
    them, and ``show_later(text)`` shows a line now and returns how to replace it with the final report
    (the return value is then ``""``)."""
    journal = journal or host.turn_journals.newest()
    if journal is None:
        return None
    text = _undo(journal, host.tool_context, show_later)
    host.undo_news = text or f"the turn {journal.label!r}: its notebook changes were undone"
    host.turn_journals.retire_offer(journal, "This turn was undone (%pi undo).")
    return text


def _undo(journal: TurnJournal, context: ToolContext, show_later: Callable[[str], Callable[[str], None]]) -> str:
    head = f"Undid the turn {journal.label!r}."
    if journal.undone:
        return f"The turn {journal.label!r} was undone already."
    report = journal.revert(context.namespace)
    if not journal.notebook_changes:
        return f"{head}\n{report.text()}"
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no loop on this thread (a plain IPython shell): nothing can answer anyway
        asyncio.run(journal.revert_notebook(context.notebook, report))
        return f"{head}\n{report.text()}"
    update = show_later(f"{head}\n{report.text()}\nUndoing the notebook changes…")

    async def notebook_part() -> None:
        final = await journal.revert_notebook(context.notebook, report)
        update(f"{head}\n{final.text()}")

    task = loop.create_task(notebook_part())
    _UNDOING.add(task)  # the loop keeps only a weak reference
    task.add_done_callback(_UNDOING.discard)
    return ""


_UNDOING: set[asyncio.Task[None]] = set()
