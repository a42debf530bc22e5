"""Conversations that were replaced, kept so that ``%pi undo`` can bring them back.

Whatever drops messages from the conversation keeps the conversation as it
was first (``ConversationVersions.keep``): a re-run ``%%pi`` cell that
replaced its turn and the later ones, a compaction (``%pi compact``, or the
automatic one during a turn), ``%pi reset``, ``%pi load`` and ``%pi undo``
itself. ``%pi undo`` brings back the newest kept version (``%pi
undo N``: the N-th newest, ``%pi undo list`` shows them); the conversation it
replaces is kept in turn, so an undo is never a loss either. The newest
``LIMIT`` versions are kept (they share their message objects with the
conversation: a version costs a list, not a copy of every message).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

LIMIT = 20


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

    def __len__(self) -> int:
        return len(self._versions)


def was_compacted(before: list[Any] | None, after: list[Any], replaced: int) -> bool:
    """Whether ``after`` (a summary, then the kept messages) is ``before`` with its first ``replaced``
    messages summarised: then ``before`` is the conversation the compaction replaced."""
    if before is None:
        return False
    kept = after[1:]
    return len(before) == replaced + len(kept) and before[replaced:] == kept
