"""Where no notebook bridge connects (nbclient/papermill, consoles) and where it connects late (``%load_ext``).

Without a bridge the tools that need it are not offered (neither in the API
``tools`` nor in the system prompt), a call to one anyway gets one clear
result, ``cells`` shows the recent cells as before, and nothing waits for a
front-end: the bridge's time limit is set far above the client's, so a wait
would fail the test. In a stock kernel, ``%load_ext pi_kernel`` greets an open
front-end (``pi.notebook.hello``), which connects and is then used.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from kernel_helpers import KernelDriver, kernel_env
from nbclient import NotebookClient
from notebook_frontend import ScriptedFrontend, new_notebook

pytestmark = pytest.mark.kernel

BRIDGE_TOOLS = {"edit_cell", "insert_cells", "run_cells", "delete_cells"}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def offered(body: dict[str, object]) -> set[str]:
    return {tool["function"]["name"] for tool in body["tools"]}  # type: ignore[index,union-attr]


def test_nbclient_is_not_offered_the_bridge_tools_and_nothing_waits(
    server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    notebook = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "pi", "display_name": "Pi Agent", "language": "python"}}
    )
    notebook.cells = [
        nbformat.v4.new_code_cell("total = 41 + 1"),
        nbformat.v4.new_code_cell("%%pi\nFix the first cell"),
    ]
    server.enqueue(
        tool_call_chunks([("edit_cell", {"cell": "#1", "source": "total = 0"}), ("cells", {})]),
        text_chunks("I cannot edit cells here."),
    )
    manager = KernelManager(
        kernel_name="pi", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(Path(pi_jupyter_path) / "kernels")])
    )
    client = NotebookClient(notebook, km=manager, timeout=60, resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=kernel_env(server.base_url, PI_APPROVAL="auto", PI_NOTEBOOK_TIMEOUT="600"))

    first = server.bodies[-2]
    assert "cells" in offered(first) and not offered(first) & BRIDGE_TOOLS
    assert "edit_cell" not in first["messages"][0]["content"]  # nor in the system prompt's tool list
    assert server.tool_results("call_0")[0].startswith("Tool edit_cell not found.")  # one clear line
    assert "total = 41 + 1" in server.tool_results("call_1")[0]  # cells: the recent cells, as before
    assert notebook.cells[0].source == "total = 41 + 1"
    assert "I cannot edit cells here." in notebook.cells[1].outputs[0].data["text/plain"]


def test_a_console_keeps_cells_through_set_next_input(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    env = kernel_env(server.base_url, PI_APPROVAL="auto", PI_NOTEBOOK_TIMEOUT="600")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as console:
        server.enqueue(tool_call_chunks([("python", {"code": "answer = 6 * 7"})]), text_chunks("Done."))
        result = console.run("%%pi --cells\nCompute the answer", allow_stdin=True, timeout=60)
        assert result.status == "ok"
        assert not offered(server.last_body) & BRIDGE_TOOLS
        [payload] = [p for p in result.reply.get("payload", []) if p.get("source") == "set_next_input"]
        assert "answer = 6 * 7" in payload["text"]


@pytest.fixture(scope="module")
def stock(server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    root = tmp_path_factory.mktemp("stock-bridge")
    spec = root / "kernels" / "stock"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "stock", "language": "python"}))
    with KernelDriver("stock", env=kernel_env(server.base_url, PI_APPROVAL="auto"), jupyter_path=root) as driver:
        yield driver


def test_load_ext_greets_an_open_front_end_which_connects(stock: KernelDriver, server: FakeOpenAI) -> None:
    notebook = new_notebook(["%load_ext pi_kernel", "%%pi\nEdit the first cell"])
    front = ScriptedFrontend(stock, notebook)  # not connected: the extension was not loaded yet
    first, pi_cell = notebook.cells
    assert stock.run(first.source, cell_id=first.id, on_iopub=front.on_iopub).status == "ok"
    assert front.comm_id is not None  # pi.notebook.hello arrived and the front-end opened pi.notebook
    stock.run("pass")
    server.enqueue(
        tool_call_chunks([("edit_cell", {"cell": "#1", "source": "%load_ext pi_kernel\n# loaded"})]),
        text_chunks("Edited."),
    )
    result = stock.run(pi_cell.source, cell_id=pi_cell.id, on_iopub=front.on_iopub, timeout=60)
    assert result.status == "ok", result.text
    assert BRIDGE_TOOLS <= offered(server.last_body)
    assert notebook.cells[0].source == "%load_ext pi_kernel\n# loaded"
    front.disconnect()
