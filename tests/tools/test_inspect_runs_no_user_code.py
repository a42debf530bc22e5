"""``inspect`` and the notebook context run none of the methods of the user's classes (issue 22, point 1).

Each hostile method notes that it ran and then hangs for a while (a loop ``inspect``'s time limit would
have to break): a list subclass's ``__len__``/``__iter__``/``__getitem__``/``__eq__``, ``__class__``
properties (``isinstance`` reads them), a metaclass's ``__module__``/``__name__``/``__getattr__``/``__eq__``,
a ``__getattribute__`` that loops, dict/set/str/int subclasses with hostile overrides, and the same
objects nested inside plain containers. Their own ``__repr__`` is the one method that may run (with a
time limit; it is what a preview is), so none of these classes defines one.
"""

from __future__ import annotations

import os
import time
import types
from typing import Any

from pi_kernel.kernel.notebook_context import CellHistory, NotebookContext
from pi_kernel.tools.builtin.describe import ENVIRON_HIDDEN
from pi_kernel.tools.builtin.inspect_tool import run_inspect

CALLS: list[str] = []
HERE = f"{__name__.split('.')[-1]}."
"""The classes' module, as type names show it."""


def hostile(what: str) -> None:
    CALLS.append(what)
    time.sleep(2)


class Meta(type):
    @property
    def __module__(cls) -> str:  # type: ignore[override]
        hostile("Meta.__module__")
        return "slow"

    def __getattr__(cls, name: str) -> Any:
        hostile(f"Meta.__getattr__ {name}")
        raise AttributeError(name)

    def __eq__(cls, other: object) -> bool:
        hostile("Meta.__eq__")
        return False

    __hash__ = type.__hash__


class Classy(metaclass=Meta):
    """Made by a hostile metaclass."""

    def __init__(self, x: int, *, y: str = "") -> None:
        pass


class BigList(list):  # type: ignore[type-arg]
    def __len__(self) -> int:
        hostile("BigList.__len__")
        return 0

    def __iter__(self) -> Any:
        hostile("BigList.__iter__")
        return iter(())

    def __getitem__(self, index: Any) -> Any:
        hostile("BigList.__getitem__")

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        hostile("BigList.__class__")
        return list


class Masquerade:
    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        hostile("Masquerade.__class__")
        return dict


class Loops:
    def __call__(self) -> None:
        pass

    def __getattribute__(self, name: str) -> Any:
        CALLS.append(f"Loops.__getattribute__ {name}")
        while True:
            time.sleep(0.01)


class OddDict(dict):  # type: ignore[type-arg]
    def __len__(self) -> int:
        hostile("OddDict.__len__")
        return 0

    def items(self) -> Any:
        hostile("OddDict.items")
        return []

    def __iter__(self) -> Any:
        hostile("OddDict.__iter__")
        return iter(())


class OddSet(set):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        hostile("OddSet.__iter__")
        return iter(())

    def __len__(self) -> int:
        hostile("OddSet.__len__")
        return 0


class OddStr(str):
    def __len__(self) -> int:
        hostile("OddStr.__len__")
        return 0

    def __getitem__(self, index: Any) -> Any:
        hostile("OddStr.__getitem__")
        return ""


class OddInt(int):
    def __index__(self) -> int:
        hostile("OddInt.__index__")
        return 0


def namespace() -> dict[str, Any]:
    return {
        "classy": Classy(1),
        "Classy": Classy,
        "big": BigList(range(100_000)),
        "masquerade": Masquerade(),
        "loops": Loops(),
        "odd_dict": OddDict(a=1, b=2),
        "odd_set": OddSet({1, 2}),
        "odd_str": OddStr("hello"),
        "odd_int": OddInt(7),
        "nested": [BigList(range(5)), {"d": OddDict(x=1)}, (Masquerade(),)],
    }


def test_listing_and_descriptions_run_none_of_their_methods() -> None:
    CALLS.clear()
    ns = namespace()
    started = time.monotonic()
    listing = run_inspect(None, ns, limit=4000, hidden=set())
    described = {name: run_inspect(name, ns, limit=4000, hidden=set()) for name in ns}
    assert CALLS == []
    assert time.monotonic() - started < 2
    assert f"- big: {HERE}BigList len 100,000 = BigList([0, 1, 2," in listing
    assert f"- odd_dict: {HERE}OddDict len 2 = OddDict({{'a': 1, 'b': 2}})" in listing
    assert f"- odd_str: {HERE}OddStr len 5" in listing
    assert (
        "- Classy: Meta" in listing
    )  # Meta.__module__ is a property: no module shown and f"- classy: {HERE}Classy" in listing
    assert f"big: {HERE}BigList, 100,000 item(s)\nfirst 10: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in described["big"]
    assert len(described["big"]) < 200  # the first items, not 100,000 reprs
    assert f"odd_dict: {HERE}OddDict, 2 item(s)" in described["odd_dict"]
    assert "class Classy(x: 'int', *, y: 'str' = '')\nMade by a hostile metaclass." in described["Classy"]
    assert f"odd_int: {HERE}OddInt\nOddInt(7)" in described["odd_int"]
    assert "BigList([0, 1, 2, 3, 4])" in described["nested"] and "OddDict({'x': 1})" in described["nested"]


def test_the_notebook_context_runs_none_of_their_methods() -> None:
    CALLS.clear()
    context = NotebookContext(CellHistory())
    ns = namespace()
    started = time.monotonic()
    text = context.take(ns)
    context.after_turn(ns)
    ns["more"] = 1
    again = context.take(ns)
    assert CALLS == []
    assert time.monotonic() - started < 1
    assert text is not None and f"- big: {HERE}BigList len 100,000" in text and f"- loops: {HERE}Loops" in text
    assert again is not None and "- more: int" in again and "big" not in again


def test_a_dotted_path_through_hostile_objects_runs_nothing() -> None:
    CALLS.clear()
    ns = namespace()
    for path in ("classy.x", "masquerade.anything", "loops.attr", "Classy.__init__", "big.append"):
        try:
            run_inspect(path, ns, limit=4000, hidden=set())
        except ValueError:
            pass  # an attribute that is not there, or one that code computes, is an error result
    assert CALLS == []


def test_the_environment_inside_containers_is_not_shown() -> None:
    ns = {"holder": {"env": os.environ, "n": 1}, "deep": [[{"e": os.environ}]], "envs": (os.environb,)}
    listing = run_inspect(None, ns, limit=4000, hidden=set())
    texts = [listing, *(run_inspect(name, ns, limit=4000, hidden=set()) for name in ns)]
    for text in texts:
        assert ENVIRON_HIDDEN in text, text
        assert os.environ.get("PATH", "/usr/bin") not in text
    assert "'n': 1" in texts[1]


def test_an_object_whose_repr_prints_the_environment_is_not_shown() -> None:
    ns = {"settings": types.SimpleNamespace(env=os.environ, debug=True)}
    for text in (
        run_inspect(None, ns, limit=4000, hidden=set()),
        run_inspect("settings", ns, limit=4000, hidden=set()),
    ):
        assert "holds os.environ: not shown" in text, text
        assert os.environ.get("PATH", "/usr/bin") not in text


def test_ipythons_own_names_are_named_as_such() -> None:
    try:
        run_inspect("_ih", {"_ih": ["a"], "x": 1}, limit=4000, hidden={"_ih"})
    except ValueError as error:
        assert "kernel's own" in str(error)
    else:
        raise AssertionError("inspect _ih should be an error result")
