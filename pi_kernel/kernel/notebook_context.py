"""The automatic notebook context: what changed in the notebook since the agent's previous turn.

The first model request of each ``%%pi`` turn carries it: the turn's user
message is the prompt as written, then a second text part (``Notebook
context ...``); a reader of the first part (a transcript, a test) still
finds the prompt there. It is part of the conversation, so the
transcript, ``%pi history`` and saved sessions show what the model was told.
What it says (within ``CONTEXT_LIMIT`` characters, filled from the newest cell
back, with room kept for the variables): the cells run since the previous turn
(execution count and shortened source), the error of any that raised (type
and message), and the variables that are new or were rebound or changed shape
since then (type, shape, a DataFrame's columns). Nothing changed: no context
part. The first turn of a session (and the first after
``%pi reset``) sees everything so far. Re-running a ``%%pi`` cell cuts its
previous turn (and the context it carried) out of the conversation, so the
re-run is told the same news again; a turn that never reached the
conversation (or a re-run that was undone) leaves the news for the next one.

On by default; ``%pi context on|off``, ``c.PiKernel.notebook_context``, or
``PI_NOTEBOOK_CONTEXT=0`` switch it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from pi_kernel.ai.user_objects import SafeCaller
from pi_kernel.kernel.cell_history import CellHistory, CellRecord
from pi_kernel.tools.builtin.describe import clip, user_variables, variable_summary

CONTEXT_LIMIT = 2000
"""Characters of the context part (about 2 KB)."""
CONTEXT_HEADER = "Notebook context (what changed in the notebook since your previous turn):"
SOURCE_CHARS = 300
MAX_VARIABLES = 30
LIBRARY_BUDGET = 1.0
"""Seconds of library reads (a DataFrame's shape and columns) in one context; then types only."""
LIBRARY_CALL_TIMEOUT = 0.5
ContextState = tuple[int, "dict[str, tuple[int, str]] | None"]
"""The history mark and the variables' fingerprints the next context is measured from."""


class NotebookContext:
    def __init__(self, history: CellHistory, enabled: bool = True, limit: int = CONTEXT_LIMIT) -> None:
        self.history = history
        self.enabled = enabled
        self.limit = limit
        self._mark = 0
        self._snapshot: dict[str, tuple[int, str]] | None = None
        self._starts: dict[str, ContextState] = {}
        """Cell id → the mark and snapshot before that cell's turn (a re-run is told the same news again)."""

    def begin(self, cell_id: str | None, rerun: bool) -> ContextState:
        """A turn starts for ``cell_id``; ``rerun``: the session cut the cell's previous turn (and the context it
        carried) out of the conversation, so the mark and snapshot go back to where that turn began. Returns
        the state before, for ``restore`` when the turn does not take its place."""
        before = (self._mark, self._snapshot)
        if rerun and cell_id in self._starts:
            self._mark, self._snapshot = self._starts[cell_id]
        if cell_id:
            self._starts[cell_id] = (self._mark, self._snapshot)
        return before

    def restore(self, state: ContextState) -> None:
        """The turn did not reach the conversation (or a re-run was undone): its news is news again."""
        self._mark, self._snapshot = state

    def take(self, namespace: Mapping[str, Any] | None, hidden: Iterable[str] = ()) -> str | None:
        """The context text for the turn starting now (``None``: off or nothing changed); the cells
        it mentions are not mentioned again."""
        cells = self.history.since(self._mark)
        self._mark = self.history.seq
        if not self.enabled:
            return None
        changed = self._changed_variables(namespace or {}, hidden)
        if not cells and not changed:
            return None
        variables: list[str] = []
        if changed:
            variables.append("New or changed variables:")
            variables.extend(changed[:MAX_VARIABLES])
            if len(changed) > MAX_VARIABLES:
                variables.append(f"... and {len(changed) - MAX_VARIABLES} more (inspect lists them)")
        variable_text = clip("\n".join(variables), self.limit // 3) if variables else ""
        room = self.limit - len(CONTEXT_HEADER) - len(variable_text) - 2
        parts = [CONTEXT_HEADER, *_cell_lines(cells, room), variable_text]
        return clip("\n".join(part for part in parts if part), self.limit)

    def after_turn(self, namespace: Mapping[str, Any] | None, hidden: Iterable[str] = ()) -> None:
        """Remember the namespace as the agent left it (what its own code defined is no news next time)."""
        self._mark = self.history.seq
        try:
            self._snapshot = _fingerprints(namespace or {}, hidden)
        except Exception:  # noqa: BLE001 - a hostile namespace: the next turn is told every variable
            self._snapshot = None

    def forget(self) -> None:
        """The conversation was reset: the next turn is told everything again, as a first turn is."""
        self._mark = 0
        self._snapshot = None
        self._starts.clear()

    def _changed_variables(self, namespace: Mapping[str, Any], hidden: Iterable[str]) -> list[str]:
        try:
            now = _fingerprints(namespace, hidden)
        except Exception:  # noqa: BLE001 - a hostile namespace never breaks a turn: no variables then
            return []
        before = self._snapshot or {}
        return [f"- {name}: {print_[1]}" for name, print_ in now.items() if before.get(name) != print_]


def _cell_block(record: CellRecord, source_chars: int) -> str:
    count = record.execution_count if record.execution_count is not None else " "
    text = f"In [{count}]: {_shorten(record.source, source_chars)}"
    if record.error is not None:
        text += f"\n  raised {record.error.type}: {clip(record.error.message, 300)}"
    return text


def _cell_lines(cells: list[CellRecord], room: int) -> list[str]:
    """The cells within ``room`` characters, filled from the newest back (the cell that just failed is what a
    turn is most likely about); a failed cell that does not fit whole keeps its error with a shorter source."""
    if not cells:
        return []
    chosen: list[str] = []
    used = len("Cells run:") + 60  # the note on left-out cells
    for record in reversed(cells):
        block = _cell_block(record, SOURCE_CHARS)
        if used + len(block) + 1 > room and record.error is not None:
            block = _cell_block(record, 60)
        if used + len(block) + 1 > room:
            continue
        chosen.append(block)
        used += len(block) + 1
    left_out = len(cells) - len(chosen)
    head = ["Cells run:"] + ([f"({left_out} older cell(s) left out; the cells tool shows them)"] if left_out else [])
    return head + list(reversed(chosen))


def _fingerprints(namespace: Mapping[str, Any], hidden: Iterable[str]) -> dict[str, tuple[int, str]]:
    """Name → (id, ``type shape columns``), read statically (no method of the user's classes runs: a
    proxy whose ``__getattribute__`` or metaclass ``__module__`` hangs costs nothing); a numpy/pandas-like
    object's shape and columns are library code, read with a time limit within ``LIBRARY_BUDGET``."""
    prints: dict[str, tuple[int, str]] = {}
    caller = SafeCaller(LIBRARY_CALL_TIMEOUT)
    deadline = time.monotonic() + LIBRARY_BUDGET
    try:
        for name, value in user_variables(namespace, hidden):
            guarded = caller if time.monotonic() < deadline else None
            try:
                summary = variable_summary(value, guarded)
            except Exception:  # noqa: BLE001 - an object whose shape cannot be read
                summary = variable_summary(value)
            prints[name] = (id(value), summary)
    finally:
        caller.close()
    return prints


def _shorten(source: str, chars: int = SOURCE_CHARS) -> str:
    text = source.strip()
    if len(text) <= chars:
        return text.replace("\n", "\n    ")
    return (text[: chars - 20] + f" ... [{len(text) - chars + 20} more characters]").replace("\n", "\n    ")
