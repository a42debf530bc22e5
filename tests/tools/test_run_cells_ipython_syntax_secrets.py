"""``run_cells`` is judged on a cell's *raw* source, then runs it *transformed* by IPython.

``approval._argument_reason`` judges the named cells' code "like python's" (``secret_mention_reason``), but
``run_cells`` runs ``_transform(cell.source)``: ``!env`` becomes ``get_ipython().system('env')``, ``%env X``
prints the variable. The same shell commands asked for the ``bash`` tool (and ``%system env`` is caught) go
through unasked in ``auto`` mode as ``!env`` / ``!printenv OPENAI_API_KEY`` / ``x = !env`` / ``%env KEY``
in a cell: the whole environment (keys whose names ``is_secret_name`` does not know included) reaches the
model with no question.
"""

from __future__ import annotations

import pytest

from pi_kernel.tools.approval import ApprovalPolicy, decide
from pi_kernel.tools.builtin import builtin_tools
from pi_kernel.tools.builtin.run_cells import RunCellsParams

TOOLS = {tool.name: tool for tool in builtin_tools(names=["run_cells", "bash"])}
AUTO = ApprovalPolicy(mode="auto").state()


@pytest.mark.parametrize(
    ("cell", "command"),
    [
        ("!env", "env"),
        ("!printenv OPENAI_API_KEY", "printenv OPENAI_API_KEY"),
        ("!!env", "env"),
        ("listing = !env\nprint(listing)", "env"),
        ("%env OPENAI_API_KEY", "printenv OPENAI_API_KEY"),
    ],
)
def test_a_cell_running_a_shell_command_that_reads_the_environment_asks_as_bash_does(cell: str, command: str) -> None:
    bash = decide(TOOLS["bash"], "bash", TOOLS["bash"].parameters(command=command), AUTO)
    assert bash.verdict == "ask"  # the bash tool asks for this command in auto mode
    verdict = decide(TOOLS["run_cells"], "run_cells", RunCellsParams(cells=["#1"]), AUTO, {"#1": cell})
    assert verdict.verdict == "ask", f"run_cells of {cell!r} runs unasked in auto mode"
