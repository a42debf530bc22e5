"""``TurnJournal``: what one ``%%pi`` turn changed, kept so that ``%pi undo`` can revert it.

The tools record into it (``ToolContext.journal``) as they work: ``record_file`` before ``write`` /
``edit`` change a file, ``record_notebook_change`` after a notebook change, ``before_code`` /
``after_code`` around the code of ``python`` and ``run_cells`` (the names it created, rebound or deleted,
the old references kept; before it runs, a copy of each object it may change in place).

In-place copies are decided statically: the names the code mentions (``ast``) bound to a DataFrame,
Series, ndarray, list, dict, set or bytearray (checked with ``type()``, never ``isinstance``: a proxy's
``__class__`` may lie), sized without calling user code, copied while the turn's budget
(``PI_UNDO_MEMORY``) lasts: a pandas copy-on-write copy where copy-on-write is on, else a deep ``copy()``;
builtin containers shallowly (their items are the same objects).

``finish()`` notes the turn's final state, so that ``revert`` refuses a file, a variable or a cell the user
changed after the turn (never overwrite the user's work). ``revert`` / ``revert_notebook`` return an
``UndoReport``: what was restored and, one line each, what was not.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import sys
import types
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pi_kernel.ai.user_objects import class_name, has_base, simple_name
from pi_kernel.tools.files import write_file_atomic
from pi_kernel.tools.notebook_document import BridgeGone, StaleCell

DEFAULT_MEMORY = 1 << 30
"""``PI_UNDO_MEMORY``'s default: bytes of copies and file contents one turn's journal may hold."""

_MISSING: Any = object()
"""A name that was not bound."""

_IMMUTABLE = (int, float, complex, bool, str, bytes, type(None), tuple, frozenset, range)
_NOT_DATA = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


@dataclass(frozen=True)
class NotebookChange:
    """One notebook change the turn applied (the notebook tools record it after it took effect)."""

    kind: Literal["edit", "insert", "delete"]
    cell_id: str
    index: int
    """0-based position of the cell (before a delete, after an insert)."""
    cell_type: str
    before: str | None
    """The source before (``None`` for an insert)."""
    after: str | None
    """The source after (``None`` for a delete)."""
    after_id: str | None = None
    """A delete: the id of the cell just before it (``FIRST``: it was the first), where undo puts it back."""


FIRST = "\x00first"
"""``NotebookChange.after_id`` of a deleted cell that was the first."""


class NotebookEditor(Protocol):
    """The part of ``NotebookDocument`` that undo uses (``read``, when it has it, places a cell put back)."""

    def edit(self, cell_id: str, expected: str, new: str) -> Awaitable[None]: ...
    def insert(self, index: int, cells: list[tuple[str, str]]) -> Awaitable[list[str]]: ...
    def delete(self, cell_ids: list[str], expected: list[str]) -> Awaitable[None]: ...


@dataclass
class UndoReport:
    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"Restored {', '.join(self.restored)}." if self.restored else "Nothing was restored."]
        lines += [f"Not restored: {line}" for line in self.not_restored]
        return "\n".join(lines)


@dataclass
class _FileRecord:
    before: bytes | None
    """``None``: the file did not exist."""
    after: str | None = None
    """``_digest`` at the turn's end."""


@dataclass
class _Copy:
    original: Any
    copy: Any
    size: int
    after: Any = None
    """A fingerprint of the object as the turn left it (``finish``): a shallow copy of a builtin container,
    a copy-on-write copy of a frame, a digest of an array's buffer; ``_MISSING``: none could be kept."""


