"""``TurnJournal``: what a turn's code and file tools changed is reverted, and what cannot be is named."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pi_kernel.tools.notebook_document import BridgeGone, CellInfo, StaleCell
from pi_kernel.tools.turn_journal import FIRST, NotebookChange, TurnJournal, UndoReport


def run(journal: TurnJournal, namespace: dict[str, Any], code: str) -> None:
    token = journal.before_code(namespace, code)
    try:
        exec(code, namespace)
    finally:
        journal.after_code(namespace, token)


def test_created_rebound_and_deleted_names_get_their_old_references_back() -> None:
    kept, gone = object(), [1]
    namespace: dict[str, Any] = {"a": kept, "b": gone, "c": 3}
    journal = TurnJournal()
    run(journal, namespace, "a = 'new'\ndel b\nd = 4")
    run(journal, namespace, "c = c + 1")
    report = journal.revert(namespace)
    assert namespace["a"] is kept and namespace["b"] is gone and namespace["c"] == 3
    assert "d" not in namespace
    assert report.restored == ["4 variables"] and report.not_restored == []


def test_objects_changed_in_place_come_back_from_copies() -> None:
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
    items, table, seen, array = [1, 2], {"k": 1}, {1}, np.zeros(3)
    namespace: dict[str, Any] = {"df": frame, "items": items, "table": table, "seen": seen, "arr": array}
    journal = TurnJournal()
    run(journal, namespace, "df['x'] *= 10\ndf['y'] = 1\nitems.append(3)\ntable['k'] = 2\nseen.add(2)\narr[0] = 5")
    alias = namespace["items"]
    journal.revert(namespace)
    assert namespace["df"].equals(pd.DataFrame({"x": [1.0, 2.0, 3.0]}))
    assert items == [1, 2] and alias is items  # a builtin container is restored in place
    assert table == {"k": 1} and seen == {1} and not namespace["arr"].any()


def test_a_rebound_frame_changed_in_place_first_comes_back_as_it_was() -> None:
    frame = pd.DataFrame({"x": [1, 2]})
    namespace: dict[str, Any] = {"df": frame}
    journal = TurnJournal()
    run(journal, namespace, "df.loc[0, 'x'] = 99\ndf = df.head(1)")
    journal.revert(namespace)
    assert namespace["df"]["x"].tolist() == [1, 2]


def test_an_object_over_the_budget_is_named_and_not_copied() -> None:
    big = np.zeros(1000)
    namespace: dict[str, Any] = {"big": big, "small": [1]}
    journal = TurnJournal(memory_budget=4000)
    run(journal, namespace, "big[0] = 1\nsmall.append(2)")
    report = journal.revert(namespace)
    assert namespace["big"][0] == 1 and namespace["small"] == [1]
    assert any(line.startswith("big (a ndarray, 7.8 KB): over PI_UNDO_MEMORY") for line in report.not_restored)


def test_user_objects_are_named_never_sized_through_their_own_code() -> None:
    class Hostile:
        def __len__(self) -> int:
            raise AssertionError("called")

        def __repr__(self) -> str:
            raise AssertionError("called")

    namespace: dict[str, Any] = {"h": Hostile()}
    journal = TurnJournal()
    run(journal, namespace, "h.x = 1")
    assert journal.revert(namespace).not_restored == ["h (a Hostile): not copied; any change made to it in place stays"]


def test_a_variable_rebound_by_the_user_after_the_turn_is_left_and_named() -> None:
    namespace: dict[str, Any] = {"a": 1}
    journal = TurnJournal()
    run(journal, namespace, "a = 2")
    namespace["a"] = 3
    report = journal.revert(namespace)
    assert namespace["a"] == 3 and report.not_restored == ["a: changed since the turn; left as it is"]


def test_files_get_their_old_content_back_and_new_files_go(tmp_path: Path) -> None:
    old, new, mine = tmp_path / "old.txt", tmp_path / "sub" / "new.txt", tmp_path / "mine.txt"
    old.write_bytes(b"before\r\n")
    mine.write_text("v1")
    journal = TurnJournal()
    for path in (old, new, mine):
        journal.record_file(path)
    new.parent.mkdir()
    for path in (old, new, mine):
        path.write_text("by the turn")
    journal.finish()
    mine.write_text("by the user")
    report = journal.revert(None)
    assert old.read_bytes() == b"before\r\n" and not new.exists() and mine.read_text() == "by the user"
    assert report.restored == ["2 files"] and report.not_restored == [f"{mine}: changed since the turn; left as it is"]


class FakeNotebook:
    """A notebook document in memory (a cell id → source list) with the bridge's stale checks."""

    def __init__(self, cells: list[tuple[str, str]]) -> None:
        self.cells = list(cells)

    async def edit(self, cell_id: str, expected: str, new: str) -> None:
        index = [cell for cell, _ in self.cells].index(cell_id)
        if self.cells[index][1] != expected:
            raise StaleCell(cell_id)
        self.cells[index] = (cell_id, new)

    async def insert(self, index: int, cells: list[tuple[str, str]]) -> list[str]:
        ids = [f"new{index}{number}" for number in range(len(cells))]
        self.cells[index:index] = [(cell_id, source) for cell_id, (_, source) in zip(ids, cells, strict=True)]
        return ids

    async def delete(self, cell_ids: list[str], expected: list[str]) -> None:
        for cell_id, source in zip(cell_ids, expected, strict=True):
            if (cell_id, source) not in self.cells:
                raise StaleCell(cell_id)
        self.cells = [cell for cell in self.cells if cell[0] not in cell_ids]


