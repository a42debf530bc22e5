"""``%pi`` and ``%%pi``.

``%%pi [--model NAME] [--no-tools] [--max-turns N] [--approve MODE]`` + a prompt:
one turn of the session's agent. There is one way to run it: as a task on
the shell's own event loop. ``PiCellRewriter`` (an IPython
``input_transformers_post`` entry) turns such a cell into
``await run_pi_cell(body, line)`` wherever IPython runs top-level ``await`` on
asyncio (ipykernel, the terminal), so the turn runs inside the kernel's event
loop; ``%pi mcp add|remove|restart`` and ``%pi compact`` lines at a cell's
top level likewise become ``await run_pi_line(line)`` (MCP sessions live on
that loop too), also when written as ``get_ipython().run_line_magic("pi", f"...")``.

The ``%%pi`` cell magic below runs only where that rewrite did not happen:
outside a kernel with ``%autoawait off`` (no loop runs: the turn runs to the
end on IPython's loop, approvals on stdin only), or where the kernel's loop is
busy running this very cell: ``%autoawait off`` in a kernel, or a ``%%pi``
cell run from inside another (``%%capture``, ``%%time``, ``%run``,
``shell.run_cell``), found by ``CellDepth`` from IPython's
``pre_run_cell``/``post_run_cell`` events. There it says so and what to do
(``cell_runner.run_cell_sync``) instead of starting a loop of its own.

``%pi`` line commands: see ``line_commands.HELP``. The line is not expanded as IPython does
for most magics (``{expr}`` / ``$name``): ``%pi allow ID --args {"a": 1}`` is
JSON, and expansion would turn it into something else (or nothing) silently.

``pi_kernel.kernel.cell_runner`` and ``pi_kernel.kernel.line_commands`` are
imported lazily, when ``%pi`` / ``%%pi`` first runs: this module loads with the
kernel, and they pull in the tool and agent layers (about 100 ms).
"""

from __future__ import annotations

import ast
import threading
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from pi_kernel.kernel import outgoing

if TYPE_CHECKING:
    from pi_kernel.kernel.session import PiSession


RUNNER = "__import__('pi_kernel.kernel.extension', fromlist=['run_pi_cell']).run_pi_cell"
LINE_RUNNER = "__import__('pi_kernel.kernel.extension', fromlist=['run_pi_line']).run_pi_line"
AWAITED_LINES = ("mcp add", "mcp remove", "mcp restart", "compact")
"""``%pi`` lines that wait on the loop (MCP servers start and stop there; ``compact`` asks the model):
awaited where they are a statement of the cell's top level (``_await_pi_lines``)."""


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
    call = _pi_magic(tree.body[0].value, "run_cell_magic")
    values = [arg.value for arg in call.args if isinstance(arg, ast.Constant)] if call is not None else []
    if call is None or len(call.args) != 3 or len(values) != 3 or not all(isinstance(v, str) for v in values):
        return None
    return str(values[1]), str(values[2])


def awaited_line(line: str) -> bool:
    """Whether a ``%pi`` line is one of ``AWAITED_LINES``."""
    words = line.split()
    return bool(words) and (words[0] in AWAITED_LINES or " ".join(words[:2]) in AWAITED_LINES)