class TurnJournal:
    def __init__(self, memory_budget: int = DEFAULT_MEMORY, label: str = "") -> None:
        self.memory_budget = memory_budget
        self.label = label
        """What the turn was (its prompt's first line), for ``%pi undo list``."""
        self.held = 0
        """Bytes of copies and file contents held now."""
        self.undone = False
        self._files: dict[Path, _FileRecord] = {}
        self._notebook: list[NotebookChange] = []
        self._variables: dict[str, list[Any]] = {}
        """name → [binding before the turn (or ``_MISSING``), binding after its last code]."""
        self._copies: dict[str, _Copy] = {}
        self._notes: dict[str, str] = {}
        """What cannot be restored, one line per key."""
        self._over_budget: dict[str, str] = {}
        """Names not copied for ``PI_UNDO_MEMORY`` → ``"a list, 56 bytes"``: one summary line at undo."""
        self._renamed: dict[str, str] = {}
        """A deleted cell put back has a new id: earlier changes of it (undone later) go to that one."""
        self._code_runs = 0

    # -- recording ----------------------------------------------------------------------------

    def record_file(self, path: Path | str) -> None:
        """Before ``write`` / ``edit`` changes ``path``: keep its bytes (or its absence), first time only."""
        path = Path(os.path.abspath(path))
        if path in self._files or f"file:{path}" in self._notes:
            return
        try:
            size = path.stat().st_size if path.is_file() else None
        except OSError:
            size = None
        if size is not None and self.held + size > self.memory_budget:
            self._notes[f"file:{path}"] = f"{path}: {_size(size)} is over PI_UNDO_MEMORY; its old content was not kept"
            return
        try:
            before = path.read_bytes() if size is not None else None
        except OSError as error:
            self._notes[f"file:{path}"] = f"{path}: could not be read before the change ({error.strerror})"
            return
        self.held += len(before or b"")
        self._files[path] = _FileRecord(before)

    def record_notebook_change(self, change: NotebookChange) -> None:
        self._notebook.append(change)

    def note(self, key: str, text: str) -> None:
        """Something the turn did that undo cannot revert (a ``bash`` command, an MCP tool), one line."""
        self._notes.setdefault(key, text)

    def before_code(self, namespace: dict[str, Any], code: str) -> object:
        """Before ``code`` runs in ``namespace``: copy what it may change in place (also the globals the
        functions it calls read); returns the token for ``after_code``. Code that calls anything but
        builtins and methods of the objects copied gets one line: what it did elsewhere is not undone."""
        self._code_runs += 1
        names, calls_out = _names_and_calls(code, namespace)
        for name in sorted(names):
            value = namespace.get(name, _MISSING)
            if value is _MISSING or name in self._copies or name in self._variables:
                continue
            self._keep_copy(name, value)
        if calls_out:
            first = code.strip().splitlines()[0] if code.strip() else ""
            shown = first if len(first) <= 60 else first[:57] + "..."
            self._notes[f"code:{self._code_runs}"] = (
                f"code `{shown}`: effects outside the variables it names — through called functions, files, "
                "databases — are not undone"
            )
        return dict(namespace)

    def after_code(self, namespace: dict[str, Any], token: object) -> None:
        """After the code ran (also after an error): note the names it created, rebound or deleted."""
        if not isinstance(token, dict):
            return
        before = token
        for name in before.keys() | namespace.keys():
            old, new = before.get(name, _MISSING), namespace.get(name, _MISSING)
            if old is new or (name.startswith("__") and name.endswith("__")):
                continue
            record = self._variables.setdefault(name, [old, new])
            record[1] = new

    def finish(self) -> None:
        """At the turn's end: note each file's content now, so that a later change by the user is seen, and
        drop the copies of objects that did not change (compared without calling their items' code)."""
        for path, record in self._files.items():
            record.after = _digest(path)
        for name, kept in list(self._copies.items()):
            if name not in self._variables and _unchanged(kept.original, kept.copy):
                self.held -= kept.size
                del self._copies[name]
                continue
            self._keep_fingerprint(kept)

    def release_copies(self) -> None:
        """Drop the in-place copies (a newer turn needs the memory); their objects are named at undo."""
        for name, kept in self._copies.items():
            self._notes.setdefault(f"copy:{name}", f"{name}: its copy was dropped for a newer turn's undo")
            self.held -= kept.size
        self._copies.clear()

    # -- what there is ------------------------------------------------------------------------

    @property
    def notebook_changes(self) -> list[NotebookChange]:
        return list(self._notebook)

    def is_empty(self) -> bool:
        """Nothing to revert (what cannot be reverted does not count)."""
        return not (self._files or self._notebook or self._changed_variables() or self._copies)

    def summary(self) -> str:
        parts = [
            _count(len(self._changed_variables()), "variable"),
            _count(len(self._files), "file"),
            _count(len(self._notebook), "notebook change"),
        ]
        return ", ".join(part for part in parts if part) or "nothing undoable"

    # -- reverting ----------------------------------------------------------------------------

    def revert(self, namespace: dict[str, Any] | None, report: UndoReport | None = None) -> UndoReport:
        """Restore the variables, the objects changed in place and the files (the notebook: ``revert_notebook``)."""
        report = report if report is not None else UndoReport()
        self.undone = True
        if namespace is not None:
            self._revert_variables(namespace, report)
        self._revert_files(report)
        report.not_restored += list(self._notes.values())
        self._notes.clear()
        if self._over_budget:
            report.not_restored.append(_over_budget_line(self._over_budget))
            self._over_budget.clear()
        return report

    async def revert_notebook(self, notebook: NotebookEditor | None, report: UndoReport) -> UndoReport:
        """Undo the notebook changes, newest first; a cell changed since is refused and named. When the
        bridge is missing or lost, the changes not undone yet are kept: ``%pi undo`` again undoes them."""
        changes = list(self._notebook)
        done = 0
        while changes:
            change = changes[-1]
            where = f"cell #{change.index + 1} ({change.cell_id})"
            try:
                if notebook is None:
                    raise BridgeGone("no notebook front-end is connected")
                await self._undo_change(notebook, change)
                done += 1
            except StaleCell:
                report.not_restored.append(f"{where}: changed since the turn; your version is kept")
            except BridgeGone as error:
                self.undone = False
                report.not_restored.append(
                    f"{_count(len(changes), 'notebook change')}: {error}; they are left to undo: "
                    "run %pi undo again once the notebook is connected"
                )
                break
            except Exception as error:  # noqa: BLE001 - each refusal (gone, bridge lost) becomes a line
                report.not_restored.append(f"{where}: {error}")
            changes.pop()
        self._notebook = changes
        if done:
            report.restored.append(_count(done, "notebook change"))
        return report

    async def _undo_change(self, notebook: NotebookEditor, change: NotebookChange) -> None:
        """Undo one change; a cell put back goes after the neighbour it had (read again now), and its new
        id replaces the old one for the earlier changes."""
        cell_id = self._renamed.get(change.cell_id, change.cell_id)
        if change.kind == "edit":
            await notebook.edit(cell_id, change.after or "", change.before or "")
        elif change.kind == "insert":
            await notebook.delete([cell_id], [change.after or ""])
        else:
            index = await self._index_after(notebook, change)
            ids = await notebook.insert(index, [(change.cell_type, change.before or "")])
            if ids:
                self._renamed[change.cell_id] = ids[0]

    async def _index_after(self, notebook: NotebookEditor, change: NotebookChange) -> int:
        """Where a deleted cell goes back: after its recorded neighbour, wherever that is now (its old index
        when the neighbour is gone, or the notebook cannot be read)."""
        read = getattr(notebook, "read", None)
        if change.after_id == FIRST:
            return 0
        if change.after_id is None or read is None:
            return change.index
        neighbour = self._renamed.get(change.after_id, change.after_id)
        cells = await read(max_chars=0)
        position = next((cell.index for cell in cells if cell.id == neighbour), None)
        return change.index if position is None else position + 1

    # -- inside -------------------------------------------------------------------------------

    def _keep_copy(self, name: str, value: Any) -> None:
        if name.startswith("_") or name in ("In", "Out"):
            return
        kind = type(value)
        if _one_of(kind, _IMMUTABLE) or has_base(value, *_NOT_DATA):  # identity and type(): no user code
            return
        if _kind(kind) is None:
            self._notes.setdefault(
                f"copy:{name}", f"{name} (a {simple_name(kind)}): not copied; any change made to it in place stays"
            )
            return
        size = _size_of(value)
        if size is None or self.held + size > self.memory_budget:
            shown = _size(size) if size is not None else "of unknown size"
            self._over_budget.setdefault(name, f"a {simple_name(kind)}, {shown}")
            return
        try:
            copied = _copy(value)
        except Exception as error:  # noqa: BLE001 - an object that cannot be copied is named, never fatal
            self._notes.setdefault(f"copy:{name}", f"{name}: could not be copied ({class_name(type(error))})")
            return
        self.held += size
        self._copies[name] = _Copy(value, copied, size)

    def _keep_fingerprint(self, kept: _Copy) -> None:
        kind = _kind(type(kept.original))
        try:
            if kind == "ndarray":
                kept.after = _array_digest(kept.original)
                return
            size = 0 if kind != "builtin" and _pandas_is_cow() else (_size_of(kept.original) or 0)
            if kind is None or self.held + size > self.memory_budget:
                kept.after = _MISSING
                return
            kept.after = _copy(kept.original)
            self.held += size
            kept.size += size
        except Exception:  # noqa: BLE001 - no fingerprint: undo refuses rather than overwrite
            kept.after = _MISSING

    def _left_as_the_turn_left_it(self, kept: _Copy) -> bool:
        if kept.after is None:  # finish() did not run (the turn is still running): nothing after it
            return True
        return kept.after is not _MISSING and _unchanged(kept.original, kept.after)

    def _changed_variables(self) -> dict[str, list[Any]]:
        return {name: record for name, record in self._variables.items() if record[0] is not record[1]}

    def _revert_variables(self, namespace: dict[str, Any], report: UndoReport) -> None:
        restored = 0
        for name, (before, after) in self._changed_variables().items():
            if namespace.get(name, _MISSING) is not after:
                report.not_restored.append(f"{name}: changed since the turn; left as it is")
                self._copies.pop(name, None)
                continue
            kept = self._copies.pop(name, None)
            if before is _MISSING:
                namespace.pop(name, None)
            elif kept is not None and kept.original is before and self._left_as_the_turn_left_it(kept):
                namespace[name] = _restore_in_place(before, kept.copy)
            else:
                namespace[name] = before
            restored += 1
        changed_in_place = 0
        for name, kept in self._copies.items():
            if namespace.get(name, _MISSING) is not kept.original:
                report.not_restored.append(f"{name}: rebound since the turn; left as it is")
                continue
            if not self._left_as_the_turn_left_it(kept):
                report.not_restored.append(f"{name}: changed in place since the turn; your version is kept")
                continue
            namespace[name] = _restore_in_place(kept.original, kept.copy)
            changed_in_place += 1
        self._copies.clear()
        self._variables.clear()
        self.held = 0
        if restored:
            report.restored.append(_count(restored, "variable"))
        if changed_in_place:
            report.restored.append(_count(changed_in_place, "object") + " changed in place")

    def _revert_files(self, report: UndoReport) -> None:
        restored = 0
        for path, record in self._files.items():
            if record.after is not None and _digest(path) != record.after:
                report.not_restored.append(f"{path}: changed since the turn; left as it is")
                continue
            try:
                if record.before is None:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                else:
                    write_file_atomic(path, record.before, make_parents=True)
                restored += 1
            except OSError as error:
                report.not_restored.append(f"{path}: {error.strerror or error}")
        self._files.clear()
        if restored:
            report.restored.append(_count(restored, "file"))