def test_notebook_changes_are_undone_newest_first_and_a_user_edit_is_refused() -> None:
    notebook = FakeNotebook([("a", "1"), ("b", "2"), ("c", "3")])
    journal = TurnJournal()
    journal.record_notebook_change(NotebookChange("edit", "a", 0, "code", "1", "one"))
    journal.record_notebook_change(NotebookChange("delete", "c", 2, "code", "3", None))
    journal.record_notebook_change(NotebookChange("insert", "x", 2, "markdown", None, "# x"))
    journal.record_notebook_change(NotebookChange("edit", "b", 1, "code", "2", "two"))
    notebook.cells = [("a", "one"), ("b", "two by the user"), ("x", "# x")]
    report = asyncio.run(journal.revert_notebook(notebook, UndoReport()))
    assert [source for _, source in notebook.cells] == ["1", "two by the user", "3"]
    assert report.restored == ["3 notebook changes"]
    assert report.not_restored == ["cell #2 (b): changed since the turn; your version is kept"]


def test_without_a_notebook_its_changes_are_named() -> None:
    journal = TurnJournal()
    journal.record_notebook_change(NotebookChange("edit", "a", 0, "code", "1", "one"))
    report = asyncio.run(journal.revert_notebook(None, UndoReport()))
    assert report.not_restored == [
        "1 notebook change: no notebook front-end is connected; they are left to undo: "
        "run %pi undo again once the notebook is connected"
    ]


def test_copies_of_objects_the_turn_only_read_are_dropped_at_its_end() -> None:
    namespace: dict[str, Any] = {"df": pd.DataFrame({"x": [1, 2]}), "items": [1], "table": {"a": [1]}}
    journal = TurnJournal()
    run(journal, namespace, "total = df['x'].sum() + len(items) + len(table)")
    run(journal, namespace, "del total")
    assert journal.held > 0
    journal.finish()
    assert journal.held == 0 and journal.is_empty()


def test_a_cell_edited_then_deleted_comes_back_as_it_was_under_its_new_id() -> None:
    notebook = FakeNotebook([("a", "1"), ("b", "2")])
    journal = TurnJournal()
    journal.record_notebook_change(NotebookChange("edit", "b", 1, "code", "2", "two"))
    journal.record_notebook_change(NotebookChange("delete", "b", 1, "code", "two", None))
    notebook.cells = [("a", "1")]
    report = asyncio.run(journal.revert_notebook(notebook, UndoReport()))
    assert notebook.cells == [("a", "1"), ("new10", "2")] and report.not_restored == []


def test_a_proxy_claiming_to_be_a_list_is_named_not_copied() -> None:
    class Proxy:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return list

        def __len__(self) -> int:
            raise AssertionError("called")

        def copy(self) -> Any:
            raise AssertionError("called")

    proxy = Proxy()
    assert isinstance(proxy, list)  # what isinstance would have believed
    namespace: dict[str, Any] = {"p": proxy}
    journal = TurnJournal()
    run(journal, namespace, "p.x = 1")
    assert journal.revert(namespace).not_restored == ["p (a Proxy): not copied; any change made to it in place stays"]


