"""Which part of the conversation each ``%%pi`` cell owns.

Every ``%%pi`` cell is one turn, keyed by the notebook's cell id. Re-running a
cell replaces its turn and everything after it (the conversation is cut back
to where that cell's turn began, and later cells' marks are forgotten); a new
cell appends. Cells without an id (consoles) always append.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CellTurns:
    starts: dict[str, int] = field(default_factory=dict)
    """Cell id → index of the first message of that cell's turn."""

    def begin(self, cell_id: str | None, message_count: int) -> int:
        """Where the turn of ``cell_id`` starts now: the caller cuts the conversation to that length."""
        start = message_count
        if cell_id and cell_id in self.starts:
            start = min(self.starts[cell_id], message_count)
            self.starts = {key: value for key, value in self.starts.items() if value < start}
        else:
            # Marks beyond the conversation (after a reset elsewhere, say) mean nothing any more.
            self.starts = {key: value for key, value in self.starts.items() if value <= message_count}
        if cell_id:
            self.starts[cell_id] = start
        return start

    def compacted(self, replaced: int) -> None:
        """The first ``replaced`` messages became one summary: later marks move back; cells whose turn
        began inside the summarised part are forgotten (re-running one appends)."""
        self.starts = {key: value - replaced + 1 for key, value in self.starts.items() if value >= replaced}

    def clear(self) -> None:
        self.starts.clear()
