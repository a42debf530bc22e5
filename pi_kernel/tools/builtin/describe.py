"""Bounded, type-aware descriptions of the notebook's live objects (for ``inspect`` and the notebook context).

Everything here reads and never changes. What is learnt without a time limit is read statically
(``user_objects``: ``type()``, the class's own ``__dict__``s, the built-ins' own ``__len__`` and iteration),
so no method of the user's classes runs there; the only user code called is an object's own ``repr`` (when
its class defines one) and pandas/numpy summaries, each run by ``SafeCaller`` on a helper thread with a time
limit, so a ``repr`` that raises, hangs or returns megabytes gives a short note instead of a stuck or crashed
kernel. The limit cannot stop a ``repr`` that runs in C (a list of millions of tuples), so built-in
containers, strings and ints (and their subclasses that keep the built-in's ``repr``) are previewed by their
first items instead. ``os.environ`` met inside a container is not shown. Every text is cut to a size limit,
never inside a key (``paths.cut``): keys are masked where the text enters the transcript (a tool's result,
the notebook context), and the mask must find each whole. A string held under a secret-like name
(``db_password``) is never previewed (``paths.is_secret_value``). pandas DataFrames are summarised from
per-column numpy reductions rather than ``describe()`` (whose percentiles sort every column), so a
description of a large frame stays cheap.
"""

from __future__ import annotations

import collections
import difflib
import inspect
import itertools
import os
import reprlib
import time
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pi_kernel.ai.user_objects import (
    BUILTIN_CONTAINERS,
    CallTimeout,
    SafeCaller,
    builtin_base,
    class_attribute,
    class_name,
    defined_in,
    error_text,
    exact_text,
    has_base,
    overrides,
    static_items,
    static_len,
    type_name,
)
from pi_kernel.tools.definition import ToolContext
from pi_kernel.tools.paths import HIDDEN_VALUE, cut, environment_secrets, is_secret_value

DEFAULT_LIMIT = 4000
"""Characters of one description or listing (the ``describe_limit`` setting)."""
DESCRIBE_TIMEOUT = 10.0
"""Seconds one whole description may take (a summary of a large DataFrame is real work)."""
LISTING_BUDGET = 3.0
"""Seconds of previews in one listing; after that, names and types only."""
PREVIEW_CHARS = 80
ENVIRON_HIDDEN = "<os.environ: not shown, it holds the keys>"
HIDDEN_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})
"""IPython's own names in a user namespace."""


def describe_limit(ctx: ToolContext) -> int:
    """The context's ``describe_limit`` (the kernel's setting), else ``DEFAULT_LIMIT``."""
    limit = ctx.describe_limit
    return limit if isinstance(limit, int) and limit > 0 else DEFAULT_LIMIT


def clip(text: str, limit: int, secrets: Sequence[str] | None = None) -> str:
    """``text`` cut to ``limit`` characters with a note of how much was left out, never inside a key
    (``paths.cut``; ``secrets``: the key values if already read), so the mask the text gets where it enters
    the transcript still finds each key whole."""
    if len(text) <= limit:
        return text
    note = f"... [{len(text) - limit:,} more characters]"
    return cut(text, limit - len(note), secrets) + note


