"""``notebooks/09_agent_edits.ipynb`` runs top to bottom on the local model with a notebook bridge, and shows
its lesson.

The scripted front-end (``notebook_frontend``) is the bridge: it holds the
notebook, runs its cells in order with their ids (as JupyterLab does) and
answers the kernel's ``pi.notebook`` requests; a ``pi.approval`` comm plays
the person who reads each card and approves it. The lesson: the failing cell
``#6`` is fixed in place after its card showed the change as a diff, runs
in the kernel with its output in that cell, and a new cell is added, every
change highlighted while its card waited.
"""

from __future__ import annotations

import os
from typing import Any

import nbformat
import pytest
from kernel_helpers import REPO, KernelDriver, approval_requests, kernel_env
from notebook_frontend import ScriptedFrontend, run_notebook

NOTEBOOK = REPO / "notebooks" / "09_agent_edits.ipynb"

pytestmark = [pytest.mark.kernel, pytest.mark.local_model]


def turn_calls(cell: Any) -> list[dict[str, Any]]:
    return [
        call
        for output in cell.get("outputs", [])
        for call in output.get("metadata", {}).get("pi_kernel", {}).get("tool_calls", [])
    ]


@pytest.mark.timeout(900)
def test_the_agent_fixes_runs_and_adds_cells_each_change_a_diff(pi_jupyter_path: str) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    failing = notebook.cells[5]
    assert "len(price)" in failing.source
    threads = {"PI_LOCAL_THREADS": os.environ["PI_LOCAL_THREADS"]} if os.environ.get("PI_LOCAL_THREADS") else {}
    with KernelDriver(env=kernel_env(PI_APPROVAL="ask", **threads), jupyter_path=pi_jupyter_path) as kernel:
        front = ScriptedFrontend(kernel, notebook, path="09_agent_edits.ipynb").connect()
        approvals = kernel.comm_open("pi.approval")
        kernel.run("pass")
        cards: list[dict[str, Any]] = []

        def approve(message: dict[str, Any]) -> None:
            request = approval_requests(message)
            if request is not None:
                cards.append(request)
                fields = {"action": "resolve", "tool_call_id": request["tool_call_id"], "decision": "approve"}
                kernel.comm_send(approvals, fields)

        results = run_notebook(kernel, front, timeout=300, on_iopub=approve)
    assert [result.status for result in results].count("error") == 1, [r.text[-300:] for r in results]

    # The card of the fix showed cell #6 and its change as a diff, and the cell was highlighted meanwhile.
    edit = next(card for card in cards if card["tool_name"] == "edit_cell")
    assert edit["preview"]["title"].startswith("edit cell #6 (code) prices = [3, 5, 8]"), edit
    diff = edit["preview"]["diff"]
    assert "-average = sum(prices) / len(price)\n" in diff and "+average = sum(prices) / len(prices)\n" in diff
    assert failing.id in front.highlighted
    # Cell #6 was fixed in place (no cell added below it) and run: its output is in the cell.
    assert (
        notebook.cells[5] is failing
        and failing.source == "prices = [3, 5, 8]\naverage = sum(prices) / len(prices)\naverage"
    )
    assert failing.outputs[-1]["output_type"] == "execute_result"
    assert failing.outputs[-1]["data"]["text/plain"].startswith("5.333")
    [run] = [call for cell in notebook.cells for call in turn_calls(cell) if call["name"] == "run_cells"]
    assert run["status"] == "done" and "5.333" in run["result"]["text"], run
    average = next(cell for cell in notebook.cells if cell.source == "average")
    assert average.outputs[0]["data"]["text/plain"].startswith("5.333")  # the kernel's namespace has it
    # A markdown cell was added at the end, its card showing it as added lines.
    insert = next(card for card in cards if card["tool_name"] == "insert_cells")
    assert "+## Summary: the average price is 5.33" in insert["preview"]["diff"]
    assert notebook.cells[-1].cell_type == "markdown" and notebook.cells[-1].source.startswith("## Summary"), (
        insert["args"],
        notebook.cells[-1],
    )
