"""A namespace of hostile objects costs a ``%%pi`` turn nothing (issue 22, point 1), in a real kernel.

Every dunder of these objects raises, sleeps or loops forever, and each records that it ran
(``HOSTILE_CALLS`` in the kernel): a callable whose ``__getattribute__`` loops, one whose attribute
access sleeps 3 s, a ``__class__`` property that loops, classes whose metaclass has a slow ``__module__``,
``__name__``, ``__getattr__`` and ``__eq__``, a list subclass with 200,000 items and a hostile ``__len__``,
``__iter__``, ``__getitem__``, ``__eq__`` and ``__hash__``, a dict subclass likewise, and a non-string
key in the namespace. The notebook context (two turns: the first reads everything, the second compares
with what the first left) adds less than about a second to a turn, ``inspect`` (the listing and each
object by name) and ``cells`` finish and run none of those methods, and an interrupt still ends a turn.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import Chunks, FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env

from pi_kernel.ai.safe_call import CALL_TIMEOUT
from pi_kernel.tools.builtin.describe import LISTING_BUDGET

pytestmark = pytest.mark.kernel

HOSTILE = '''
import time
HOSTILE_CALLS = []

def _note(what):
    HOSTILE_CALLS.append(what)

class LoopingAttributes:
    def __call__(self):
        pass
    def __getattribute__(self, name):
        _note("LoopingAttributes.__getattribute__ " + name)
        while True:
            pass

class SlowAttributes:
    def __call__(self):
        pass
    def __getattribute__(self, name):
        _note("SlowAttributes.__getattribute__ " + name)
        time.sleep(3)
        return None

class LoopingClass:
    @property
    def __class__(self):
        _note("LoopingClass.__class__")
        while True:
            pass

class SlowMeta(type):
    @property
    def __module__(cls):
        _note("SlowMeta.__module__")
        time.sleep(3)
        return "slow"
    @property
    def __name__(cls):
        _note("SlowMeta.__name__")
        time.sleep(3)
        return "Slow"
    def __getattr__(cls, name):
        _note("SlowMeta.__getattr__ " + name)
        time.sleep(3)
        raise AttributeError(name)
    def __eq__(cls, other):
        _note("SlowMeta.__eq__")
        time.sleep(3)
        return False
    __hash__ = type.__hash__

class SlowMetaClass(metaclass=SlowMeta):
    """A class whose metaclass is slow."""
    def __init__(self, a, b=2):
        pass

class HostileList(list):
    def __len__(self):
        _note("HostileList.__len__")
        time.sleep(3)
        return 0
    def __iter__(self):
        _note("HostileList.__iter__")
        while True:
            pass
    def __getitem__(self, index):
        _note("HostileList.__getitem__")
        time.sleep(3)
    def __eq__(self, other):
        _note("HostileList.__eq__")
        time.sleep(3)
        return False
    __hash__ = None
    @property
    def __class__(self):
        _note("HostileList.__class__")
        time.sleep(3)
        return list

class HostileDict(dict):
    def __len__(self):
        _note("HostileDict.__len__")
        time.sleep(3)
        return 0
    def __iter__(self):
        _note("HostileDict.__iter__")
        time.sleep(3)
        return iter(())
    def keys(self):
        _note("HostileDict.keys")
        time.sleep(3)
        return []
    def items(self):
        _note("HostileDict.items")
        time.sleep(3)
        return []

REPR_CALLS = []

class SlowRepr:
    def __repr__(self):
        REPR_CALLS.append("SlowRepr.__repr__")
        time.sleep(3)
        return "slow"

class LoopingRepr:
    def __repr__(self):
        REPR_CALLS.append("LoopingRepr.__repr__")
        while True:
            pass

ERROR_CALLS = []

def _by_pi():
    """Whether the cell history (or its helper thread) called: IPython's own traceback display of the
    exception is not Pi's cost, so the exception is hostile only to Pi."""
    import sys
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(("notebook_context.py", "safe_call.py")):
            return True
        frame = frame.f_back
    return False