def _pi_magic(node: ast.expr, method: str) -> ast.Call | None:
    """``node`` if it is ``get_ipython().<method>('pi', ...)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method):
        return None
    target = node.func.value
    if not (isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "get_ipython"):
        return None
    first = node.args[0] if node.args else None
    return node if isinstance(first, ast.Constant) and first.value == "pi" else None


def _awaited_line_call(statement: ast.stmt) -> ast.expr | None:
    """The line argument of a top-level ``get_ipython().run_line_magic('pi', line)`` statement whose line
    (a string, or an f-string by its leading text) is one of ``AWAITED_LINES``."""
    if not isinstance(statement, ast.Expr):
        return None
    call = _pi_magic(statement.value, "run_line_magic")
    if call is None or len(call.args) != 2 or call.keywords:
        return None
    line = call.args[1]
    if isinstance(line, ast.Constant) and isinstance(line.value, str):
        text = line.value
    elif isinstance(line, ast.JoinedStr) and line.values and isinstance(line.values[0], ast.Constant):
        text = str(line.values[0].value)
    else:
        return None
    return line if awaited_line(text) else None


def _await_pi_lines(code: str) -> str:
    """``code`` with each top-level ``%pi`` line of ``AWAITED_LINES`` (as IPython translated it, or written
    as ``get_ipython().run_line_magic("pi", f"mcp add ...")``) turned into ``await run_pi_line(line)``."""
    if "run_line_magic" not in code:
        return code
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    lines = code.splitlines(keepends=True)

    def offset(lineno: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return sum(len(line) for line in lines[: lineno - 1]) + len(lines[lineno - 1].encode()[:col].decode())

    for statement in reversed(tree.body):
        line = _awaited_line_call(statement)
        if line is None or statement.end_lineno is None or statement.end_col_offset is None:
            continue
        argument = ast.get_source_segment(code, line)
        start = offset(statement.lineno, statement.col_offset)
        end = offset(statement.end_lineno, statement.end_col_offset)
        code = f"{code[:start]}await {LINE_RUNNER}({argument}){code[end:]}"
    return code


class CellDepth:
    """Which cells this thread runs now (IPython's ``pre_run_cell`` / ``post_run_cell``): a cell transformed
    while another runs is run from inside that one (``%%capture``, ``%%time``, ``%run``,
    ``shell.run_cell``). Such a cell cannot await on the loop that runs the outer one: IPython's synchronous
    ``run_cell`` would hand its top-level ``await`` to ``loop.run_until_complete`` ("This event loop is
    already running"). The kernel's own cells are transformed before their ``pre_run_cell``; ``%load_ext``
    attaches inside a cell, whose ``post_run_cell`` then finds nothing to remove.

    Not ``pre_execute`` / ``post_execute``: ipykernel's comm dispatch fires those around each comm handler
    and skips ``post_execute`` when a handler raises, which would leave the count up for good. IPython fires
    ``post_run_cell`` in a ``finally``; a cell is removed by its ``ExecutionInfo`` (``result.info``), so an
    unpaired ``post_run_cell`` (an empty cell returns before ``pre_run_cell``) removes nothing."""

    def __init__(self) -> None:
        self._running: dict[int, list[int]] = {}

    def enter(self, info: object = None) -> None:
        self._running.setdefault(threading.get_ident(), []).append(id(info))

    def leave(self, result: object = None) -> None:
        running = self._running.get(threading.get_ident())
        if not running:
            return
        key = id(getattr(result, "info", None))
        if key in running:
            del running[len(running) - 1 - running[::-1].index(key)]

    def inside_a_cell(self) -> bool:
        return bool(self._running.get(threading.get_ident()))


class PiCellRewriter:
    """``rewrite_pi_cell``: the ``input_transformers_post`` entry for one shell (``pi_kernel`` marks it as ours)."""

    pi_kernel = True

    def __init__(self, shell: Any, depth: CellDepth | None = None) -> None:
        self.shell = shell
        self.depth = depth or CellDepth()

    def __call__(self, lines: list[str]) -> list[str]:
        code = "".join(lines)
        if ("run_cell_magic" not in code and "run_line_magic" not in code) or not self.may_await():
            return lines
        found = _pi_cell_magic_call(code)
        if found is not None:
            line, body = found
            return [f"await {RUNNER}({body!r}, {line!r})\n"]
        awaited = _await_pi_lines(code)
        return awaited.splitlines(keepends=True) if awaited != code else lines

    def may_await(self) -> bool:
        """A top-level ``await`` in this cell runs on the shell's loop: autoawait is on and it is no cell
        run from inside another."""
        return can_await(self.shell) and not self.depth.inside_a_cell()


def make_cell_rewriter(shell: Any, depth: CellDepth | None = None) -> PiCellRewriter:
    """The ``input_transformers_post`` entry for ``shell``."""
    return PiCellRewriter(shell, depth)


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
        from pi_kernel.kernel.cell_runner import run_cell_sync, show_notices
        from pi_kernel.kernel.line_commands import run_line_command

        outgoing.claim_request()  # this cell is pi's now: what it sends is masked, whatever its code names
        show_notices(self.session)
        if cell is not None:
            run_cell_sync(self.session, cell, line, autoawait=can_await(self.shell))
            return

        print_output(run_line_command(self.session, line))


def print_output(output: str) -> None:
    """A ``%pi`` command's answer, masked here too: output captured in the cell (``%%capture``) never reaches
    ``outgoing``."""
    if output:
        outgoing.print_masked(output)