_SAFE_BUILTINS = frozenset(
    "abs all any bool dict divmod enumerate filter float format frozenset hash int isinstance issubclass iter "
    "len list map max min next pow print range repr reversed round set slice sorted str sum tuple type zip".split()
)
"""Builtins that change nothing outside their arguments (a call of anything else may)."""


def _names_and_calls(code: str, namespace: dict[str, Any]) -> tuple[set[str], bool]:
    """The names the code reads (and ``x += ...`` targets) plus the globals read by the user functions it
    calls (their code objects, read statically): the objects it may change in place; and whether it calls
    anything that may have effects elsewhere (a function, a method of an object not among those names).
    None and ``True`` when it does not parse. A name only assigned is rebound, not changed."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set(), True
    names: set[str] = set()
    calls_out = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Call):
            calls_out = calls_out or _calls_out(node.func, namespace)
    for name in list(names):
        function = namespace.get(name)
        if type(function) is types.FunctionType and function.__globals__ is namespace:
            names |= _globals_read(function.__code__)
    return names, calls_out


_PURE_MODULES = frozenset({"numpy", "pandas", "math", "statistics", "re", "json", "itertools", "functools"})
_WRITERS = ("to_", "save", "dump", "write")


def _calls_out(func: ast.expr, namespace: dict[str, Any]) -> bool:
    """Whether a call may change something the journal does not copy: anything but a builtin, a method of
    a copied kind of object (``df['x'].sum()``), a data library's function; writers (``to_csv``) always."""
    if isinstance(func, ast.Name):
        return func.id not in _SAFE_BUILTINS or func.id in namespace
    if not isinstance(func, ast.Attribute) or func.attr.startswith(_WRITERS):
        return True
    root: ast.expr = func.value
    while isinstance(root, ast.Attribute | ast.Subscript | ast.Call):
        root = root.func if isinstance(root, ast.Call) else root.value
    target = namespace.get(root.id, _MISSING) if isinstance(root, ast.Name) else _MISSING
    if target is _MISSING:
        return True
    if type(target) is types.ModuleType:
        return str(getattr(target, "__name__", "")).split(".")[0] not in _PURE_MODULES
    return _kind(type(target)) is None


