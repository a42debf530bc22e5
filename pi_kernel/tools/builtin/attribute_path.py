"""Dotted attribute paths for ``inspect`` (``df.columns``, ``model.coef_``): read without running user code.

``resolve`` walks ``name.attr.attr`` (no calls, no indexing). An attribute is
found statically (``inspect.getattr_static``), so a property getter, another
descriptor or a ``__getattr__`` of a user class is not run (``RunsUserCode``);
numpy/pandas-like objects are read with ``getattr`` (library code). A path
through a module, ``environ``, ``__dict__``/``__globals__`` or to an
``os.environ`` mapping is refused (``RefusedPath``): the environment holds the
keys, and ``inspect`` never asks for approval.
"""

from __future__ import annotations

import inspect
import os
import types
from collections.abc import Iterable, Mapping
from typing import Any

from pi_kernel.ai.user_objects import class_attribute, has_base
from pi_kernel.tools.builtin.describe import is_array_like


def resolve(namespace: Mapping[str, Any], path: str, hidden: Iterable[str] = ()) -> Any:
    """The object named by ``path`` (``name`` or ``name.attr.attr``; no calls, no indexing, no properties
    or ``__getattr__`` of user classes: ``_attribute``).

    ``KeyError`` with close matches for an unknown name, ``AttributeError`` for a missing attribute,
    ``ValueError`` for a path that is not a dotted name.
    """
    parts = path.strip().split(".")
    if not parts or not all(part.isidentifier() for part in parts):
        raise ValueError(f"{path!r} is not a variable name or dotted attribute path (no calls, no indexing)")
    head = parts[0]
    if head not in namespace:
        raise KeyError(head)
    value = namespace[head]
    _refuse(path, head, value)
    for index, part in enumerate(parts[1:], start=1):
        try:
            value = _attribute(value, part)
        except AttributeError:
            raise AttributeError(f"{'.'.join(parts[:index])} has no attribute {part!r}") from None
        except RunsUserCode:
            raise RunsUserCode(
                f"{'.'.join(parts[: index + 1])} is computed by code (a property or descriptor); inspect runs no "
                "code: use python to read it"
            ) from None
        _refuse(path, part, value)
    return value


class RunsUserCode(Exception):
    """Reading the attribute would run user code (a property, a descriptor, ``__getattr__``)."""


_PLAIN_DESCRIPTORS = (types.MemberDescriptorType, types.GetSetDescriptorType)
"""C-level slots and attributes: reading them runs no Python code."""


def _attribute(value: Any, part: str) -> Any:
    """``value.part`` without running user code: found statically (``inspect.getattr_static``, so no
    ``__getattr__``); a plain function, static or class method is bound, a C-level slot read; a property or
    other descriptor raises ``RunsUserCode``. pandas/numpy-like objects (library code: ``df.columns``,
    ``arr.shape``) are read with ``getattr``."""
    if is_array_like(value):
        return getattr(value, part)
    found = inspect.getattr_static(value, part)
    if _found_in_instance(value, part, found):
        return found  # the instance's own attribute (model.coef_), as stored
    is_class = has_base(value, type)  # type() and the MRO only: no __class__ property of the user's runs
    if type(found) is staticmethod:
        return found.__func__
    if type(found) is classmethod:
        return types.MethodType(found.__func__, value if is_class else type(value))
    if type(found) is types.FunctionType:
        return found if is_class else types.MethodType(found, value)
    if any(type(found) is kind for kind in _PLAIN_DESCRIPTORS):
        if is_class and class_attribute(value, part) is found:  # the class's own slot: the descriptor itself
            return found.__get__(None, value)
        return found.__get__(value, type(value))  # C code: a slot or a built-in attribute
    if class_attribute(type(found), "__get__") is not None and not has_base(found, types.BuiltinFunctionType, type):
        raise RunsUserCode(part)
    return found


def _found_in_instance(value: Any, part: str, found: Any) -> bool:
    try:
        own = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return False
    return has_base(own, dict) and dict.get(own, part, None) is found


REFUSED_ATTRIBUTES = frozenset({"environ", "__globals__", "__dict__", "__builtins__", "f_globals", "f_locals"})
"""Attributes ``inspect`` does not walk through: the process environment and whole namespaces."""


class RefusedPath(Exception):
    """A path ``inspect`` will not read (it leads to the environment, which holds the keys)."""


def _refuse(path: str, part: str, value: Any) -> None:
    """``RefusedPath`` for a step through a module, ``environ``-like attribute or an ``os.environ`` mapping:
    reading the kernel's environment always asks a person (``python`` code does), ``inspect`` never asks."""
    if part in REFUSED_ATTRIBUTES or has_base(value, types.ModuleType, os._Environ):
        raise RefusedPath(
            f"inspect does not read {path}: it walks through a module or the process environment "
            "(which holds the API keys); use python for it (a person approves that)."
        )
