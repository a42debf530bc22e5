"""The agent sees the notebook and writes back into it (issue 12), in a real kernel with the scripted server.

- ``inspect`` and ``cells`` run with no approval request in ``ask`` mode (and in ``read-only``) and
  return a DataFrame's columns and a failed cell's error;
- the first request of a turn after a failing cell names the error (the automatic notebook context),
  and the prompt text reaches the model exactly as written;
- ``%%pi --cells`` (and ``%pi cells on``) put the ``python`` tool's code in a ``set_next_input`` payload.

Where no notebook bridge connects (nbclient/papermill, consoles) and where it connects late (``%load_ext``).

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
from typing import Any

import nbformat
import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from kernel_helpers import KernelDriver, approval_comm, approval_requests, kernel_env
from nbclient import NotebookClient
from notebook_frontend import ScriptedFrontend, new_notebook

pytestmark = pytest.mark.kernel

FRAME = 'import pandas as pd\nfruit = pd.DataFrame({"fruit": ["apple", "pear"], "price": [0.5, None]})'


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """Tool call id → the result text the model got in this turn (after the last user message)."""
    messages = body["messages"]
    start = max(index for index, message in enumerate(messages) if message["role"] == "user")
    return {message["tool_call_id"]: message["content"] for message in messages[start:] if message["role"] == "tool"}


def last_user_parts(body: dict[str, Any]) -> list[str]:
    """The text parts of the request's last user message."""
    user = [message for message in body["messages"] if message["role"] == "user"][-1]
    content = user["content"]
    return [content] if isinstance(content, str) else [part["text"] for part in content if part["type"] == "text"]