def _globals_read(code: types.CodeType, depth: int = 0) -> set[str]:
    """The global names a function's code (and the functions defined in it) reads, by its code object."""
    names = set(code.co_names)
    if depth < 3:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                names |= _globals_read(const, depth + 1)
    return names


def _over_budget_line(names: dict[str, str]) -> str:
    shown = [f"{name} ({what})" for name, what in list(names.items())[:8]]
    more = f" and {len(names) - 8} more" if len(names) > 8 else ""
    if len(names) == 1:
        return f"{shown[0]}: over PI_UNDO_MEMORY, not copied; changes made in place stay"
    return f"{', '.join(shown)}{more}: over PI_UNDO_MEMORY, not copied; changes made to them in place stay"


def _array_digest(array: Any) -> str:
    """A digest of an ndarray's dtype, shape and buffer (no object arrays: their items are references)."""
    if array.dtype.kind == "O":
        raise TypeError("object array")
    numpy = sys.modules["numpy"]
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(memoryview(numpy.ascontiguousarray(array)).cast("B"))
    return digest.hexdigest()


def _pandas_is_cow() -> bool:
    """Whether pandas is copy-on-write (always from pandas 3, an option in 2.x)."""
    pandas = sys.modules.get("pandas")
    major = str(getattr(pandas, "__version__", "0")).split(".")[0]
    if major.isdigit() and int(major) >= 3:
        return True
    with contextlib.suppress(Exception):
        return pandas is not None and pandas.options.mode.copy_on_write is True
    return False


