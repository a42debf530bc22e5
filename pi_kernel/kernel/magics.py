"""``%pi`` and ``%%pi``.

``%%pi [--model NAME] [--no-tools] [--max-turns N] [--approve MODE]`` + a prompt:
one turn of the session's agent. ``rewrite_pi_cell`` (an IPython
``input_transformers_post`` entry) turns such a cell into
``await run_pi_cell(body, line)`` wherever IPython runs top-level ``await`` on
asyncio (ipykernel, the terminal), so the turn runs inside the kernel's event
loop; the ``%%pi`` cell magic below is the fallback when that is off, or when
the cell runs inside another one (``%%capture``) while the loop runs.

``%pi`` line commands: see ``line_commands.HELP``. The line is not expanded as IPython does
for most magics (``{expr}`` / ``$name``): ``%pi allow ID --args {"a": 1}`` is
JSON, and expansion would turn it into something else (or nothing) silently.

``pi_kernel.kernel.cell_runner`` and ``pi_kernel.kernel.line_commands`` are
imported lazily, when ``%pi`` / ``%%pi`` first runs: this module loads with the
kernel, and they pull in the tool and agent layers (about 100 ms).
"""

from __future__ import annotations

import ast
import asyncio
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from pi_kernel.ai.secrets import mask
from pi_kernel.kernel import outgoing

if TYPE_CHECKING:
    from pi_kernel.kernel.session import PiSession


RUNNER = "__import__('pi_kernel.kernel.extension', fromlist=['run_pi_cell']).run_pi_cell"
_SYNC_RUN_CELL = InteractiveShell._run_cell.__code__


def _pi_cell_magic_call(code: str) -> tuple[str, str] | None:
    """``(line, body)`` if ``code`` is IPython's translation of a ``%%pi`` cell."""
    if "run_cell_magic" not in code:
        return None
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    call = tree.body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "run_cell_magic"):
        return None
    target = call.func.value
    if not (isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "get_ipython"):
        return None
    values = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    if len(values) != 3 or len(call.args) != 3 or values[0] != "pi":
        return None
    return str(values[1]), str(values[2])


class PiCellRewriter:
    """``rewrite_pi_cell``: the ``input_transformers_post`` entry for one shell (``pi_kernel`` marks it as ours)."""

    pi_kernel = True

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def __call__(self, lines: list[str]) -> list[str]:
        found = _pi_cell_magic_call("".join(lines))
        if found is None or not can_await(self.shell) or _run_by_a_running_cell():
            return lines
        line, body = found
        return [f"await {RUNNER}({body!r}, {line!r})\n"]


def _run_by_a_running_cell() -> bool:
    """Whether this cell is run from inside another while this thread's loop runs (``%%capture``, a cell calling
    ``shell.run_cell``): IPython's synchronous ``run_cell`` would hand a top-level ``await`` to
    ``loop.run_until_complete`` ("This event loop is already running"), so the ``%%pi`` magic's blocking path
    must run it. The kernel's own cells are transformed by ipykernel directly, not through ``_run_cell``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _SYNC_RUN_CELL:
            return True
        frame = frame.f_back
    return False


def make_cell_rewriter(shell: Any) -> Callable[[list[str]], list[str]]:
    """The ``input_transformers_post`` entry for ``shell``."""
    return PiCellRewriter(shell)


def can_await(shell: Any) -> bool:
    """IPython runs top-level ``await`` here, on asyncio."""
    try:
        from IPython.core.async_helpers import _asyncio_runner
    except ImportError:
        return False
    return bool(getattr(shell, "autoawait", False)) and getattr(shell, "loop_runner", None) is _asyncio_runner


@magics_class
class PiMagics(Magics):
    def __init__(self, shell: Any, session: PiSession) -> None:
        super().__init__(shell)
        self.session = session

    @no_var_expand
    @line_cell_magic
    def pi(self, line: str, cell: str | None = None) -> None:
        """%pi commands and %%pi prompts (%pi help)."""
        # Imported here, not at the top: both pull in pi_kernel.ai and the tools, which a kernel should
        # not pay for at start (this module loads with the kernel).
        from pi_kernel.kernel.cell_runner import run_cell_blocking, show_notices
        from pi_kernel.kernel.line_commands import run_line_command

        outgoing.claim_request()  # this cell is pi's now: what it sends is masked, whatever its code names
        show_notices(self.session)
        if cell is not None:
            run_cell_blocking(self.session, cell, line)
            return

        output = run_line_command(self.session, line)
        if output:
            print(mask(output))  # here too: output captured in the cell (``%%capture``) never reaches ``outgoing``
