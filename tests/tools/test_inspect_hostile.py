"""Hostile objects in the namespace: the describer and the notebook context stay bounded and never break.

- an object whose attribute access raises (werkzeug's LocalProxy outside a request) is listed and does
  not break the notebook context of a turn;
- a slow __len__ of a list subclass (user code) is not run outside the time limit, so it stalls neither
  the listing nor the notebook context of every %%pi turn;
- a dotted path runs no user code (a property getter or __getattr__ with side effects);
- the preview of a big built-in container is bounded (a C-level repr cannot be stopped by the time limit);
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from pi_kernel.kernel.notebook_context import CellHistory, NotebookContext
from pi_kernel.tools.builtin.inspect_tool import run_inspect


class SlowList(list):  # e.g. a lazily fetched result set
    def __len__(self) -> int:
        time.sleep(3)
        return 0


class Account:
    def __init__(self) -> None:
        self.withdrawals = 0
        self.owner = "Ada"

    @property
    def withdraw(self) -> int:  # a getter with a side effect
        self.withdrawals += 1
        return 100

    def __getattr__(self, name: str) -> Any:  # e.g. an RPC proxy that sends a request per attribute
        self.withdrawals += 10
        return name

    def deposit(self, amount: int) -> None:
        """Put money in."""


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


@pytest.mark.parametrize("path", ["account.withdraw", "account.transfer"])
def test_a_dotted_path_runs_no_user_code(path: str) -> None:
    account = Account()
    try:
        text = run_inspect(path, {"account": account}, limit=4000, hidden=set())
    except ValueError as refused:  # the tool's error result
        text = str(refused)
    assert account.__dict__["withdrawals"] == 0
    assert "100" not in text


def test_a_dotted_path_still_reads_plain_attributes_and_methods() -> None:
    account = Account()
    namespace = {"account": account}
    assert "Ada" in run_inspect("account.owner", namespace, limit=4000, hidden=set())
    assert "Put money in." in run_inspect("account.deposit", namespace, limit=4000, hidden=set())
    assert account.__dict__["withdrawals"] == 0