def one_line(text: str, limit: int = PREVIEW_CHARS, secrets: Sequence[str] | None = None) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else cut(flat, limit - 3, secrets) + "..."


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` that reads only statically what it dispatches on: a built-in's subclass that keeps the
    built-in's ``repr`` is shown through the built-in's own iteration (its ``__len__``/``__iter__``
    overrides are never run), dicts and sets are not sorted, and other objects get their own ``repr``."""

    def repr1(self, x: Any, level: int) -> str:
        cls = type(x)
        if has_base(x, os._Environ):  # reached through a container: as secret as os.environ itself
            return ENVIRON_HIDDEN
        base = builtin_base(x, _BOUNDED_TYPES)
        if base is None or (cls is not base and _own_python_repr(x, base)):
            return self.repr_instance(x, level)
        plain = x if cls is base else _as_base(x, base, self.maxlist + 1)
        text: str = getattr(self, "repr_" + base.__name__)(plain, level)
        return text if cls is base else f"{class_name(cls)}({text})"

    def repr_instance(self, x: Any, level: int) -> str:
        text = exact_text(repr(x))  # the object's own repr: user code (the caller's time limit)
        return text if len(text) <= self.maxother else text[: self.maxother - 3] + "..."

    def repr_bytes(self, x: Any, level: int) -> str:
        text = repr(bytes(x[: self.maxstring]))
        return text + ("..." if len(x) > self.maxstring else "")

    def repr_bytearray(self, x: Any, level: int) -> str:
        return f"bytearray({self.repr_bytes(x, level)})"

    def repr_int(self, x: Any, level: int) -> str:
        try:
            text = repr(x)
        except ValueError:  # more digits than Python converts
            return "<int with more than 4300 digits>"
        return text if len(text) <= self.maxlong else text[: self.maxlong // 2] + "..." + text[-self.maxlong // 2 :]

    def repr_dict(self, x: Any, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [
            f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}"
            for key, value in itertools.islice(dict.items(x), self.maxdict)
        ]
        return "{" + ", ".join(items) + (", ..." if len(x) > self.maxdict else "") + "}"

    def repr_set(self, x: Any, level: int) -> str:
        return self._first_items(x, level, "{", "}") if x else "set()"

    def repr_frozenset(self, x: Any, level: int) -> str:
        return self._first_items(x, level, "frozenset({", "})") if x else "frozenset()"

    def _first_items(self, x: Any, level: int, left: str, right: str) -> str:
        """A set's first items in iteration order (``reprlib`` would sort them all: user ``__lt__``, and
        O(n log n) in C for a huge set)."""
        if level <= 0:
            return left + "..." + right
        items = [self.repr1(item, level - 1) for item in itertools.islice(x, self.maxset)]
        return left + ", ".join(items) + (", ..." if len(x) > self.maxset else "") + right


def _own_python_repr(value: Any, base: type) -> bool:
    """Whether a built-in's subclass has a ``repr`` of its own written in Python (run, with the time limit);
    one in C (``OrderedDict``, ``defaultdict``) cannot be stopped, so it is shown by its first items."""
    return overrides(value, "__repr__", base) and type(class_attribute(type(value), "__repr__")) is types.FunctionType


def _as_base(value: Any, base: type, count: int) -> Any:
    """The first ``count`` items (characters) of a built-in's subclass as a plain built-in value."""
    if base in (str, bytes, bytearray):
        return base.__getitem__(value, slice(0, 10_000))
    if base is int:
        return int.__index__(value)
    items = static_items(value, count)
    return tuple(items or ()) if base is tuple else items  # sets shown as lists of their first items


_BOUNDED = _BoundedRepr()
_BOUNDED.maxlevel = 3
_BOUNDED.maxlist = _BOUNDED.maxtuple = _BOUNDED.maxdict = _BOUNDED.maxset = _BOUNDED.maxfrozenset = 20
_BOUNDED.maxdeque = _BOUNDED.maxarray = 20
_BOUNDED.maxstring = _BOUNDED.maxother = 200
_BOUNDED.maxlong = 60
_BOUNDED_TYPES = (list, tuple, dict, set, frozenset, collections.deque, str, bytes, bytearray, int)


def preview_repr(value: Any) -> str:
    """A bounded ``repr`` (see the module docstring; anything but built-ins runs its own ``repr``: call it under
    a time limit). A ``repr`` that prints ``os.environ`` (a ``SimpleNamespace`` holding it) is not shown."""
    text = _BOUNDED.repr(value)
    if "environ({" in text:  # how repr(os.environ) begins
        return f"<{type_name(value)} that holds os.environ: not shown, it holds the keys>"
    return text


def safe_repr(value: Any, caller: SafeCaller, limit: int, secrets: Sequence[str] | None = None) -> str:
    """``repr(value)`` cut to ``limit`` (``clip``; ``secrets``: the keys if already read; bounded for
    built-in containers); a note when it raises or hangs."""
    try:
        text = caller.call(lambda: preview_repr(value))
    except CallTimeout as error:
        return f"<repr of {type_name(value)} {error}>"
    except BaseException as error:  # noqa: BLE001 - a broken repr is a fact about the object
        return f"<repr of {type_name(value)} failed: {error_text(error, caller)}>"
    if type(text) is not str:
        return f"<repr of {type_name(value)} returned {type_name(text)}>"
    return clip(text, limit, secrets)


def shape_of(value: Any, caller: SafeCaller | None = None) -> str:
    """``shape (3, 4)`` / ``len 12`` / ``""``. A length only through the built-in's own ``__len__`` (a list
    subclass's override is user code, which could hang); a shape only of a numpy/pandas-like object, read
    with ``caller``'s time limit (no ``caller``: no shape)."""
    if caller is not None and is_array_like(value) and class_attribute(type(value), "shape") is not None:
        try:
            shape = caller.call(lambda: tuple(value.shape))
        except BaseException:  # noqa: BLE001 - an odd shape attribute, or one that hangs
            return ""
        return f"shape {shape}"
    length = static_len(value)
    return f"len {length:,}" if length is not None else ""


def is_array_like(value: Any) -> bool:
    """A numpy/pandas/polars/torch-like object (by its class's module, read statically): its attributes and
    summaries are library code."""
    module = type_name(value).split(".")[0]
    return module in ("numpy", "pandas", "polars", "torch", "xarray", "scipy", "jax", "tensorflow")


def is_user_variable(name: Any, value: Any, hidden: Iterable[str] = ()) -> bool:
    """Not a ``_``-name, module, IPython's own or pi-kernel's object; read statically (no attribute of the
    object itself is read: a proxy whose attribute access hangs or raises is still the user's variable)."""
    if type(name) is not str or name.startswith("_") or name in HIDDEN_NAMES or name in hidden:
        return False
    return not has_base(value, types.ModuleType) and not defined_in(value).startswith(
        ("pi_kernel", "IPython.core.autocall")
    )


def user_variables(namespace: Mapping[str, Any], hidden: Iterable[str] = ()) -> list[tuple[str, Any]]:
    hidden = set(hidden)
    return [(name, value) for name, value in list(namespace.items()) if is_user_variable(name, value, hidden)]


def columns_of(value: Any, limit: int = 20) -> str:
    """A DataFrame's column names (the first ``limit``), else ``""`` (library code: call it with a time limit)."""
    if type_name(value) not in ("pandas.DataFrame", "polars.DataFrame"):
        return ""
    names = [str(column) for column in list(value.columns)[:limit]]
    more = len(value.columns) - len(names)
    return "columns: " + ", ".join(names) + (f", ... (+{more})" if more > 0 else "")


def list_variables(
    namespace: Mapping[str, Any], caller: SafeCaller, limit: int = DEFAULT_LIMIT, hidden: Iterable[str] = ()
) -> str:
    """The user's variables, one line each (type, shape or length, preview), within ``limit`` characters."""
    variables = user_variables(namespace, hidden)
    if not variables:
        return "No user variables yet."
    header = f"{len(variables):,} user variable(s):"
    lines = [header]
    used = len(header)
    deadline = time.monotonic() + LISTING_BUDGET
    secrets = environment_secrets()
    for index, (name, value) in enumerate(variables):
        shape = shape_of(value, caller)
        line = f"- {name}: {type_name(value)}{' ' + shape if shape else ''}"
        if is_secret_value(name, value):
            line += f" = {HIDDEN_VALUE}"
        elif time.monotonic() < deadline:
            line += f" = {one_line(safe_repr(value, caller, 400, secrets), PREVIEW_CHARS, secrets)}"
        rest = variables[index:]
        if used + len(line) + 1 > limit - 200 and len(rest) > 1:
            lines.append(_more_names(rest, limit - used - 1))
            break
        lines.append(line)
        used += len(line) + 1
    return clip("\n".join(lines), limit, secrets)


def _more_names(rest: list[tuple[str, Any]], room: int) -> str:
    text = f"... and {len(rest):,} more: "
    names: list[str] = []
    for name, _value in rest:
        if len(text) + sum(len(n) + 2 for n in names) + len(name) + 60 > room:
            break
        names.append(name)
    left = len(rest) - len(names)
    return text + ", ".join(names) + (f", ... ({left:,} not named; inspect NAME shows one)" if left else "")


def close_matches(name: str, namespace: Mapping[str, Any], hidden: Iterable[str] = ()) -> list[str]:
    names = [candidate for candidate, _value in user_variables(namespace, hidden)]
    return difflib.get_close_matches(name, names, n=5, cutoff=0.5)


_SUMMARIES = {
    "pandas.DataFrame": "_dataframe",
    "pandas.Series": "_series",
    "numpy.ndarray": "_ndarray",
    "polars.DataFrame": "_polars",
}
"""Types whose description is a real computation (``DESCRIBE_TIMEOUT``; others get ``CALL_TIMEOUT``), and the
``Describer`` method that makes it."""


@dataclass
class Describer:
    """Descriptions by kind of object, each within ``limit`` characters."""

    caller: SafeCaller
    limit: int = DEFAULT_LIMIT

    def describe(self, name: str, value: Any) -> str:
        if is_secret_value(name, value):
            return f"{name}: {type_name(value)} {shape_of(value, self.caller)}\n{HIDDEN_VALUE}"
        try:
            timeout = DESCRIBE_TIMEOUT if type_name(value) in _SUMMARIES else None
            text = self.caller.call(lambda: self._describe(name, value), timeout)
        except CallTimeout as error:
            text = f"{name}: {type_name(value)}\n<description {error}>\n{safe_repr(value, self.caller, 300)}"
        except Exception as error:  # noqa: BLE001 - a hostile object: fall back to type and repr
            head = f"{name}: {type_name(value)} (summary failed: {class_name(type(error))})"
            text = f"{head}\n{safe_repr(value, self.caller, self.limit // 2)}"
        return clip(text, self.limit)

    def _describe(self, name: str, value: Any) -> str:
        kind = type_name(value)
        if kind in _SUMMARIES:
            summary: str = getattr(self, _SUMMARIES[kind])(name, value)
            return summary
        if builtin_base(value, BUILTIN_CONTAINERS) is not None:
            return self._collection(name, value)
        if has_base(value, type):
            return self._class(name, value)
        if any(type(value) is kind for kind in _ROUTINES):  # identity: no metaclass __eq__
            return self._callable(name, value)
        try:
            text = preview_repr(value)  # the object's own repr (under the time limit), or a bounded one
            text = clip(text, self.limit - len(name) - 40)
        except Exception as error:  # noqa: BLE001 - a broken repr is a fact about the object
            text = f"<repr failed: {class_name(type(error))}: {one_line(exact_text(str(error)), 120)}>"  # time limit
        return f"{name}: {kind}\n{text}"

    def _dataframe(self, name: str, df: Any) -> str:
        import numpy as np
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        rows, cols = df.shape
        lines = [f"{name}: pandas.DataFrame, {rows:,} rows x {cols:,} columns"]
        # By position throughout: column names may repeat (pd.concat(axis=1), a CSV with repeated headers).
        columns = list(df.columns)
        dtypes = list(df.dtypes)
        nulls = df.isna().sum().to_numpy()
        lines.append("columns (dtype, nulls):")
        lines.extend(f"  {columns[i]}: {dtypes[i]}, {int(nulls[i]):,} null" for i in range(min(cols, 40)))
        if cols > 40:
            lines.append(f"  ... ({cols - 40} more columns)")
        lines.append("head():")
        lines.append(df.iloc[:5, :8].to_string(max_colwidth=20))
        numeric = [i for i in range(cols) if is_numeric_dtype(dtypes[i]) and not is_bool_dtype(dtypes[i])][:12]
        if numeric:
            lines.append("numeric summary (count, mean, min, max):")
            for i in numeric:
                values = df.iloc[:, i].to_numpy(dtype="float64", na_value=np.nan)
                count = int(values.size - np.count_nonzero(np.isnan(values)))
                if count:
                    stats = (np.nanmean(values), np.nanmin(values), np.nanmax(values))
                    lines.append(f"  {columns[i]}: {count:,}, {stats[0]:.4g}, {stats[1]:.4g}, {stats[2]:.4g}")
                else:
                    lines.append(f"  {columns[i]}: 0")
        return "\n".join(lines)

    def _series(self, name: str, series: Any) -> str:
        lines = [f"{name}: pandas.Series {series.name!r}, {len(series):,} values, dtype {series.dtype}"]
        lines.append(f"nulls: {int(series.isna().sum()):,}")
        lines.append("head():\n" + series.head(5).to_string())
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        if is_numeric_dtype(series.dtype) and not is_bool_dtype(series.dtype) and series.notna().any():
            lines.append(f"mean {series.mean():.4g}, min {series.min():.4g}, max {series.max():.4g}")
        return "\n".join(lines)

    def _ndarray(self, name: str, array: Any) -> str:
        import numpy as np

        lines = [f"{name}: numpy.ndarray, shape {array.shape}, dtype {array.dtype}"]
        if array.size and np.issubdtype(array.dtype, np.number):
            lines.append(f"min {np.nanmin(array):.4g}, max {np.nanmax(array):.4g}, mean {np.nanmean(array):.4g}")
        lines.append(clip(np.array2string(array, threshold=20, edgeitems=3), 1000))
        return "\n".join(lines)

    def _polars(self, name: str, df: Any) -> str:
        rows, cols = df.shape
        lines = [f"{name}: polars.DataFrame, {rows:,} rows x {cols:,} columns", "columns (dtype, nulls):"]
        nulls = df.null_count().row(0)
        for column, dtype, count in list(zip(df.columns, df.dtypes, nulls, strict=False))[:40]:
            lines.append(f"  {column}: {dtype}, {count:,} null")
        lines.append("head():\n" + str(df.head(5)))
        return "\n".join(lines)

    def _collection(self, name: str, value: Any) -> str:
        kind = type_name(value)
        length = static_len(value) or 0  # the built-in's own length and items: a subclass's overrides not run
        sample = static_items(value, 10)
        head = f"{name}: {kind}, {length:,} item(s)"
        shown = clip(preview_repr(sample), self.limit - len(head) - 20)
        return f"{head}\nfirst {min(length, 10)}: {shown}"

    def _class(self, name: str, cls: type) -> str:
        """Signature of its own ``__init__`` and first paragraph of its docstring, read from the class's
        ``__dict__``s (no metaclass code runs)."""
        init = class_attribute(cls, "__init__")
        signature = "(...)"
        if type(init) is types.FunctionType:
            try:
                parameters = list(inspect.signature(init, follow_wrapped=False).parameters.values())[1:]
                signature = str(inspect.Signature(parameters))
            except (TypeError, ValueError):
                pass
        doc = class_attribute(cls, "__doc__")
        summary = _first_paragraph(inspect.cleandoc(exact_text(doc)) if has_base(doc, str) else "")
        return f"{name}: class {class_name(cls)}{signature}\n{summary}"

    def _callable(self, name: str, value: Any) -> str:
        try:
            signature = str(inspect.signature(value))
        except (TypeError, ValueError):
            signature = "(...)"
        summary = _first_paragraph(inspect.getdoc(value) or "")
        return f"{name}: function {getattr(value, '__qualname__', name)}{signature}\n{summary}"


def _first_paragraph(doc: str) -> str:
    return clip(doc.strip().split("\n\n")[0], 1500) if doc.strip() else "(no docstring)"


def variable_summary(value: Any, caller: SafeCaller | None = None) -> str:
    """``type shape`` and a DataFrame's column names: one short line; static reads, and library code (a
    DataFrame's shape and columns) with ``caller``'s time limit (no ``caller``: none)."""
    try:
        columns = caller.call(lambda: columns_of(value, 12)) if caller and is_array_like(value) else ""
    except BaseException:  # noqa: BLE001 - an odd frame-like object
        columns = ""
    return " ".join(part for part in (type_name(value), shape_of(value, caller), columns) if part)


_ROUTINES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
)
"""Functions and methods (exact types: these cannot be subclassed, so reading them runs no user code)."""
