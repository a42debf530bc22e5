"""``%pi undo`` of a turn's notebook changes, through the ``pi.notebook`` bridge of a scripted front-end:
cells edited, inserted and deleted come back as they were; a cell the user edited after the turn is
refused and named, never overwritten; the variables the turn's ``run_cells`` made are restored too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env
from notebook_frontend import ScriptedFrontend, new_notebook

pytestmark = pytest.mark.kernel

CELLS = ["x = 20", "y = x +* 2\ny", ("markdown", "# Notes"), "%%pi\nFix the notebook"]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_NOTEBOOK_TIMEOUT="5", PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


@pytest.fixture
def front(kernel: KernelDriver) -> Iterator[ScriptedFrontend]:
    frontend = ScriptedFrontend(kernel, new_notebook(CELLS)).connect()
    assert kernel.run("x = 20").status == "ok"
    yield frontend
    frontend.disconnect()


def agent_turn(kernel: KernelDriver, server: FakeOpenAI, front: ScriptedFrontend) -> None:
    calls = [
        {"name": "edit_cell", "arguments": {"cell": "#2", "source": "y = x * 2\ny"}, "id": "fix"},
        {
            "name": "insert_cells",
            "arguments": {"after": "#3", "cells": [{"type": "code", "source": "z = y + 1"}]},
            "id": "add",
        },
        {"name": "delete_cells", "arguments": {"cells": ["#3"]}, "id": "drop"},
    ]
    server.enqueue(tool_call_chunks(calls[:1]), tool_call_chunks(calls[1:2]), tool_call_chunks(calls[2:]))
    server.enqueue(tool_call_chunks([{"name": "run_cells", "arguments": {"cells": ["#2", "#3"]}, "id": "run"}]))
    server.enqueue(text_chunks("Fixed."))
    pi_cell = front.notebook.cells[-1]
    result = kernel.run(pi_cell.source, cell_id=pi_cell.id, on_iopub=front.on_iopub, timeout=60)
    assert result.status == "ok", result.text


def undo(kernel: KernelDriver, front: ScriptedFrontend) -> str:
    """``%pi undo``; its notebook part answers after the cell, so read on until the report is final."""
    result = kernel.run("%pi undo", on_iopub=front.on_iopub)
    assert result.status == "ok", result.text
    if "Undoing the notebook changes" not in result.text:
        return result.text

    def final(message: dict[str, Any]) -> bool:
        front.handle(message)
        text = str(message["content"].get("data", {}).get("text/plain", ""))
        return message["msg_type"] == "update_display_data" and "Undoing the notebook" not in text

    return str(kernel.wait_iopub(final, timeout=30)["content"]["data"]["text/plain"])


def test_undo_puts_the_cells_and_variables_back(
    kernel: KernelDriver, server: FakeOpenAI, front: ScriptedFrontend
) -> None:
    agent_turn(kernel, server, front)
    assert front.sources()[:3] == ["x = 20", "y = x * 2\ny", "z = y + 1"]
    assert kernel.run("print(y, z)").text.strip() == "40 41"
    report = undo(kernel, front)
    assert "3 notebook changes" in report and "Restored 2 variables" in report, report
    assert front.sources() == ["x = 20", "y = x +* 2\ny", "# Notes", "%%pi\nFix the notebook"]
    assert kernel.run("print('y' in globals(), 'z' in globals())").text.strip() == "False False"


def test_a_cell_the_user_edited_after_the_turn_is_refused_and_named(
    kernel: KernelDriver, server: FakeOpenAI, front: ScriptedFrontend
) -> None:
    agent_turn(kernel, server, front)
    fixed = front.notebook.cells[1]
    front.user_edit(1, "y = x * 3  # mine\ny")
    report = undo(kernel, front)
    assert f"Not restored: cell #2 ({fixed.id}): changed since the turn; your version is kept" in report, report
    assert front.sources()[1] == "y = x * 3  # mine\ny" and "# Notes" in front.sources()


def test_an_undo_without_the_bridge_leaves_the_notebook_changes_for_the_next_undo(
    kernel: KernelDriver, server: FakeOpenAI, front: ScriptedFrontend
) -> None:
    agent_turn(kernel, server, front)
    front.disconnect()
    first = undo(kernel, front)
    assert "Restored 2 variables" in first, first
    assert "3 notebook changes: no notebook front-end is connected; they are left to undo" in first, first
    assert front.sources()[:3] == ["x = 20", "y = x * 2\ny", "z = y + 1"]
    again = ScriptedFrontend(kernel, front.notebook).connect()
    try:
        second = undo(kernel, again)
        assert "undone already" not in second and "Restored 3 notebook changes" in second, second
        assert again.sources() == ["x = 20", "y = x +* 2\ny", "# Notes", "%%pi\nFix the notebook"]
    finally:
        again.disconnect()