_BUILTIN = (list, dict, set, bytearray)
_LIBRARY_KINDS = {"ndarray": "numpy", "DataFrame": "pandas", "Series": "pandas"}


def _kind(kind: type) -> str | None:
    """``builtin``, ``ndarray``, ``DataFrame`` or ``Series`` for a kind the journal copies (the library's
    very class, already imported, not a look-alike), else ``None``."""
    if _one_of(kind, _BUILTIN):
        return "builtin"
    name = simple_name(kind)
    loaded = sys.modules.get(_LIBRARY_KINDS.get(name, ""))
    return name if loaded is not None and getattr(loaded, name, None) is kind else None


def _copy(value: Any) -> Any:
    """The copy the module docstring describes (copy-on-write for a frame where pandas is)."""
    if _kind(type(value)) in ("DataFrame", "Series"):
        return value.copy(deep=not _pandas_is_cow())
    return value.copy()


def _size_of(value: Any) -> int | None:
    """Bytes a copy costs, read without calling the object's own Python code (library types only)."""
    kind = _kind(type(value))
    try:
        if kind == "builtin":
            return sys.getsizeof(value)
        if kind == "ndarray":
            return int(value.nbytes)
        if kind == "DataFrame":
            return int(value.memory_usage(index=True, deep=False).sum())
        if kind == "Series":
            return int(value.memory_usage(index=True, deep=False))
    except Exception:  # noqa: BLE001 - unknown size: not copied, and named
        return None
    return None