class HostileError(Exception):
    def __bool__(self):
        if _by_pi():
            ERROR_CALLS.append("__bool__")
            time.sleep(3)
        return True
    def __getattribute__(self, name):
        if _by_pi():
            ERROR_CALLS.append("__getattribute__ " + name)
            time.sleep(3)
        return super().__getattribute__(name)
    def __str__(self):
        if _by_pi():
            ERROR_CALLS.append("__str__")
            time.sleep(3)
        return "hostile"
    def __repr__(self):
        if _by_pi():
            ERROR_CALLS.append("__repr__")
            time.sleep(3)
        return "HostileError()"

loops = LoopingAttributes()
slow_repr = SlowRepr()
looping_repr = LoopingRepr()
slow = SlowAttributes()
looping_class = LoopingClass()
slow_meta = SlowMetaClass(1)
big_list = HostileList(range(200_000))
big_dict = HostileDict(alpha=1, beta=2)
globals()[SlowMetaClass] = "a non-string key"
'''

NAMES = (
    "loops",
    "slow",
    "looping_class",
    "slow_meta",
    "SlowMetaClass",
    "big_list",
    "big_dict",
    "slow_repr",
    "looping_repr",
    "HostileError",
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def timed_turn(kernel: KernelDriver, server: FakeOpenAI, prompt: str) -> float:
    server.enqueue(text_chunks("Noted."))
    started = time.monotonic()
    result = kernel.run(f"%%pi\n{prompt}", timeout=60)
    took = time.monotonic() - started
    assert result.status == "ok" and "Noted." in result.text, result.text
    return took


def hostile_calls(kernel: KernelDriver) -> list[str]:
    result = kernel.run("print(repr(HOSTILE_CALLS))")
    assert result.status == "ok", result.text
    return list(eval(result.text.strip()))


def context_of(body: dict[str, Any]) -> str:
    user = [message for message in body["messages"] if message["role"] == "user"][-1]
    content = user["content"]
    return "".join(part["text"] for part in content if part["type"] == "text") if isinstance(content, list) else ""


def test_hostile_objects_cost_a_turn_nothing_and_are_never_called(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run("warm = 1").status == "ok"
    timed_turn(kernel, server, "warm up")
    assert kernel.run("plain = [1, 2, 3]").status == "ok"
    normal = min(timed_turn(kernel, server, "a normal turn"), timed_turn(kernel, server, "another normal turn"))
    assert kernel.run(HOSTILE).status == "ok"
    first = timed_turn(kernel, server, "the namespace changed")
    context = context_of(server.last_body)
    second = timed_turn(kernel, server, "nothing changed since")
    assert first < normal + 1.0, (first, normal)
    assert second < normal + 1.0, (second, normal)
    for name in NAMES:
        assert f"- {name}: " in context, context
    assert "HostileList len 200,000" in context  # the built-in's own length, not the override's 0
    assert "SlowMetaClass: SlowMeta" in context  # the class's own names, not the metaclass's properties
    assert hostile_calls(kernel) == []


def test_inspect_and_cells_run_none_of_their_methods(kernel: KernelDriver, server: FakeOpenAI) -> None:
    calls = [("inspect", {})] + [("inspect", {"name": name}) for name in NAMES] + [("cells", {"last": 3})]
    normal = timed_turn(kernel, server, "a turn before")
    server.enqueue(tool_call_chunks(calls), text_chunks("Seen."))
    started = time.monotonic()
    result = kernel.run("%%pi\nLook at everything", timeout=60)
    took = time.monotonic() - started
    assert result.status == "ok" and "Seen." in result.text, result.text
    # The listing's documented budget, and for each object whose own repr sleeps or loops, described by
    # name: its description and its repr, one limit each.
    assert took < normal + 1.0 + LISTING_BUDGET + 4 * CALL_TIMEOUT, (took, normal)
    messages = server.last_body["messages"]
    results = [message["content"] for message in messages if message["role"] == "tool"][-len(calls) :]
    listing, *described, cells = results
    for name in NAMES:
        assert f"- {name}: " in listing, listing
    by_name = dict(zip(NAMES, described, strict=True))
    assert "big_list: HostileList, 200,000 item(s)" in by_name["big_list"]
    assert "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in by_name["big_list"]
    assert "big_dict: HostileDict, 2 item(s)" in by_name["big_dict"]
    assert "'alpha': 1" in by_name["big_dict"]
    assert "class SlowMetaClass(a, b=2)" in by_name["SlowMetaClass"]
    assert "A class whose metaclass is slow." in by_name["SlowMetaClass"]
    assert len(listing) < 4000 and "..." in listing  # the 200,000 items previewed by their first ones
    assert "In [" in cells
    assert hostile_calls(kernel) == []


def test_the_python_tool_and_its_undo_journal_run_none_of_their_methods(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    """The undo journal looks at every variable the agent's code names (to copy what it may change in
    place): by type only, so naming the hostile objects runs none of their methods."""
    code = f"names = [{', '.join(NAMES)}]\nkept = len(names)"
    server.enqueue(tool_call_chunks([("python", {"code": code})]), text_chunks("Listed."))
    started = time.monotonic()
    result = kernel.run("%%pi --approve auto\nname them all", timeout=60)
    assert result.status == "ok" and "Listed." in result.text, result.text
    assert time.monotonic() - started < 10
    assert kernel.run("print(kept)").text.strip() == str(len(NAMES))
    assert hostile_calls(kernel) == []


def test_an_interrupt_ends_a_turn_among_hostile_objects(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run("changed_again = 2").status == "ok"
    server.enqueue(Chunks(text_chunks("word " * 100, parts=100), delay=0.3))
    state: dict[str, float] = {"updates": 0}

    def on_iopub(message: dict[str, Any]) -> None:
        if message["msg_type"] == "update_display_data":
            state["updates"] += 1
            if state["updates"] == 2:
                state["at"] = time.monotonic()
                kernel.interrupt()

    result = kernel.run("%%pi\nTalk", on_iopub=on_iopub, timeout=60)
    assert result.status == "error" and result.reply["ename"] == "PiInterrupted", result.text
    assert time.monotonic() - state["at"] < 5
    took = timed_turn(kernel, server, "still there?")
    assert took < 10
    assert hostile_calls(kernel) == []


def test_an_interrupt_stops_the_repr_of_a_python_result(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """The value the agent's ``python`` code ends with is shown through its ``repr`` (user code): an
    interrupt stops a ``repr`` that loops, as it stops the code itself."""
    hanging = "class HangingRepr:\n    def __repr__(self):\n        while True:\n            pass\n"
    hanging += "hanging = HangingRepr()"
    assert kernel.run(hanging).status == "ok"
    server.enqueue(tool_call_chunks([("python", {"code": "hanging"})]))  # the turn ends at the interrupt
    state: dict[str, float] = {"started": time.monotonic()}

    def on_poll() -> None:
        if "at" not in state and time.monotonic() - state["started"] > 3:
            state["at"] = time.monotonic()
            kernel.interrupt()

    result = kernel.run("%%pi --approve auto\nshow it", on_poll=on_poll, timeout=60)
    assert result.status == "error" and result.reply["ename"] == "PiInterrupted", result.text
    assert time.monotonic() - state["at"] < 5
    assert timed_turn(kernel, server, "still there?") < 10


def test_a_hostile_exception_costs_the_cell_history_at_most_its_message_limit(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    """After every cell the history records the error: ``error_in_exec or error_before_exec`` ran the
    exception's ``__bool__`` and ``error.__traceback__`` its ``__getattribute__``, on the kernel's main
    thread with no time limit (3 s each here). Now only ``str()`` runs, on the helper thread, for at most
    one second, and the record still names the type and the raising line."""
    plain = [kernel.run("raise ValueError('plain')") for _ in range(2)]
    assert all(result.status == "error" for result in plain)
    started = time.monotonic()
    kernel.run("raise ValueError('plain')")
    normal = time.monotonic() - started
    started = time.monotonic()
    result = kernel.run("raise HostileError()")
    took = time.monotonic() - started
    assert result.status == "error" and result.reply["ename"] == "HostileError", result.text
    assert took < normal + CALL_TIMEOUT + 1.0, (took, normal)
    calls = kernel.run("print(repr(ERROR_CALLS))")
    assert calls.status == "ok", calls.text
    assert eval(calls.text.strip()) == ["__str__"]  # nothing but the bounded message, off the main thread
    server.enqueue(tool_call_chunks([("cells", {"last": 2})]), text_chunks("Seen."))
    turn = kernel.run("%%pi\nWhat failed?", timeout=60)
    assert turn.status == "ok" and "Seen." in turn.text, turn.text
    cells = [message["content"] for message in server.last_body["messages"] if message["role"] == "tool"][-1]
    assert "HostileError" in cells and "raise HostileError()" in cells, cells
