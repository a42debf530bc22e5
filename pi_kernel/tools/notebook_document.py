"""The notebook as the tools see it: the live document (``NotebookDocument``, ``CellInfo``, its errors, cell
refs) and the executed cells (``CellSource``).

The kernel implements both: ``notebook_bridge`` over the ``pi.notebook`` comm of a front-end extension
(``ToolContext.notebook``, ``None`` where no front-end connected), ``notebook_context.CellHistory``
(``ToolContext.cell_history``). Every error is a ``NotebookError`` whose text the model (or the user) can act
on. A cell ``ref`` is a cell id or ``#N`` (1-based position, as on screen).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

CellType = Literal["code", "markdown", "raw"]


@dataclass(frozen=True)
class CellInfo:
    id: str
    index: int
    """0-based; shown to the model as ``#index+1``."""
    type: CellType
    source: str
    execution_count: int | None
    outputs: str
    """A short summary of the outputs."""
    source_length: int
    truncated: bool
    """``source`` was cut to the reading's ``max_chars``."""

    @property
    def position(self) -> str:
        return f"#{self.index + 1}"

    def title(self) -> str:
        """``#N`` and the first line of the source (shown on approval cards)."""
        first = next((line.strip() for line in self.source.splitlines() if line.strip()), "")
        first = first if len(first) <= 60 else first[:59] + "…"
        return f"{self.position} ({self.type}) {first}".rstrip()


class NotebookError(Exception):
    """A notebook operation failed; the text says what to do."""


class StaleCell(NotebookError):
    """The cell changed since it was read."""


class NoSuchCell(NotebookError):
    pass


class BridgeGone(NotebookError):
    """The front-end closed, disconnected or did not answer in time."""


class OutcomeUnknown(BridgeGone):
    """A change was sent but its reply never came: the front-end may or may not have applied it."""


STALE_TEXT = "The cell changed while waiting for approval; read it again (cells) and redo the change."


class NotebookDocument(Protocol):
    @property
    def running_cell_id(self) -> str | None:
        """The ``%%pi`` cell executing now (a plain attribute does too)."""

    async def read(self, cell_ids: list[str] | None = None, max_chars: int | None = None) -> list[CellInfo]: ...
    async def edit(self, cell_id: str, expected: str, new: str) -> None: ...
    async def insert(self, index: int, cells: list[tuple[str, str]]) -> list[str]: ...
    async def delete(self, cell_ids: list[str], expected: list[str]) -> None: ...
    async def set_outputs(self, cell_id: str, outputs: list[dict], execution_count: int | None) -> None: ...
    async def highlight(self, cell_id: str | None) -> None: ...


_POSITION = re.compile(r"#[ \t]*([0-9]+)")
"""``#N``: ASCII digits only (``#٣`` is not ``#3``)."""


def resolve_ref(ref: str, cells: Sequence[CellInfo]) -> CellInfo:
    """The cell ``ref`` names among ``cells`` (the whole notebook, in order): a cell id, else ``#N``.

    An exact id comes first, so a cell whose id is literally ``#3`` is reachable by it (``#3`` names the
    third cell only when no cell has that id). An id two cells share names neither: it is refused."""
    text = str(ref).strip()
    same = [cell for cell in cells if cell.id == text]
    if len(same) > 1:
        raise NoSuchCell(
            f'{len(same)} cells have the id "{text[:80]}" ({", ".join(cell.position for cell in same)}), so it '
            "names no single cell; ask the user to fix the notebook's cell ids (save and reload it)."
        )
    if same:
        return same[0]
    match = _POSITION.fullmatch(text)
    if match:
        number = int(match.group(1))
        if 1 <= number <= len(cells):
            cell = cells[number - 1]
            twins = [other.position for other in cells if other.id == cell.id and other is not cell]
            if twins:
                raise NoSuchCell(
                    f"Cell {cell.position} shares its id with {', '.join(twins)}, so a change to it could reach "
                    "the other cell: ask the user to fix the notebook's cell ids (save and reload it)."
                )
            return cell
        raise NoSuchCell(
            f"No cell {text}: the notebook has {len(cells)} cell(s), #1 to #{len(cells)}. Use cells to see them."
            if cells
            else f"No cell {text}: the notebook has no cells."
        )
    raise NoSuchCell(f'No cell with id "{text[:80]}". Refer to a cell as #N (its position) or by its id; use cells.')


def check_not_running(cell: CellInfo, document: NotebookDocument, action: str) -> None:
    """The running ``%%pi`` cell cannot be edited or deleted."""
    if document.running_cell_id is not None and cell.id == document.running_cell_id:
        raise NotebookError(
            f"Cell {cell.position} is the %%pi cell running this turn; it cannot be {action}. "
            "Change another cell or insert a new one."
        )


class ErrorLike(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def frames(self) -> list[str]: ...


class CellLike(Protocol):
    """One executed cell: execution count, source, a summary of its output, its error."""

    @property
    def execution_count(self) -> int | None: ...
    @property
    def source(self) -> str: ...
    @property
    def output(self) -> str: ...
    @property
    def error(self) -> ErrorLike | None: ...


class CellSource(Protocol):
    def recent(self, last: int) -> Sequence[CellLike]: ...
