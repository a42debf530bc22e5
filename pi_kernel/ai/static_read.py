"""Reading the user's objects without running their code: type names, bases, class attributes, lengths.

Everything pi-kernel learns about a notebook variable without a time limit
comes from here, and nothing here runs a method the user's classes (or their
metaclasses) define: ``type(x)`` instead of ``x.__class__``, the class's
``__mro__``/``__dict__``/``__module__``/``__qualname__`` read through
``type``'s own C descriptors (a metaclass property or ``__getattribute__``
is never consulted), identity instead of ``==`` on classes, and the built-in
types' own slots (``list.__len__``, ``dict.__iter__``) instead of a
subclass's overrides. What must run user code (a ``repr``, a pandas summary)
goes through ``safe_call.SafeCaller`` with a time limit instead.

Standard library only: the cell history uses it at kernel start.
"""

from __future__ import annotations

import collections
import itertools
import types
from typing import Any, cast

_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_MODULE = type.__dict__["__module__"]
_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_NAME = type.__dict__["__name__"]
_FUNCTION_MODULE = types.FunctionType.__dict__["__module__"]
_MISSING = object()

BUILTIN_CONTAINERS: tuple[type, ...] = (list, tuple, dict, set, frozenset, collections.deque)
BUILTIN_TEXT: tuple[type, ...] = (str, bytes, bytearray)


def mro(cls: type) -> tuple[type, ...]:
    """``cls.__mro__`` through ``type``'s own descriptor (no metaclass code)."""
    try:
        found = _TYPE_MRO.__get__(cls)
    except Exception:  # noqa: BLE001 - not a class
        return ()
    return found if type(found) is tuple else ()


def has_base(value: Any, *bases: type) -> bool:
    """Whether ``type(value)`` derives from one of ``bases`` (identity on the MRO: no ``__eq__``,
    ``__class__`` or ``__instancecheck__`` of the user's)."""
    return any(cls is base for cls in mro(type(value)) for base in bases)


def builtin_base(value: Any, bases: tuple[type, ...] = BUILTIN_CONTAINERS + BUILTIN_TEXT) -> type | None:
    """The first of ``bases`` that ``type(value)`` derives from (``list`` for a list subclass), else ``None``."""
    for cls in mro(type(value)):
        for base in bases:
            if cls is base:
                return base
    return None


def class_attribute(cls: type, name: str, default: Any = None) -> Any:
    """``name`` as found in the ``__dict__`` of a class on ``cls``'s MRO, unbound (no descriptor is run,
    no metaclass ``__getattr__``)."""
    for klass in mro(cls):
        try:
            found = _TYPE_DICT.__get__(klass).get(name, _MISSING)
        except Exception:  # noqa: BLE001 - an odd class
            continue
        if found is not _MISSING:
            return found
    return default


def overrides(value: Any, name: str, base: type) -> bool:
    """Whether ``type(value)`` replaces ``base``'s ``name`` (a list subclass's own ``__len__``)."""
    return class_attribute(type(value), name) is not class_attribute(base, name)


def class_module(cls: type) -> str:
    """The module a class was defined in, ``""`` when that is not a plain string."""
    try:
        module = _TYPE_MODULE.__get__(cls)
    except Exception:  # noqa: BLE001 - a class without one
        return ""
    return module if type(module) is str else ""


def class_name(cls: type) -> str:
    try:
        name = _TYPE_QUALNAME.__get__(cls)
    except Exception:  # noqa: BLE001
        return "?"
    return name if type(name) is str else "?"


def simple_name(cls: type) -> str:
    """``cls.__name__`` (no metaclass code)."""
    try:
        name = _TYPE_NAME.__get__(cls)
    except Exception:  # noqa: BLE001
        return "?"
    return name if type(name) is str else "?"


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
        module = _FUNCTION_MODULE.__get__(value)
        return module if type(module) is str else ""
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
