"""Bounded, type-aware descriptions of the notebook's live objects (for ``inspect`` and the notebook context).

Everything here reads and never changes: no call of user code except the
object's own ``repr``/``len``/``shape``-like protocol methods and pandas/numpy
summaries, each run by ``SafeCaller`` on a helper thread with a time limit, so
a ``repr`` that raises, hangs or returns megabytes gives a short note instead
of a stuck or crashed kernel. The limit cannot stop a ``repr`` that runs in C
(a list of millions of tuples), so built-in containers and strings are
previewed with a bounded ``reprlib`` repr (their first items) instead. Every text is cut to a size limit and has known
keys masked; a string held under a secret-like name (``db_password``) is never
previewed (``secret_names``).

pandas DataFrames are summarised from per-column numpy reductions (count,
mean, min, max) rather than ``describe()`` (whose percentiles sort every
column), so a description of a large frame stays cheap.
"""

from __future__ import annotations

import ctypes
import inspect
import itertools
import queue
import reprlib
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pi_kernel.tools.builtin.secret_names import HIDDEN_VALUE, environment_secrets, is_secret_value, masked
from pi_kernel.tools.definition import ToolContext

DEFAULT_LIMIT = 4000
"""Characters of one description or listing (the ``describe_limit`` setting)."""
CALL_TIMEOUT = 1.0
"""Seconds one ``repr`` of a user object may take."""
DESCRIBE_TIMEOUT = 10.0
"""Seconds one whole description may take (a summary of a large DataFrame is real work)."""
LISTING_BUDGET = 3.0
"""Seconds of previews in one listing; after that, names and types only."""
PREVIEW_CHARS = 80
HIDDEN_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "open"})
"""IPython's own names in a user namespace."""


def describe_limit(ctx: ToolContext) -> int:
    """The context's ``describe_limit`` (the kernel's setting), else ``DEFAULT_LIMIT``."""
    limit = ctx.describe_limit
    return limit if isinstance(limit, int) and limit > 0 else DEFAULT_LIMIT


class CallTimeout(Exception):
    """A guarded call took longer than its limit."""


class SafeCaller:
    """Runs calls of user code on a helper thread with a time limit.

    A call that does not return in time is abandoned (an exception is raised
    in its thread, which stops Python code at its next bytecode) and the next
    call gets a fresh thread, so one hanging ``repr`` costs one timeout.
    """

    def __init__(self, timeout: float = CALL_TIMEOUT) -> None:
        self.timeout = timeout
        self._jobs: queue.SimpleQueue[Any] | None = None
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """``fn()``'s value; its exception re-raised; ``CallTimeout`` when it takes longer than ``timeout``
        (default: the caller's)."""
        limit = self.timeout if timeout is None else timeout
        if self._jobs is None or self._thread is None or not self._thread.is_alive():
            self._jobs = queue.SimpleQueue()
            self._thread = threading.Thread(target=_work, args=(self._jobs,), name="pi-describe", daemon=True)
            self._thread.start()
        done = threading.Event()
        box: dict[str, Any] = {}
        self._jobs.put((fn, box, done))
        if not done.wait(limit):
            thread, self._thread, self._jobs = self._thread, None, None
            if thread.ident is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(SystemExit))
            raise CallTimeout(f"took longer than {limit:g} s")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def close(self) -> None:
        if self._jobs is not None:
            self._jobs.put(None)
        self._jobs, self._thread = None, None


