"""Reading the user's objects safely: without running their code where possible, with a time limit where
it must run.

Everything pi-kernel learns about a notebook variable without a time limit
comes from the static readers here, and none of them runs a method the user's classes (or their
metaclasses) define: ``type(x)`` instead of ``x.__class__``, the class's
``__mro__``/``__dict__``/``__module__``/``__qualname__`` read through
``type``'s own C descriptors (a metaclass property or ``__getattribute__``
is never consulted), identity instead of ``==`` on classes, and the built-in
types' own slots (``list.__len__``, ``dict.__iter__``) instead of a
subclass's overrides.

What must run user code (a ``repr``, a pandas summary) goes through ``SafeCaller``, which runs it on a
helper thread. A call that does not return in time is abandoned (an exception is raised in its thread,
which stops Python code at its next bytecode) and the next call gets a fresh thread, so one hanging
``repr`` costs one timeout. Code running in C (a built-in ``repr`` of millions of items) cannot be
stopped: callers give such objects a bounded treatment instead (the static readers).

Standard library only: the cell history uses it at kernel start.
"""

from __future__ import annotations

import collections
import ctypes
import itertools
import queue
import threading
import types
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from typing import Any, cast


def _read(descriptor: Any, owner: Any, kind: type, default: Any) -> Any:
    """``descriptor`` (one of ``type``'s own, say) read on ``owner``, if it gives a ``kind``, else ``default``."""
    try:
        found = descriptor.__get__(owner)
    except Exception:  # noqa: BLE001 - not a class, or a class without one
        return default
    return found if type(found) is kind else default


BUILTIN_CONTAINERS: tuple[type, ...] = (list, tuple, dict, set, frozenset, collections.deque)
BUILTIN_TEXT: tuple[type, ...] = (str, bytes, bytearray)


def mro(cls: type) -> tuple[type, ...]:
    """``cls.__mro__`` through ``type``'s own descriptor (no metaclass code)."""
    result: tuple[type, ...] = _read(type.__dict__["__mro__"], cls, tuple, ())
    return result


def has_base(value: Any, *bases: type) -> bool:
    """Whether ``type(value)`` derives from one of ``bases`` (identity on the MRO: no ``__eq__``,
    ``__class__`` or ``__instancecheck__`` of the user's)."""
    return any(cls is base for cls in mro(type(value)) for base in bases)


def builtin_base(value: Any, bases: tuple[type, ...] = BUILTIN_CONTAINERS + BUILTIN_TEXT) -> type | None:
    """The first of ``bases`` that ``type(value)`` derives from (``list`` for a list subclass), else ``None``."""
    return next((base for cls in mro(type(value)) for base in bases if cls is base), None)


def class_attribute(cls: type, name: str, default: Any = None) -> Any:
    """``name`` as found in the ``__dict__`` of a class on ``cls``'s MRO, unbound (no descriptor is run,
    no metaclass ``__getattr__``)."""
    namespaces = (_read(type.__dict__["__dict__"], klass, types.MappingProxyType, {}) for klass in mro(cls))
    return next((namespace[name] for namespace in namespaces if name in namespace), default)


def overrides(value: Any, name: str, base: type) -> bool:
    """Whether ``type(value)`` replaces ``base``'s ``name`` (a list subclass's own ``__len__``)."""
    return class_attribute(type(value), name) is not class_attribute(base, name)


def class_module(cls: type) -> str:
    """The module a class was defined in, ``""`` when that is not a plain string."""
    return str(_read(type.__dict__["__module__"], cls, str, ""))


def class_name(cls: type) -> str:
    """``cls.__qualname__`` (no metaclass code)."""
    return str(_read(type.__dict__["__qualname__"], cls, str, "?"))


def simple_name(cls: type) -> str:
    """``cls.__name__`` (no metaclass code)."""
    return str(_read(type.__dict__["__name__"], cls, str, "?"))