def set_next_input(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [payload for payload in reply.get("payload", []) if payload.get("source") == "set_next_input"]


def test_inspect_and_cells_run_without_approval_in_ask_mode(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run(FRAME).status == "ok"
    failed = kernel.run('fruit["weight"].sum()')
    assert failed.status == "error"
    server.enqueue(
        tool_call_chunks([("inspect", {"name": "fruit"}), ("inspect", {}), ("cells", {"last": 2})]),
        text_chunks("The frame has fruit and price; the last cell asked for a missing column."),
    )
    requests: list[dict[str, Any]] = []
    with approval_comm(kernel):  # a call that asks would wait here and show up as a request
        result = kernel.run(
            "%%pi\nWhat is in fruit, and what went wrong?",
            cell_id="ask-inspect",
            on_iopub=lambda message: requests.extend([r for r in [approval_requests(message)] if r]),
        )
    assert result.status == "ok", result.text
    assert requests == []
    described, listing, cells = tool_results(server.last_body).values()
    assert "2 rows x 2 columns" in described
    assert "fruit: str" in described or "fruit: object" in described
    assert "price: float64, 1 null" in described
    assert "- fruit: pandas.DataFrame shape (2, 2)" in listing
    assert "pd:" not in listing and "In:" not in listing  # modules and IPython's own names left out
    assert "KeyError" in cells and "'weight'" in cells
    assert 'fruit["weight"].sum()' in cells
    assert "\x1b[" not in cells  # no ANSI colour codes


def test_inspect_runs_in_read_only_mode_and_an_unknown_name_lists_close_matches(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    kernel.run(FRAME)
    server.enqueue(tool_call_chunks([("inspect", {"name": "fruits"})]), text_chunks("No such variable."))
    result = kernel.run("%%pi --approve read-only\nDescribe fruits.", cell_id="read-only")
    assert result.status == "ok", result.text
    (text,) = tool_results(server.last_body).values()
    assert "No variable named 'fruits'" in text and "Close matches: fruit" in text


def test_the_turn_after_a_failing_cell_names_the_error_and_cells_brings_back_the_fix(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    server.enqueue(text_chunks("Hello."))
    assert kernel.run("%%pi\nHi.", cell_id="before").status == "ok"  # the previous turn
    assert kernel.run("ratio = 3 / 0").status == "error"
    fix = "ratio = 3 / 1\nratio"
    server.enqueue(tool_call_chunks([("python", {"code": fix})]), text_chunks("Dividing by zero failed; fixed."))
    sent = len(server.bodies)
    prompt = "why did that fail? fix it"
    result = kernel.run(f"%%pi --cells --approve auto\n{prompt}", cell_id="fix-it")
    assert result.status == "ok", result.text

    first = server.bodies[sent]
    asked, context = last_user_parts(first)
    assert asked == prompt
    assert context.startswith("\n\nNotebook context")
    assert "ratio = 3 / 0" in context and "ZeroDivisionError: division by zero" in context
    (payload,) = set_next_input(result.reply)
    assert payload["text"] == f"# pi: python call 1 of 1\n{fix}"
    assert payload["replace"] is False
    assert "ratio = 3 / 1" in result.text  # the python card shows the code
    assert kernel.run("print(ratio)").text.strip() == "3.0"


def test_prompts_reach_the_model_as_written_and_context_can_be_switched_off(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    assert "notebook context: off" in kernel.run("%pi context off").text
    assert "notebook:  context off, code cells off" in kernel.run("%pi").text
    kernel.run("x = 1")
    prompt = 'Use {x} and $x and {"a": 1} and {{braces}} and $(echo hi) as they are.'
    server.enqueue(text_chunks("Done."))
    result = kernel.run(f"%%pi\n{prompt}", cell_id="verbatim")
    assert result.status == "ok", result.text
    assert last_user_parts(server.last_body) == [prompt]  # no context part, nothing expanded
    assert "notebook context: on" in kernel.run("%pi context on").text


def test_pi_cells_on_brings_back_every_turns_code_and_failed_calls_are_left_out(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    assert "code cells: on" in kernel.run("%pi cells on").text
    server.enqueue(
        tool_call_chunks([("python", {"code": "1 / 0"})]),
        tool_call_chunks([("python", {"code": "half = 1 / 2"})]),
        tool_call_chunks([("python", {"code": "twice = half * 2"})]),
        text_chunks("Done."),
    )
    result = kernel.run("%%pi --approve auto\nCompute half and twice.", cell_id="cells-on")
    assert result.status == "ok", result.text
    (payload,) = set_next_input(result.reply)
    assert payload["text"] == "# pi: python call 1 of 2\nhalf = 1 / 2\n\n# pi: python call 2 of 2\ntwice = half * 2"
    assert "code cells: off" in kernel.run("%pi cells off").text
    server.enqueue(tool_call_chunks([("python", {"code": "y = 2"})]), text_chunks("Done."))
    quiet = kernel.run("%%pi --approve auto\nSet y.", cell_id="cells-off")
    assert quiet.status == "ok" and set_next_input(quiet.reply) == []


def test_the_offered_code_cell_is_the_code_that_ran_even_with_url_credentials(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    """The reply's ``set_next_input`` payload is not masked (only its error fields are): the cell offered is
    the code as it ran, credentials in a URL included (contract: running it runs the same code again)."""
    code = "url = 'postgres://me:pw@db/x'\nlen(url)"
    server.enqueue(tool_call_chunks([("python", {"code": code})]), text_chunks("Done."))
    result = kernel.run("%%pi --cells --approve auto\nstore my url postgres://me:pw@db/x", cell_id="url-cell")
    assert result.status == "ok", result.text
    (payload,) = set_next_input(result.reply)
    assert payload["text"] == f"# pi: python call 1 of 1\n{code}"


def test_code_cell_follows_the_order_the_calls_ran() -> None:
    from pi_kernel.ai import AssistantMessage, TextContent, ToolCall, ToolResultMessage
    from pi_kernel.kernel.cell_runner import code_cell_text

    calls = [ToolCall("a", "python", {"code": "second = 2"}), ToolCall("b", "python", {"code": "first = 1"})]
    messages = [
        AssistantMessage(content=list(calls)),
        ToolResultMessage("a", "python", [TextContent("")], details={"run": 8, "code": "second = 2"}),
        ToolResultMessage("b", "python", [TextContent("")], details={"run": 7, "code": "first = 1"}),
    ]
    assert code_cell_text(messages) == "# pi: python call 1 of 2\nfirst = 1\n\n# pi: python call 2 of 2\nsecond = 2"


# --------------------------------------------------------------------------- notebook fallbacks


BRIDGE_TOOLS = {"edit_cell", "insert_cells", "run_cells", "delete_cells"}


@pytest.fixture(scope="module")
def fallback_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def offered(body: dict[str, object]) -> set[str]:
    return {tool["function"]["name"] for tool in body["tools"]}  # type: ignore[index,union-attr]


def test_nbclient_is_not_offered_the_bridge_tools_and_nothing_waits(
    fallback_server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    notebook = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "pi", "display_name": "Pi Agent", "language": "python"}}
    )
    notebook.cells = [
        nbformat.v4.new_code_cell("total = 41 + 1"),
        nbformat.v4.new_code_cell("%%pi\nFix the first cell"),
    ]
    fallback_server.enqueue(
        tool_call_chunks([("edit_cell", {"cell": "#1", "source": "total = 0"}), ("cells", {})]),
        text_chunks("I cannot edit cells here."),
    )
    manager = KernelManager(
        kernel_name="pi", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(Path(pi_jupyter_path) / "kernels")])
    )
    client = NotebookClient(notebook, km=manager, timeout=60, resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=kernel_env(fallback_server.base_url, PI_APPROVAL="auto", PI_NOTEBOOK_TIMEOUT="600"))

    first = fallback_server.bodies[-2]
    assert "cells" in offered(first) and not offered(first) & BRIDGE_TOOLS
    assert "edit_cell" not in first["messages"][0]["content"]  # nor in the system prompt's tool list
    assert fallback_server.tool_results("call_0")[0].startswith("Tool edit_cell not found.")  # one clear line
    assert "total = 41 + 1" in fallback_server.tool_results("call_1")[0]  # cells: the recent cells, as before
    assert notebook.cells[0].source == "total = 41 + 1"
    assert "I cannot edit cells here." in notebook.cells[1].outputs[0].data["text/plain"]


def test_a_console_keeps_cells_through_set_next_input(fallback_server: FakeOpenAI, pi_jupyter_path: str) -> None:
    env = kernel_env(fallback_server.base_url, PI_APPROVAL="auto", PI_NOTEBOOK_TIMEOUT="600")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as console:
        fallback_server.enqueue(tool_call_chunks([("python", {"code": "answer = 6 * 7"})]), text_chunks("Done."))
        result = console.run("%%pi --cells\nCompute the answer", allow_stdin=True, timeout=60)
        assert result.status == "ok"
        assert not offered(fallback_server.last_body) & BRIDGE_TOOLS
        [payload] = [p for p in result.reply.get("payload", []) if p.get("source") == "set_next_input"]
        assert "answer = 6 * 7" in payload["text"]


@pytest.fixture(scope="module")
def stock(fallback_server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    root = tmp_path_factory.mktemp("stock-bridge")
    spec = root / "kernels" / "stock"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "stock", "language": "python"}))
    with KernelDriver(
        "stock", env=kernel_env(fallback_server.base_url, PI_APPROVAL="auto"), jupyter_path=root
    ) as driver:
        yield driver


def test_load_ext_greets_an_open_front_end_which_connects(stock: KernelDriver, fallback_server: FakeOpenAI) -> None:
    notebook = new_notebook(["%load_ext pi_kernel", "%%pi\nEdit the first cell"])
    front = ScriptedFrontend(stock, notebook)  # not connected: the extension was not loaded yet
    first, pi_cell = notebook.cells
    assert stock.run(first.source, cell_id=first.id, on_iopub=front.on_iopub).status == "ok"
    assert front.comm_id is not None  # pi.notebook.hello arrived and the front-end opened pi.notebook
    stock.run("pass")
    fallback_server.enqueue(
        tool_call_chunks([("edit_cell", {"cell": "#1", "source": "%load_ext pi_kernel\n# loaded"})]),
        text_chunks("Edited."),
    )
    result = stock.run(pi_cell.source, cell_id=pi_cell.id, on_iopub=front.on_iopub, timeout=60)
    assert result.status == "ok", result.text
    assert BRIDGE_TOOLS <= offered(fallback_server.last_body)
    assert notebook.cells[0].source == "%load_ext pi_kernel\n# loaded"
    front.disconnect()
