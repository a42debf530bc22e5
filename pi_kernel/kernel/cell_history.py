"""The notebook's executed cells as the agent sees them (the ``cells`` tool and the notebook context).

``CellHistory`` listens to IPython's ``post_run_cell``: each cell run (not
silent ones, not ``%%pi`` cells, which are already in the conversation) is
kept with its execution count, source, a one-line summary of its result and,
for a cell that raised, the exception's type, message and the last frames of
its traceback (plain text, IPython's own frames left out). It keeps the
latest ``MAX_CELLS``; ``seq`` counts every cell ever recorded, so the
notebook context can ask for "the cells since mark N".

Only the standard library and IPython's pretty printer here: the history
is wired up at kernel start, which must stay as fast as a stock kernel's. A
result's summary is what IPython's pretty printer shows (``_repr_pretty_``,
the first items of a big container), cut short: never a full ``repr`` that
IPython did not run; it and an exception's ``str()`` are the user's code, so
they run with a time limit (``SafeCaller``, one second), as does reading the
traceback; nothing else of the exception runs (no ``__bool__``, no
``__getattribute__``). The hook never raises (an exception whose ``str()``
fails is recorded by its type).
"""

from __future__ import annotations

import threading
import traceback
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
    """The result as IPython's pretty printer shows it (``_repr_pretty_``, at most ``SUMMARY_ITEMS`` items of a
    container), so recording it costs no more than showing it did; one line, cut."""
    try:
        text = _CALLER.call(lambda: exact_text(pretty(value, max_seq_length=SUMMARY_ITEMS)))
    except CallTimeout:
        return f"<{class_name(type(value))}: repr took longer than 1 s>"
    except BaseException as error:  # noqa: BLE001 - a broken repr is a fact about the result
        return f"<{class_name(type(value))}: repr failed with {class_name(type(error))}>"
    flat = " ".join(text[: OUTPUT_CHARS * 4].split())
    return flat if len(flat) <= OUTPUT_CHARS else flat[: OUTPUT_CHARS - 3] + "..."


def is_pi_cell(source: str) -> bool:
    return source.lstrip().startswith("%%pi")


def cell_error(error: BaseException) -> CellError:
    """Type, message, the cell's own frame and the traceback's last frames (IPython's own frames left out).

    Only ``str(error)`` is the user's code (with a time limit): the type is read statically and the
    traceback through ``BaseException``'s own descriptor, never the class's ``__getattribute__``."""
    return CellError(class_name(type(error)), _message(error), _frames(error))


_TRACEBACK = BaseException.__dict__["__traceback__"]


def _frames(error: BaseException) -> list[str]:
    frames = [frame for frame in traceback.extract_tb(_TRACEBACK.__get__(error)) if not _internal(frame.filename)]
    chosen = frames[-TRACEBACK_FRAMES:]
    if len(frames) > TRACEBACK_FRAMES:  # the cell's own line first, then where it ended (in a library, often)
        chosen = [frames[0], *frames[-(TRACEBACK_FRAMES - 1) :]]
    return traceback.format_list(chosen)


def _message(error: BaseException) -> str:
    try:
        return str(_CALLER.call(lambda: exact_text(str(error))))
    except BaseException:  # noqa: BLE001 - IPython shows such an error too
        return "<exception str() failed>"


def _safe_cell_error(error: BaseException) -> CellError:
    """``cell_error`` with every step bounded: the frames are read on the ``SafeCaller`` too (reading a
    source line may ask a module's loader, the user's code), the message by ``_message``."""
    try:
        frames = list(_CALLER.call(lambda: _frames(error)))
    except BaseException:  # noqa: BLE001 - a hostile exception: its type and message are still news
        frames = []
    return CellError(class_name(type(error)), _message(error), frames)


def _internal(filename: str) -> bool:
    return any(part in filename.replace("\\", "/") for part in _INTERNAL_PATHS)


class CellHistory:
    def __init__(self) -> None:
        self._records: list[tuple[int, CellRecord]] = []
        self.seq = 0
        """How many cells were recorded so far (the mark of the next one)."""
        self._lock = threading.Lock()

    def post_run_cell(self, result: Any) -> None:
        """IPython's ``post_run_cell`` event."""
        info = getattr(result, "info", None)
        source = getattr(info, "raw_cell", None) or ""
        if getattr(info, "silent", False) or not source.strip() or is_pi_cell(source):
            return
        error = getattr(result, "error_in_exec", None)  # never ``or``: that runs the exception's ``__bool__``
        if error is None:
            error = getattr(result, "error_before_exec", None)
        value = getattr(result, "result", None)
        output = output_summary(value) if value is not None else ""
        record = CellRecord(
            getattr(result, "execution_count", None),
            source,
            output,
            _safe_cell_error(error) if isinstance(error, BaseException) else None,
        )
        self.add(record)

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
