"""Code the agent puts into cells, and the cells ``run_cells`` runs, are scanned for secrets like ``python``
code (real kernel, scripted front-end, ``auto`` mode).

``insert_cells`` with ``print(list(os.environ['OPENAI_API_KEY'].encode()))`` and then ``run_cells`` of it both
ran without a question: the secret check read only ``bash.command`` and ``python.code``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, approval_comm, approval_requests, kernel_env
from notebook_frontend import ScriptedFrontend, new_notebook

pytestmark = pytest.mark.kernel

LEAK = "print(list(os.environ['OPENAI_API_KEY'].encode()))"
PI_CELL = "%%pi\nGo"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url, PI_NOTEBOOK_TIMEOUT="3"), jupyter_path=pi_jupyter_path) as d:
        yield d


@pytest.fixture
def frontend(kernel: KernelDriver) -> Iterator[ScriptedFrontend]:
    kernel.run("%pi reset")
    kernel.run("%pi approve auto")
    front = ScriptedFrontend(kernel, new_notebook(["import os", f"import os\n{LEAK}", "x = 1", PI_CELL])).connect()
    yield front
    front.disconnect()


def denied_turn(kernel: KernelDriver, front: ScriptedFrontend) -> list[dict[str, Any]]:
    """Run the ``%%pi`` cell, denying every approval card: the cards asked."""
    seen: list[dict[str, Any]] = []
    pi_cell = next(cell for cell in front.notebook.cells if cell.source.startswith("%%pi"))
    with approval_comm(kernel) as comm_id:

        def on_iopub(message: dict[str, Any]) -> None:
            front.handle(message)
            request = approval_requests(message)
            if request is not None:
                seen.append(request)
                answer = {"action": "resolve", "tool_call_id": request["tool_call_id"], "decision": "deny"}
                kernel.comm_send(comm_id, {**answer, "reason": "no"})

        result = kernel.run(pi_cell.source, cell_id=pi_cell.id, on_iopub=on_iopub, timeout=60)
    assert result.status == "ok", result.text
    return seen


def test_run_cells_of_code_that_reads_a_key_asks_in_auto_mode(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    server.enqueue(tool_call_chunks([("run_cells", {"cells": ["#2"]})]), text_chunks("Done."))
    seen = denied_turn(kernel, frontend)
    assert len(seen) == 1, seen  # asked, once
    assert frontend.cell(1).outputs == []  # denied: not run


def test_run_cells_of_plain_code_runs_unasked_in_auto_mode(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    server.enqueue(tool_call_chunks([("run_cells", {"cells": ["#3"]})]), text_chunks("Done."))
    assert denied_turn(kernel, frontend) == []
    assert "ran" in str(server.tool_results("call_0")[-1])


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("insert_cells", {"after": "#1", "cells": [{"type": "code", "source": LEAK}]}),
        ("edit_cell", {"cell": "#3", "source": LEAK}),
        ("edit_cell", {"cell": "#3", "edits": [{"old_text": "x = 1", "new_text": LEAK}]}),
    ],
)
def test_code_written_into_a_cell_that_reads_a_key_asks_in_auto_mode(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend, tool: str, args: dict[str, Any]
) -> None:
    before = frontend.sources()
    server.enqueue(tool_call_chunks([(tool, args)]), text_chunks("Done."))
    seen = denied_turn(kernel, frontend)
    assert len(seen) == 1, seen  # asked, once
    assert frontend.sources() == before