def _work(jobs: queue.SimpleQueue[Any]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, box, done = job
        try:
            box["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - user code may raise anything; the caller gets it
            if isinstance(error, SystemExit):
                return  # abandoned after a timeout
            box["error"] = error
        finally:
            done.set()


def clip(text: str, limit: int, secrets: Sequence[str] | None = None) -> str:
    """``text`` with keys masked (``secrets``: their values if already read), then cut to ``limit`` characters
    with a note of how much was left out: masked before the cut, where a key cut in two would no longer be
    found by the mask the result gets as it enters the transcript."""
    text = masked(text, secrets)
    if len(text) <= limit:
        return text
    note = f"... [{len(text) - limit:,} more characters]"
    return text[: max(0, limit - len(note))] + note


def one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _bounded_repr() -> reprlib.Repr:
    bounded = reprlib.Repr()
    bounded.maxlevel = 3
    bounded.maxlist = bounded.maxtuple = bounded.maxdict = bounded.maxset = bounded.maxfrozenset = 20
    bounded.maxdeque = bounded.maxarray = 20
    bounded.maxstring = bounded.maxother = 200
    bounded.maxlong = 60
    return bounded


_BOUNDED = _bounded_repr()
_BOUNDED_TYPES = (list, tuple, dict, set, frozenset, str, bytes, bytearray, int)


def preview_repr(value: Any) -> str:
    """``repr(value)``, but for exact built-in containers, strings and ints a bounded one (``reprlib``: the first
    items only): their ``repr`` runs in C, which the time limit cannot stop, and may be hundreds of MB."""
    return _BOUNDED.repr(value) if type(value) in _BOUNDED_TYPES else repr(value)


def safe_repr(value: Any, caller: SafeCaller, limit: int, secrets: Sequence[str] | None = None) -> str:
    """``repr(value)`` masked (``secrets``: the keys if already read), then cut to ``limit`` (bounded for
    built-in containers); a note when it raises or hangs."""
    try:
        text = caller.call(lambda: preview_repr(value))
    except CallTimeout as error:
        return f"<repr of {type_name(value)} {error}>"
    except BaseException as error:  # noqa: BLE001 - a broken repr is a fact about the object
        return f"<repr of {type_name(value)} failed: {type(error).__name__}: {one_line(str(error), 120)}>"
    if not isinstance(text, str):
        return f"<repr of {type_name(value)} returned {type(text).__name__}>"
    return clip(text, limit, secrets)


def type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module.split('.')[0]}.{cls.__qualname__}"


def shape_of(value: Any) -> str:
    """``shape (3, 4)`` / ``len 12`` / ``""``: cheap, from plain attributes only (no user ``__len__``, not
    even a list subclass's, which could hang)."""
    shape = getattr(type(value), "shape", None)
    if shape is not None and is_array_like(value):
        try:
            return f"shape {tuple(value.shape)}"
        except Exception:  # noqa: BLE001 - an odd shape attribute
            return ""
    if type(value) in _SIZED:  # exact built-in types only: a subclass's __len__ is user code (it may hang)
        return f"len {len(value):,}"
    return ""


_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset)


def is_array_like(value: Any) -> bool:
    """A numpy/pandas/polars/torch-like object: its attributes and summaries are library code."""
    module = type(value).__module__.split(".")[0]
    return module in ("numpy", "pandas", "polars", "torch", "xarray", "scipy", "jax", "tensorflow")


def is_user_variable(name: str, value: Any, hidden: Iterable[str] = ()) -> bool:
    """Not a ``_``-name, module, IPython's own or pi-kernel's object (an object whose attribute access
    raises, such as a proxy outside its context, counts as the user's)."""
    if name.startswith("_") or name in HIDDEN_NAMES or name in hidden:
        return False
    if issubclass(type(value), types.ModuleType):
        return False
    module = getattr(type(value), "__module__", "") or ""
    if isinstance(module, str) and module.startswith(("pi_kernel", "IPython.core.autocall")):
        return False
    try:
        defined_in = getattr(value, "__module__", None) if callable(value) else None
    except Exception:  # noqa: BLE001 - a hostile object's attribute access
        return True
    return not (isinstance(defined_in, str) and defined_in.startswith("pi_kernel"))


def user_variables(namespace: Mapping[str, Any], hidden: Iterable[str] = ()) -> list[tuple[str, Any]]:
    hidden = set(hidden)
    return [(name, value) for name, value in list(namespace.items()) if is_user_variable(name, value, hidden)]


