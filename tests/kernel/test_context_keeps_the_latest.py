"""The notebook context keeps the LATEST cells when more than ~2 KB of cells ran since the previous turn:
the one that just failed (what "why did that fail? fix it" is about) and the variables section survive.
"""

from __future__ import annotations

from pi_kernel.kernel.notebook_context import CellError, CellHistory, CellRecord, NotebookContext


def test_the_cell_that_just_failed_survives_the_size_limit() -> None:
    history = CellHistory()
    for count in range(1, 31):  # an afternoon of ordinary cells since the agent's previous turn
        source = f"step_{count} = load_and_clean('part_{count}.csv', columns=COLUMNS)  # {'.' * 60}"
        history.add(CellRecord(count, source))
    history.add(CellRecord(31, "total = revenue / count", error=CellError("ZeroDivisionError", "division by zero")))
    text = NotebookContext(history).take({"total_rows": 12})
    assert text is not None and len(text) <= 2000
    assert "ZeroDivisionError" in text
    assert "total_rows" in text


def test_the_cells_kept_are_the_newest_in_order() -> None:
    history = CellHistory()
    for count in range(1, 41):
        history.add(CellRecord(count, f"value_{count} = {count}  # {'.' * 100}"))
    text = NotebookContext(history).take({})
    assert text is not None and len(text) <= 2000
    assert "In [40]" in text and "In [1]:" not in text and "older cell(s) left out" in text
    assert text.index("In [39]") < text.index("In [40]")
