"""What the agent sees of the notebook's executed cells: their history (``CellHistory``, for the ``cells``
tool) and the automatic notebook context of each turn (``NotebookContext``).

**History.** Each cell run (not silent ones, not ``%%pi`` cells) is kept with its execution count,
source, a one-line summary of its result and, for a cell that raised, the exception's type, message and
last frames. It is wired up at kernel start, so only the standard library and IPython's pretty printer
load with this module (``pi_kernel.tools.builtin.describe`` is imported lazily, in the context's
functions). A result's summary is what IPython's pretty printer shows, never a full ``repr``. It, an
exception's ``str()`` and its traceback are the user's code: they run with a time limit
(``SafeCaller``); nothing else of the exception runs. The hook never raises.

**Context.** The first model request of each ``%%pi`` turn carries it, as a second text part of the
turn's user message, so transcripts and saved sessions show what the model was told: within
``CONTEXT_LIMIT``, the cells run since the previous turn (newest first to fit), their errors, and the
variables new, rebound or changed in shape. The first turn (and the first after ``%pi reset``) sees
everything; a re-run ``%%pi`` cell is told its news again; a turn that never reached the conversation
leaves its news for the next. ``%pi context on|off``, ``c.PiKernel.notebook_context``,
``PI_NOTEBOOK_CONTEXT=0``.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from IPython.lib.pretty import pretty

from pi_kernel.ai.user_objects import CallTimeout, SafeCaller, class_name, exact_text

MAX_CELLS = 200
OUTPUT_CHARS = 200
SUMMARY_ITEMS = 20
"""Items of a container result shown in its summary."""
TRACEBACK_FRAMES = 3
_INTERNAL_PATHS = ("/IPython/core/", "/ipykernel/", "/pi_kernel/kernel/")
_CALLER = SafeCaller(1.0)
"""Runs the user's ``repr``/``str`` for the record (a helper thread, started at the first use)."""


@dataclass
class CellError:
    type: str
    message: str
    frames: list[str] = field(default_factory=list)
    """The traceback's last frames, plain text (no ANSI colours)."""


@dataclass
class CellRecord:
    """One executed cell, as the notebook ran it (the ``cells`` tool's ``CellLike``)."""

    execution_count: int | None
    source: str
    output: str = ""
    """A short summary of its result (its ``repr``, on one line, cut)."""
    error: CellError | None = None


def output_summary(value: Any) -> str:
    """The result as IPython's pretty printer shows it (costs no more than showing it did); one line, cut."""
    try:
        text = _CALLER.call(lambda: exact_text(pretty(value, max_seq_length=SUMMARY_ITEMS)))
    except CallTimeout:
        return f"<{class_name(type(value))}: repr took longer than 1 s>"
    except BaseException as error:  # noqa: BLE001 - a broken repr is a fact about the result
        return f"<{class_name(type(value))}: repr failed with {class_name(type(error))}>"
    flat = " ".join(text[: OUTPUT_CHARS * 4].split())
    return flat if len(flat) <= OUTPUT_CHARS else flat[: OUTPUT_CHARS - 3] + "..."


_TRACEBACK = BaseException.__dict__["__traceback__"]


def _frames(error: BaseException) -> list[str]:
    frames = [
        frame
        for frame in traceback.extract_tb(_TRACEBACK.__get__(error))
        if not any(part in frame.filename.replace("\\", "/") for part in _INTERNAL_PATHS)
    ]
    chosen = frames[-TRACEBACK_FRAMES:]
    if len(frames) > TRACEBACK_FRAMES:  # the cell's own line first, then where it ended (in a library, often)
        chosen = [frames[0], *frames[-(TRACEBACK_FRAMES - 1) :]]
    return traceback.format_list(chosen)


def _message(error: BaseException) -> str:
    try:
        return str(_CALLER.call(lambda: exact_text(str(error))))
    except BaseException:  # noqa: BLE001 - IPython shows such an error too
        return "<exception str() failed>"


def cell_error(error: BaseException) -> CellError:
    """Type (read statically), message and frames; the traceback is read through ``BaseException``'s own
    descriptor, ``str(error)`` and the frames (a module's loader) are the user's code: on the ``SafeCaller``."""
    try:
        frames = list(_CALLER.call(lambda: _frames(error)))
    except BaseException:  # noqa: BLE001 - a hostile exception: its type and message are still news
        frames = []
    return CellError(class_name(type(error)), _message(error), frames)


class CellHistory:
    def __init__(self) -> None:
        self._records: list[tuple[int, CellRecord]] = []
        self.seq = 0
        """How many cells were recorded so far (the mark of the next one)."""
        self._lock = threading.Lock()

    def post_run_cell(self, result: Any) -> None:
        info = getattr(result, "info", None)
        source = getattr(info, "raw_cell", None) or ""
        if getattr(info, "silent", False) or not source.strip() or source.lstrip().startswith("%%pi"):
            return
        error = getattr(result, "error_in_exec", None)  # never ``or``: that runs the exception's ``__bool__``
        if error is None:
            error = getattr(result, "error_before_exec", None)
        value = getattr(result, "result", None)
        output = output_summary(value) if value is not None else ""
        failure = cell_error(error) if isinstance(error, BaseException) else None
        self.add(CellRecord(getattr(result, "execution_count", None), source, output, failure))

    def add(self, record: CellRecord) -> None:
        with self._lock:
            self._records.append((self.seq, record))
            self.seq += 1
            del self._records[:-MAX_CELLS]

    def recent(self, last: int) -> list[CellRecord]:
        """The ``last`` most recent cells, oldest first."""
        with self._lock:
            return [record for _seq, record in self._records[-last:]] if last > 0 else []

    def since(self, mark: int) -> list[CellRecord]:
        """The cells recorded at or after ``mark`` (a past ``seq``), oldest first."""
        with self._lock:
            return [record for seq, record in self._records if seq >= mark]


CONTEXT_LIMIT = 2000
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
        """A turn starts for ``cell_id`` (``rerun``: its previous turn was cut out, so the mark goes back to where
        it began); returns the state before, for ``restore``."""
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
        """The context text for the turn starting now (``None``: off or nothing changed)."""
        from pi_kernel.tools.builtin.describe import clip

        cells = self.history.since(self._mark)
        self._mark = self.history.seq
        if not self.enabled:
            return None
        changed = self._changed_variables(namespace or {}, hidden)
        if not cells and not changed:
            return None
        more = len(changed) - MAX_VARIABLES
        variables = ["New or changed variables:", *changed[:MAX_VARIABLES]] if changed else []
        variables += [f"... and {more} more (inspect lists them)"] if more > 0 else []
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
        self._mark, self._snapshot = 0, None
        self._starts.clear()

    def _changed_variables(self, namespace: Mapping[str, Any], hidden: Iterable[str]) -> list[str]:
        try:
            now = _fingerprints(namespace, hidden)
        except Exception:  # noqa: BLE001 - a hostile namespace never breaks a turn: no variables then
            return []
        before = self._snapshot or {}
        return [f"- {name}: {print_[1]}" for name, print_ in now.items() if before.get(name) != print_]


def _cell_block(record: CellRecord, source_chars: int) -> str:
    from pi_kernel.tools.builtin.describe import clip

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
    from pi_kernel.tools.builtin.describe import user_variables, variable_summary

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
