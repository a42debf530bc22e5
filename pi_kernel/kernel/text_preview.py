"""Bounded previews for the live text view: their cost depends on the preview's size, not the value's.

The live display of a turn is redrawn several times a second while a tool
call's arguments stream (5 MB seen) or a long answer grows; a preview that
serialized the whole value on each redraw made the turn quadratic.
``preview_json`` writes JSON (the layout of ``json.dumps``) of at most about
``limit + SLACK`` characters: strings are cut, containers stop at the budget,
nesting deeper than ``PREVIEW_DEPTH`` shows as ``…`` (no recursion on
model-controlled depth). Keys are masked before the final cut, with ``SLACK``
characters past the cut, so a key that straddles the cut is still found
whole; strings of arguments still streaming are masked with
``masked(..., partial=True)`` (their end may be the first characters of a key).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pi_kernel.kernel.outgoing import masked

SLACK = 1024
"""Characters written past the cut, so masking sees whole any key the cut would split."""
PREVIEW_DEPTH = 24


def preview_json(value: Any, limit: int, secrets: Sequence[str], *, partial: bool = False) -> str:
    """``value`` as JSON, masked, cut to ``limit`` characters (``…`` where cut).

    ``partial``: the value is still being streamed (its strings may end in the first characters of a key).
    """
    writer = _Writer(limit + SLACK, secrets, partial)
    writer.walk(value, 0)
    text = masked("".join(writer.parts), secrets)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Writer:
    def __init__(self, budget: int, secrets: Sequence[str], partial: bool) -> None:
        self.budget = budget
        self.secrets = secrets
        self.partial = partial
        self.parts: list[str] = []
        self.used = 0

    def emit(self, text: str) -> None:
        self.parts.append(text)
        self.used += len(text)

    @property
    def full(self) -> bool:
        return self.used > self.budget

    def walk(self, value: Any, depth: int) -> None:
        if self.full:
            return
        if hasattr(value, "model_dump") and not isinstance(value, type):
            value = dict(value)  # a validated pydantic model: its fields, shallow (nested ones walked below)
        if isinstance(value, str):
            text = value[: self.budget - self.used + 1]
            if self.partial:
                text = masked(text, self.secrets, partial=True)
            self.emit(json.dumps(text, ensure_ascii=False))
        elif isinstance(value, dict):
            self._container("{", "}", value.items(), depth, keyed=True)
        elif isinstance(value, (list, tuple)):
            self._container("[", "]", ((None, item) for item in value), depth, keyed=False)
        elif value is None or isinstance(value, (bool, int, float)):
            self.emit(json.dumps(value))
        else:
            self.emit(json.dumps(str(value)[: self.budget - self.used + 1], ensure_ascii=False))

    def _container(self, open_: str, close: str, items: Any, depth: int, *, keyed: bool) -> None:
        if depth >= PREVIEW_DEPTH:
            self.emit(open_ + "…" + close)
            return
        self.emit(open_)
        for index, (key, item) in enumerate(items):
            if self.full:
                break
            if index:
                self.emit(", ")
            if keyed:
                self.emit(json.dumps(str(key)[: self.budget], ensure_ascii=False) + ": ")
            self.walk(item, depth + 1)
        self.emit(close)


def text_tail(text: str, chars: int) -> str:
    """The end of ``text`` (at most ``chars`` characters), starting at a line start when it is cut."""
    if len(text) <= chars:
        return text
    cut = text[-chars:]
    newline = cut.find("\n")
    if 0 <= newline < len(cut) - 1:
        cut = cut[newline + 1 :]
    return "… (earlier text not shown live)\n" + cut
