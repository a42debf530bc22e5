"""What the ``cells`` tool reads of the notebook's executed cells: ``CellSource`` and its records.

The tools layer does not know the kernel: the kernel's ``cell_history.CellHistory`` has this shape and
is given to the tools as ``ToolContext.cell_history``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


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
