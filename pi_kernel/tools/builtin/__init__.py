"""The built-in tools: ``read``, ``bash``, ``edit``, ``write`` (pi's coding tools), ``python``, the
notebook's read-only ``inspect`` and ``cells``, and the notebook bridge's ``edit_cell``, ``insert_cells``,
``run_cells`` and ``delete_cells`` (offered only while a front-end bridge is connected).

Each factory returns a ``ToolDefinition``; the tools learn where they run from the ``ToolContext`` given to
``wrap_tool_definition`` (cwd, workspace root, the notebook namespace for ``python`` and ``inspect``, the
cell history for ``cells``). ``read``, ``inspect`` and ``cells`` run without asking; the others ask for
approval by default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pi_kernel.tools.builtin.bash import create_bash_tool
from pi_kernel.tools.builtin.cells import create_cells_tool
from pi_kernel.tools.builtin.edit import create_edit_tool, prepare_edit_arguments
from pi_kernel.tools.builtin.inspect_tool import create_inspect_tool
from pi_kernel.tools.builtin.notebook_edits import (
    create_delete_cells_tool,
    create_edit_cell_tool,
    create_insert_cells_tool,
)
from pi_kernel.tools.builtin.python import create_python_tool
from pi_kernel.tools.builtin.read import create_read_tool
from pi_kernel.tools.builtin.run_cells import create_run_cells_tool
from pi_kernel.tools.builtin.write import create_write_tool
from pi_kernel.tools.definition import ToolContext, ToolDefinition

_FACTORIES: dict[str, Callable[[], ToolDefinition]] = {
    "read": create_read_tool,
    "bash": create_bash_tool,
    "edit": create_edit_tool,
    "write": create_write_tool,
    "python": create_python_tool,
    "inspect": create_inspect_tool,
    "cells": create_cells_tool,
    "edit_cell": create_edit_cell_tool,
    "insert_cells": create_insert_cells_tool,
    "run_cells": create_run_cells_tool,
    "delete_cells": create_delete_cells_tool,
}
BUILTIN_TOOL_NAMES = tuple(_FACTORIES)
"""In pi's order (read, bash, edit, write), then ours; the bridge's are ``notebook_edits.BRIDGE_TOOLS``."""


def builtin_tools(ctx: ToolContext | None = None, *, names: Iterable[str] | None = None) -> list[ToolDefinition]:
    """Fresh definitions of the built-in tools named (all by default), in ``BUILTIN_TOOL_NAMES`` order;
    ``ValueError`` for an unknown name. ``ctx.namespace`` is ``python``'s namespace for calls whose context
    has none: the tools read everything else from the context they are called with."""
    wanted = list(BUILTIN_TOOL_NAMES if names is None else names)
    unknown = [name for name in wanted if name not in BUILTIN_TOOL_NAMES]
    if unknown:
        raise ValueError(f"Unknown built-in tool(s): {', '.join(unknown)}. Known: {', '.join(BUILTIN_TOOL_NAMES)}")
    namespace = ctx.namespace if ctx is not None else None
    return [
        create_python_tool(namespace=namespace) if name == "python" else factory()
        for name, factory in _FACTORIES.items()
        if name in wanted
    ]


__all__ = [
    "BUILTIN_TOOL_NAMES",
    "builtin_tools",
    "create_bash_tool",
    "create_cells_tool",
    "create_edit_tool",
    "create_inspect_tool",
    "create_python_tool",
    "create_read_tool",
    "create_write_tool",
    "prepare_edit_arguments",
]
