"""Hostile objects in the namespace: the describer and the notebook context stay bounded and never break.

- an object whose attribute access raises (werkzeug's LocalProxy outside a request) is listed and does
  not break the notebook context of a turn;
- a slow __len__ of a list subclass (user code) is not run outside the time limit, so it stalls neither
  the listing nor the notebook context of every %%pi turn;
- the preview of a big built-in container is bounded (a C-level repr cannot be stopped by the time limit);
"""

from __future__ import annotations

import time
from typing import Any

from pi_kernel.kernel.cell_history import CellHistory
from pi_kernel.kernel.notebook_context import NotebookContext
from pi_kernel.tools.builtin.inspect_tool import run_inspect


class SlowList(list):  # e.g. a lazily fetched result set
    def __len__(self) -> int:
        time.sleep(3)
        return 0


class OutsideContext:  # like werkzeug.local.LocalProxy for flask.request outside a request
    def __call__(self) -> None:
        pass

    def __getattribute__(self, name: str) -> Any:
        raise RuntimeError("Working outside of request context.")


def test_an_object_whose_attributes_raise_does_not_break_every_turn() -> None:
    context = NotebookContext(CellHistory())
    namespace = {"request": OutsideContext(), "x": 1}
    text = context.take(namespace)
    assert text is not None and "x" in text
    assert "x: int" in run_inspect(None, namespace, limit=4000, hidden=set())


def test_a_slow_len_does_not_stall_the_listing() -> None:
    started = time.monotonic()
    run_inspect(None, {"rows": SlowList()}, limit=4000, hidden=set())
    assert time.monotonic() - started < 2


def test_a_slow_len_does_not_stall_the_notebook_context_of_a_turn() -> None:
    context = NotebookContext(CellHistory())
    started = time.monotonic()
    context.take({"rows": SlowList()})
    assert time.monotonic() - started < 2


def test_the_listing_preview_of_a_big_plain_list_is_bounded_in_time() -> None:
    """SafeCaller's 1 s limit cannot stop a C-level repr (list/dict/tuple repr holds the GIL and is not
    interrupted by PyThreadState_SetAsyncExc): the preview of a built-in container is bounded instead."""
    big = [(i, i) for i in range(4_000_000)]
    started = time.monotonic()
    text = run_inspect(None, {"big": big}, limit=4000, hidden=set())
    assert time.monotonic() - started < 1.5
    assert "big: list len 4,000,000 = [(0, 0), (1, 1)" in text
