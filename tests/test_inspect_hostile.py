"""Hostile objects in the namespace: the describer and the notebook context stay bounded and never break.

- an object whose attribute access raises (werkzeug's LocalProxy outside a request) is listed and does
  not break the notebook context of a turn;
"""

from __future__ import annotations

from typing import Any

from pi_kernel.kernel.cell_history import CellHistory
from pi_kernel.kernel.notebook_context import NotebookContext
from pi_kernel.tools.builtin.inspect_tool import run_inspect


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
