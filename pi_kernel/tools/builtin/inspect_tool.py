"""The ``inspect`` tool: the agent looks at the notebook's variables without running code.

Without a name it lists the user's variables of ``ctx.namespace`` (type, shape or length, a one-line
preview), leaving out ``ctx.hidden_names``; with a name or dotted attribute path (``df.columns``,
``model.coef_``) it gives a bounded, type-aware description (``describe``) of at most ``ctx.describe_limit``
characters. It only reads, so it never asks for approval and runs in the ``read-only`` approval mode.

**Dotted attribute paths** are read without running user code: ``resolve`` walks ``name.attr.attr`` (no
calls, no indexing); an attribute is found statically (``inspect.getattr_static``), so a property getter,
another descriptor or a ``__getattr__`` of a user class is not run (``RunsUserCode``); numpy/pandas-like
objects are read with ``getattr`` (library code). A path through a module, ``environ``,
``__dict__``/``__globals__`` or to an ``os.environ`` mapping is refused (``RefusedPath``): the environment
holds the keys, and ``inspect`` never asks for approval.
"""

from __future__ import annotations

import inspect
import os
import types
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.ai.user_objects import class_attribute, has_base
from pi_kernel.tools.builtin.describe import (
    CallTimeout,
    Describer,
    SafeCaller,
    close_matches,
    describe_limit,
    is_array_like,
    list_variables,
)
from pi_kernel.tools.definition import ToolContext, ToolDefinition


def resolve(namespace: Mapping[str, Any], path: str) -> Any:
    """The object named by ``path`` (see the module docstring): ``KeyError`` for an unknown name,
    ``AttributeError`` for a missing attribute, ``ValueError`` for a path that is not a dotted name."""
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
    """``value.part`` without running user code: a plain function, static or class method is bound, a
    C-level slot read; a property or other descriptor raises ``RunsUserCode``."""
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
    """Reading the kernel's environment always asks a person (``python`` code does), ``inspect`` never asks."""
    if part in REFUSED_ATTRIBUTES or has_base(value, types.ModuleType, os._Environ):
        raise RefusedPath(
            f"inspect does not read {path}: it walks through a module or the process environment "
            "(which holds the API keys); use python for it (a person approves that)."
        )


class InspectParams(BaseModel):
    name: str | None = Field(
        default=None,
        description="A variable or dotted attribute path (df, df.columns, model.coef_); leave it out to list the "
        "notebook's variables.",
    )


def run_inspect(name: str | None, namespace: dict[str, Any], *, limit: int, hidden: set[str]) -> str:
    """The text ``inspect`` returns; ``ValueError`` (the tool's error result) for an unknown or bad name."""
    caller = SafeCaller()
    try:
        if not name or not name.strip():
            return list_variables(namespace, caller, limit, hidden)
        path = name.strip()
        head = path.split(".")[0]
        if head in hidden:
            raise ValueError(
                f"{head!r} is the kernel's own (IPython's input and output history and the like), not a notebook "
                "variable; inspect without a name lists the variables, cells shows what ran."
            )
        try:
            value = caller.call(lambda: resolve(namespace, path))
        except KeyError:
            matches = close_matches(head, namespace, hidden)
            hint = f" Close matches: {', '.join(matches)}." if matches else " Call inspect without a name to list them."
            raise ValueError(f"No variable named {head!r} in the notebook.{hint}") from None
        except CallTimeout as error:
            raise ValueError(f"Reading {path} {error}.") from None
        except (RefusedPath, RunsUserCode, AttributeError, ValueError) as error:
            raise ValueError(str(error)) from None
        except Exception as error:  # noqa: BLE001 - a property that raises
            raise ValueError(f"Reading {path} failed: {type(error).__name__}: {error}") from None
        return Describer(caller, limit).describe(path, value)
    finally:
        caller.close()


def create_inspect_tool() -> ToolDefinition:
    def execute(
        tool_call_id: str, params: InspectParams, signal: AbortSignal | None, on_update: Any, ctx: ToolContext
    ) -> AgentToolResult:
        namespace = ctx.namespace if ctx.namespace is not None else {}
        text = run_inspect(params.name, namespace, limit=describe_limit(ctx), hidden=set(ctx.hidden_names or ()))
        return AgentToolResult([TextContent(text)], details={"name": params.name})

    return ToolDefinition(
        origin="builtin",
        secret_arguments={"name": "attribute"},  # what of a call may name secrets (approval.secret_reason)
        name="inspect",
        description=(
            "Look at the notebook's live variables without running code. Without a name: every user variable with "
            "its type, shape or length and a preview. With a name or dotted attribute path (df, df.columns, "
            "model.coef_; no calls or indexing): a short description (DataFrame columns, dtypes, nulls, head and "
            "numeric summary; array shape and stats; signature and docstring of functions)."
        ),
        parameters=InspectParams,
        execute=execute,
        prompt_snippet="Look at the notebook's variables (list them, or describe one: columns, dtypes, shape)",
        prompt_guidelines=("Use inspect before python to learn what a variable holds (it needs no approval)",),
        read_only=True,
    )