def type_name(value: Any) -> str:
    """``value``'s type as ``module.Qualname`` (top package only; no module for builtins and ``__main__``)."""
    cls = type(value)
    module, name = class_module(cls), class_name(cls)
    return name if module in ("builtins", "__main__", "") else f"{module.split('.')[0]}.{name}"


def is_class(value: Any) -> bool:
    return has_base(value, type)


def defined_in(value: Any) -> str:
    """The module a function or class was defined in, else its type's module (no user attribute access)."""
    if is_class(value):
        return class_module(value)
    if type(value) is types.FunctionType:
        return str(_read(types.FunctionType.__dict__["__module__"], value, str, ""))
    return class_module(type(value))


def static_len(value: Any) -> int | None:
    """The length of a built-in container or string, or of a subclass through the built-in's own ``__len__``
    (a subclass's override is user code: not run); ``None`` for anything else."""
    base = builtin_base(value)
    if base is None:
        return None
    return int(cast(Any, base).__len__(value))


def static_items(value: Any, count: int) -> list[Any] | dict[Any, Any] | None:
    """The first ``count`` items of a built-in container (or a subclass, through the built-in's own
    iteration, never an override) as a plain list or dict; ``None`` for anything else."""
    base = builtin_base(value, BUILTIN_CONTAINERS)
    if base is None:
        return None
    if base is dict:
        return dict(itertools.islice(dict.items(value), count))
    return list(itertools.islice(cast(Any, base).__iter__(value), count))


def exact_text(value: Any) -> str:
    """A ``str`` (or subclass) as an exact ``str`` (a subclass's methods are user code)."""
    return str.__str__(value)


# --- Calling the user's code with a time limit

CALL_TIMEOUT = 1.0
"""Seconds one call of user code (a ``repr``) may take."""


class CallTimeout(Exception):
    """A guarded call took longer than its limit."""


class SafeCaller:
    """Runs calls of user code on a helper thread with a time limit (see the module doc)."""

    def __init__(self, timeout: float = CALL_TIMEOUT) -> None:
        self.timeout = timeout
        self._jobs: queue.SimpleQueue[Any] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """``fn()``'s value; its exception re-raised; ``CallTimeout`` when it takes longer than ``timeout``
        (default: the caller's)."""
        with self._lock:  # one call at a time (the cell history's caller serves every subshell)
            limit = self.timeout if timeout is None else timeout
            if self._jobs is None or self._thread is None or not self._thread.is_alive():
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(target=_work, args=(self._jobs,), name="pi-describe", daemon=True)
                self._thread.start()
            job: Future[Any] = Future()
            self._jobs.put((fn, job))
            if not futures.wait([job], limit).done:
                thread, self._thread, self._jobs = self._thread, None, None
                if thread.ident is not None:
                    stop = ctypes.py_object(SystemExit)
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), stop)
                raise CallTimeout(f"took longer than {limit:g} s")
            return job.result()

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
        self._jobs, self._thread = None, None


def _work(jobs: queue.SimpleQueue[Any]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, future = job
        try:
            future.set_result(fn())
        except BaseException as error:  # noqa: BLE001 - user code may raise anything; the caller gets it
            if isinstance(error, SystemExit):  # abandoned after a timeout (or the code exits: it returned nothing)
                if not future.done():  # the stop may land just after the result was set
                    future.set_result(None)
                return
            future.set_exception(error)


def error_text(error: BaseException, caller: SafeCaller, chars: int = 120) -> str:
    """``Type: message`` of an exception the user's code raised; its ``str()`` is user code too (time limit)."""
    name = class_name(type(error))
    try:
        message = caller.call(lambda: exact_text(str(error)), 0.5)
    except BaseException:  # noqa: BLE001 - an exception whose message cannot be read
        return name
    flat = " ".join(message.split())
    return f"{name}: {flat if len(flat) <= chars else flat[: chars - 3] + '...'}"
