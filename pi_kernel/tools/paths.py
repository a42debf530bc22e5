"""Where a path a model wrote really points: ``~``, the tool's cwd, the workspace root.

Port of pi's ``path-utils.ts``: a leading ``@`` (models copy it from
``@file`` mentions) is dropped, unusual Unicode spaces become plain spaces,
``~`` / ``~/`` expand to the home directory, and a relative path resolves
against ``ToolContext.cwd``. ``resolve_read_path`` also tries the spellings
macOS uses in screenshot names (narrow no-break space before AM/PM, NFD
letters, a curly apostrophe) when the path as written does not exist.

Added here: the optional workspace confinement. With
``ToolContext.workspace_root`` set, a path whose real location (symlinks and
``..`` resolved, also for a file that does not exist yet) is outside the root
is refused with ``WorkspaceError``. This guards the file tools; it is not a
sandbox for ``bash`` or ``python``, which can reach anything the process can.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Protocol


class PathContext(Protocol):
    """What the path rules read of a tool's context (``definition.ToolContext`` has it)."""

    @property
    def cwd(self) -> Path: ...

    @property
    def workspace_root(self) -> Path | None: ...


_UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
_AM_PM = re.compile(r" (AM|PM)\.", re.IGNORECASE)
_NARROW_NO_BREAK_SPACE = "\u202f"


class WorkspaceError(PermissionError):
    """A tool was asked to reach a path outside ``ToolContext.workspace_root``."""


def expand_path(path: str) -> str:
    """``@`` prefix dropped, odd spaces normalised, ``~`` expanded (as pi's ``expandPath``)."""
    normalized = _UNICODE_SPACES.sub(" ", path[1:] if path.startswith("@") else path)
    if normalized == "~":
        return os.path.expanduser("~")
    if normalized.startswith("~/"):
        return os.path.expanduser("~") + normalized[1:]
    return normalized


def resolve_to_cwd(path: str, cwd: str | os.PathLike[str]) -> str:
    """The absolute, lexically normalised path (``..`` folded; symlinks kept)."""
    expanded = expand_path(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(os.path.abspath(os.fspath(cwd)), expanded)
    return os.path.normpath(expanded)


def resolve_read_path(path: str, cwd: str | os.PathLike[str]) -> str:
    """``resolve_to_cwd``, then the macOS screenshot spellings when the plain one is missing."""
    resolved = resolve_to_cwd(path, cwd)
    if os.path.exists(resolved):
        return resolved
    nfd = unicodedata.normalize("NFD", resolved)
    for variant in (
        _AM_PM.sub(lambda match: f"{_NARROW_NO_BREAK_SPACE}{match.group(1)}.", resolved),
        nfd,
        resolved.replace("'", "\u2019"),
        nfd.replace("'", "\u2019"),
    ):
        if variant != resolved and os.path.exists(variant):
            return variant
    return resolved


def check_in_workspace(absolute_path: str, workspace_root: str | os.PathLike[str] | None, shown_as: str) -> None:
    """Raise ``WorkspaceError`` when ``absolute_path`` really lies outside ``workspace_root``.

    Both sides are resolved with ``os.path.realpath`` (which follows the
    existing part of a path that does not exist yet), so ``..`` and symlinks
    that lead out are caught. ``shown_as`` is the path as the model wrote it.
    """
    if workspace_root is None:
        return
    root = os.path.realpath(os.fspath(workspace_root))
    real = os.path.realpath(absolute_path)
    if real != root and os.path.commonpath([root, real]) != root:
        where = shown_as if real == absolute_path else f"{shown_as} (resolves to {real})"
        raise WorkspaceError(f"Path {where} is outside the workspace root {root}; access refused.")


def tool_cwd(ctx: PathContext) -> str:
    """The context's working directory as an absolute path."""
    return os.path.abspath(os.fspath(ctx.cwd))


def resolve_tool_path(path: str, ctx: PathContext, *, for_read: bool = False) -> str:
    """The absolute path a file tool works on, checked against the workspace root."""
    cwd = tool_cwd(ctx)
    absolute = resolve_read_path(path, cwd) if for_read else resolve_to_cwd(path, cwd)
    check_in_workspace(absolute, ctx.workspace_root, path)
    return absolute


def resolve_tool_cwd(ctx: PathContext) -> str:
    """The working directory for ``bash``, checked against the workspace root."""
    cwd = tool_cwd(ctx)
    check_in_workspace(cwd, ctx.workspace_root, cwd)
    return cwd


__all__ = [
    "WorkspaceError",
    "check_in_workspace",
    "expand_path",
    "resolve_read_path",
    "resolve_to_cwd",
    "resolve_tool_cwd",
    "resolve_tool_path",
    "tool_cwd",
]