def columns_of(value: Any, limit: int = 20) -> str:
    """A DataFrame's column names (the first ``limit``), else ``""``."""
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
        shape = shape_of(value)
        line = f"- {name}: {type_name(value)}{' ' + shape if shape else ''}"
        if is_secret_value(name, value):
            line += f" = {HIDDEN_VALUE}"
        elif time.monotonic() < deadline:
            line += f" = {one_line(safe_repr(value, caller, 400, secrets), PREVIEW_CHARS)}"  # masked, then cut
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
    import difflib

    names = [candidate for candidate, _value in user_variables(namespace, hidden)]
    return difflib.get_close_matches(name, names, n=5, cutoff=0.5)


_SUMMARISED = frozenset({"pandas.DataFrame", "pandas.Series", "numpy.ndarray", "polars.DataFrame"})
"""Types whose description is a real computation (``DESCRIBE_TIMEOUT``); others get ``CALL_TIMEOUT``."""


@dataclass
class Describer:
    """Descriptions by kind of object, each within ``limit`` characters."""

    caller: SafeCaller
    limit: int = DEFAULT_LIMIT

    def describe(self, name: str, value: Any) -> str:
        if is_secret_value(name, value):
            return f"{name}: {type_name(value)} {shape_of(value)}\n{HIDDEN_VALUE}"
        try:
            timeout = DESCRIBE_TIMEOUT if type_name(value) in _SUMMARISED else None
            text = self.caller.call(lambda: self._describe(name, value), timeout)
        except CallTimeout as error:
            text = f"{name}: {type_name(value)}\n<description {error}>\n{safe_repr(value, self.caller, 300)}"
        except Exception as error:  # noqa: BLE001 - a hostile object: fall back to type and repr
            head = f"{name}: {type_name(value)} (summary failed: {type(error).__name__})"
            text = f"{head}\n{safe_repr(value, self.caller, self.limit // 2)}"
        return clip(text, self.limit)

    def _describe(self, name: str, value: Any) -> str:
        kind = type_name(value)
        if kind == "pandas.DataFrame":
            return self._dataframe(name, value)
        if kind == "pandas.Series":
            return self._series(name, value)
        if kind == "numpy.ndarray":
            return self._ndarray(name, value)
        if kind == "polars.DataFrame":
            return self._polars(name, value)
        if isinstance(value, (dict, list, tuple, set, frozenset)):
            return self._collection(name, value)
        if inspect.isclass(value) or inspect.isroutine(value):
            return self._callable(name, value)
        try:
            text = clip(repr(value), self.limit - len(name) - 40)  # under the time limit
        except Exception as error:  # noqa: BLE001 - a broken repr is a fact about the object
            text = f"<repr failed: {type(error).__name__}: {one_line(str(error), 120)}>"
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
        sample: Any
        if isinstance(value, dict):
            sample = dict(itertools.islice(value.items(), 10))  # not a list of a big dict's items
        elif isinstance(value, (set, frozenset)):
            sample = list(itertools.islice(value, 10))
        else:
            sample = value[:10]
        head = f"{name}: {kind}, {len(value):,} item(s)"
        shown = clip(repr(sample), self.limit - len(head) - 20)
        return f"{head}\nfirst {min(len(value), 10)}: {shown}"

    def _callable(self, name: str, value: Any) -> str:
        kind = "class" if inspect.isclass(value) else "function"
        try:
            signature = str(inspect.signature(value))
        except (TypeError, ValueError):
            signature = "(...)"
        doc = inspect.getdoc(value) or ""
        summary = doc.strip().split("\n\n")[0] if doc else "(no docstring)"
        return f"{name}: {kind} {getattr(value, '__qualname__', name)}{signature}\n{clip(summary, 1500)}"


def variable_summary(value: Any) -> str:
    """``type shape`` and a DataFrame's column names: one short line, nothing but attribute reads."""
    parts = [type_name(value)]
    shape = shape_of(value)
    if shape:
        parts.append(shape)
    try:
        columns = columns_of(value, 12)
    except Exception:  # noqa: BLE001 - an odd frame-like object
        columns = ""
    if columns:
        parts.append(columns)
    return " ".join(parts)