def test_an_object_the_user_changed_in_place_after_the_turn_is_named_and_kept() -> None:
    data, frame, array = [1, 2], pd.DataFrame({"x": [1.0, 2.0]}), np.zeros(3)
    namespace: dict[str, Any] = {"data": data, "df": frame, "arr": array, "mine": [1]}
    journal = TurnJournal()
    run(journal, namespace, "data.append(3)\ndf.loc[0, 'x'] = 5.0\narr[0] = 1\nmine.append(2)")
    journal.finish()
    data.append("USER")
    namespace["df"].loc[1, "x"] = -1.0
    namespace["arr"][1] = 7
    report = journal.revert(namespace)
    assert data == [1, 2, 3, "USER"] and namespace["df"]["x"].tolist() == [5.0, -1.0]
    assert namespace["arr"].tolist() == [1.0, 7.0, 0.0] and namespace["mine"] == [1]
    assert report.restored == ["1 object changed in place"]
    assert sorted(report.not_restored) == [
        f"{name}: changed in place since the turn; your version is kept" for name in ("arr", "data", "df")
    ]


def test_globals_a_called_function_changes_come_back_and_calls_out_are_named() -> None:
    namespace: dict[str, Any] = {"other": {"k": "v"}}
    exec("def touch():\n    other['k'] = 'changed'\n", namespace)
    journal = TurnJournal()
    run(journal, namespace, "touch()")
    run(journal, namespace, "total = len(other) + sum([1, 2])")
    journal.finish()
    report = journal.revert(namespace)
    assert namespace["other"] == {"k": "v"}
    assert report.not_restored == [
        "code `touch()`: effects outside the variables it names — through called functions, files, "
        "databases — are not undone"
    ]


def test_with_no_memory_for_copies_the_names_not_copied_are_one_line() -> None:
    namespace: dict[str, Any] = {"a": [1], "b": {"k": 1}, "c": {2}}
    journal = TurnJournal(memory_budget=0)
    run(journal, namespace, "n = len(a) + len(b) + len(c)")
    report = journal.revert(namespace)
    assert len(report.not_restored) == 1
    assert report.not_restored[0].startswith("a (a list, ") and "c (a set, " in report.not_restored[0]


class GoneNotebook(FakeNotebook):
    """The bridge answers the first ``answers`` requests, then is gone."""

    def __init__(self, cells: list[tuple[str, str]], answers: int) -> None:
        super().__init__(cells)
        self.answers = answers

    async def edit(self, cell_id: str, expected: str, new: str) -> None:
        if self.answers <= 0:
            raise BridgeGone("the notebook front-end did not answer")
        self.answers -= 1
        await super().edit(cell_id, expected, new)


def test_notebook_changes_not_undone_for_a_lost_bridge_are_left_to_undo_again() -> None:
    notebook = GoneNotebook([("a", "one"), ("b", "two")], answers=1)
    journal = TurnJournal()
    journal.record_notebook_change(NotebookChange("edit", "a", 0, "code", "1", "one"))
    journal.record_notebook_change(NotebookChange("edit", "b", 1, "code", "2", "two"))
    journal.finish()
    report = asyncio.run(journal.revert_notebook(notebook, journal.revert({})))
    assert notebook.cells == [("a", "one"), ("b", "2")] and report.restored == ["1 notebook change"]
    assert report.not_restored == [
        "1 notebook change: the notebook front-end did not answer; they are left to undo: "
        "run %pi undo again once the notebook is connected"
    ]
    assert not journal.undone and journal.summary() == "1 notebook change"
    notebook.answers = 5
    again = asyncio.run(journal.revert_notebook(notebook, journal.revert({})))
    assert notebook.cells == [("a", "1"), ("b", "2")] and again.restored == ["1 notebook change"]
    assert again.not_restored == [] and journal.undone


class ReadableNotebook(FakeNotebook):
    async def read(self, cell_ids: list[str] | None = None, max_chars: int | None = None) -> list[CellInfo]:
        return [
            CellInfo(cell_id, index, "code", "", None, "", 0, False) for index, (cell_id, _) in enumerate(self.cells)
        ]


def test_a_deleted_cell_comes_back_after_its_neighbour_where_that_is_now() -> None:
    notebook = ReadableNotebook([("a", "1"), ("b", "2"), ("c", "3")])
    journal = TurnJournal()
    journal.record_notebook_change(NotebookChange("delete", "a", 0, "code", "1", None, after_id=FIRST))
    journal.record_notebook_change(NotebookChange("delete", "c", 1, "code", "3", None, after_id="b"))
    notebook.cells = [("u1", "mine"), ("u2", "mine"), ("b", "2")]  # the user added two cells at the top
    report = asyncio.run(journal.revert_notebook(notebook, UndoReport()))
    assert [source for _, source in notebook.cells] == ["1", "mine", "mine", "2", "3"]
    assert report.not_restored == []