def _restore_in_place(original: Any, copied: Any) -> Any:
    """Put ``copied``'s content back: into the same object for builtin containers (other references see it),
    else the copy takes the name's place."""
    kind = type(original)
    if _one_of(kind, (list, bytearray)):
        original[:] = copied
        return original
    if _one_of(kind, (dict, set)):
        original.clear()
        original.update(copied)
        return original
    return copied


def _unchanged(original: Any, copied: Any) -> bool:
    """Whether ``original`` still equals its copy (or an array its digest), decided without user code (else:
    assume it changed)."""
    kind = type(original)
    try:
        if isinstance(copied, str):
            return _array_digest(original) == copied
        if _one_of(kind, (list, bytearray, set)):
            return len(original) == len(copied) and all(a is b for a, b in zip(original, copied, strict=True))
        if kind is dict:
            return len(original) == len(copied) and all(
                a is c and b is d for (a, b), (c, d) in zip(original.items(), copied.items(), strict=True)
            )
        if _kind(kind) == "ndarray":
            return original.dtype.kind != "O" and original.shape == copied.shape and bool((original == copied).all())
        if _kind(kind) in ("DataFrame", "Series"):
            return _frame_unchanged(original, copied)
    except Exception:  # noqa: BLE001 - could not tell: keep the copy
        return False
    return False


def _frame_unchanged(original: Any, copied: Any) -> bool:
    """A copy-on-write copy: unchanged while every column still shares the copy's memory (a write would
    have copied it first), which costs no pass over the data; a deep copy: ``equals`` without object columns."""
    numpy = sys.modules.get("numpy")
    if numpy is None or original.shape != copied.shape or not original.index.equals(copied.index):
        return False
    if original.ndim == 1:
        pairs = [(original, copied)]
    else:
        if not original.columns.equals(copied.columns):
            return False
        pairs = [(original.iloc[:, i], copied.iloc[:, i]) for i in range(original.shape[1])]
    if all(numpy.may_share_memory(a.to_numpy(), b.to_numpy()) for a, b in pairs):
        return True
    plain = all(a.dtype.kind != "O" for a, _ in pairs)
    return plain and not _pandas_is_cow() and bool(original.equals(copied))


def _digest(path: Path) -> str:
    """sha256 of the file's content; ``""``: it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return ""
    except OSError:
        return "unreadable"


def _one_of(kind: type, kinds: tuple[type, ...]) -> bool:
    """``kind in kinds`` by identity (``in`` would call a metaclass's ``__eq__``)."""
    return any(kind is one for one in kinds)


def _count(number: int, noun: str) -> str:
    if not number:
        return ""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _size(size: float) -> str:
    if size < 1024:
        return f"{size:.0f} bytes"
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            break
    return f"{size:.1f} {unit}"
