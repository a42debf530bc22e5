"""The Pi kernel seen from the front-ends that are not JupyterLab with widgets.

- nbclient (and so papermill) saves each ``%%pi`` cell as the static
  rendering the widget view also leaves: one ``display_data`` with
  ``text/html``, ``text/markdown``, ``text/plain`` and ``metadata.pi_kernel``,
  no stale live display, no secret.
- A real ``jupyter console --existing`` prints the turn and asks for
  approvals on its own stdin.
- Two clients on one kernel: widgets only for the client whose widget
  manager opened ``jupyter.widget.control``; the other one gets text and
  stdin approvals.
- While a ``%%pi`` cell waits for an approval, the control and subshell
  requests JupyterLab sends do not leave the kernel's status at ``idle``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from frontend_mirror import WIDGET_VIEW
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from kernel_helpers import FAKE_KEY, KernelDriver, approval_requests, kernel_env
from nbclient import NotebookClient
from test_widgets_kernel import console_transcript

pytestmark = pytest.mark.kernel

SETUP = '''
from pi_kernel import tool

@tool(approval="ask")
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()
'''
STATIC_MIMES = {"text/html", "text/markdown", "text/plain"}
UNTRACKED_BY_DEFAULT = {"comm_info_request", "kernel_info_request", "shutdown_request", "interrupt_request"}
"""Request types whose ``status`` JupyterLab's status bar ignores (part of jupyter_server's default
``MappingKernelManager.untracked_message_types``)."""


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


# --------------------------------------------------------------------------- nbclient


def test_nbclient_saves_each_pi_cell_as_the_static_rendering(
    server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    notebook = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "pi", "display_name": "Pi Agent", "language": "python"}}
    )
    notebook.cells = [
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell("%%pi\nShout hello"),
        nbformat.v4.new_code_cell("%%pi\nThanks"),
    ]
    server.enqueue(tool_call_chunks([("shout", {"text": "hello"})]), text_chunks("The tool shouted HELLO."))
    server.enqueue(text_chunks("You are welcome. " * 30, parts=60))
    manager = KernelManager(
        kernel_name="pi", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(Path(pi_jupyter_path) / "kernels")])
    )
    client = NotebookClient(notebook, km=manager, timeout=60, resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=kernel_env(server.base_url, PI_APPROVAL="auto"))

    nbformat.validate(notebook)
    for cell, answer in ((notebook.cells[1], "The tool shouted HELLO."), (notebook.cells[2], "You are welcome.")):
        [output] = cell.outputs  # the live display left no copy behind
        assert output.output_type == "display_data"
        assert set(output.data) == STATIC_MIMES
        assert answer in output.data["text/plain"] and answer in output.data["text/markdown"]
        assert answer in output.data["text/html"]
        assert output.metadata["pi_kernel"]["model"] == "fake-model"
        assert not output.data["text/plain"].startswith("π ")  # not the live text
    [call] = notebook.cells[1].outputs[0].metadata["pi_kernel"]["tool_calls"]
    assert call["name"] == "shout" and call["arguments"] == {"text": "hello"} and call["status"] == "done"
    assert call["result"] == {"text": "HELLO", "is_error": False}
    saved = nbformat.writes(notebook)
    assert FAKE_KEY not in saved and server.base_url not in saved


# --------------------------------------------------------------------------- a real terminal console


def test_jupyter_console_prints_the_turn_and_asks_for_approval_on_stdin(
    server: FakeOpenAI, pi_jupyter_path: str
) -> None:
    """``jupyter console --existing --simple-prompt`` reads one line per input, so the cell is typed as
    IPython's own translation of a ``%%pi`` cell (the kernel runs it the same way); ``y`` answers the
    approval question the kernel asks on the console's stdin."""
    with KernelDriver(env=kernel_env(server.base_url, PI_APPROVAL="ask"), jupyter_path=pi_jupyter_path) as kernel:
        assert kernel.run(SETUP).status == "ok"
        server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 3})]), text_chunks("The sum is 5."))
        typed = "get_ipython().run_cell_magic('pi', '', 'Add 2 and 3')\ny\n"
        command = [sys.executable, "-m", "jupyter_console", "--existing", kernel.manager.connection_file]
        console = subprocess.run(
            [*command, "--simple-prompt", "--ZMQTerminalInteractiveShell.confirm_exit=False"],
            input=typed,
            capture_output=True,
            text=True,
            timeout=60,
            env=kernel_env(),
        )
        printed = console.stdout
        assert "Allow add" in printed and '"a": 2' in printed  # the approval question, on stdin
        assert "The sum is 5." in printed  # the answer
        assert "done" in printed and "→" in printed  # the call's final state and its result
        assert printed.count("The sum is 5.") == 1
        assert [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"] == ["5"]
        assert FAKE_KEY not in printed + console.stderr


TERMINAL_IPYTHON = """
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("%load_ext pi_kernel")
shell.run_cell(SETUP)
result = shell.run_cell("%%pi\\nShout hello")
print("cell ok:", result.success)
"""


def test_ipython_outside_a_kernel_prints_the_final_text_once(server: FakeOpenAI) -> None:
    """``%load_ext pi_kernel`` in IPython without a kernel: nothing live, the static text printed at the end."""
    server.enqueue(tool_call_chunks([("shout", {"text": "hello"})]), text_chunks("The tool shouted HELLO."))
    script = f"SETUP = {SETUP!r}\n{TERMINAL_IPYTHON}"
    env = kernel_env(server.base_url, PI_APPROVAL="auto")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    printed = ran.stdout
    assert "cell ok: True" in printed, ran.stderr[-2000:]
    assert printed.count("The tool shouted HELLO.") == 1
    assert "── shout (shout) · done" in printed and "HELLO" in printed.split("→", 1)[1]
    assert "π " not in printed  # no live text
    assert FAKE_KEY not in printed + ran.stderr


# --------------------------------------------------------------------------- two clients, one kernel


def test_widgets_only_for_the_client_whose_widget_manager_connected(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    env = kernel_env(server.base_url, PI_APPROVAL="ask")  # no PI_WIDGETS: detected
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as lab:
        console = lab.another_client()
        try:
            assert lab.client.session.session != console.client.session.session
            assert lab.run(SETUP).status == "ok"
            lab.comm_open("jupyter.widget.control", metadata={"version": "1.0.0"})  # as JupyterLab's widget manager
            assert "front-end: widgets" in lab.run("%pi").text
            assert "front-end: text" in console.run("%pi").text

            server.enqueue(text_chunks("Hello from the lab."))
            in_lab = lab.run("%%pi\nSay hello", timeout=30)
            assert in_lab.status == "ok", in_lab.text
            first = next(m for m in in_lab.messages if m["msg_type"] == "display_data")
            assert WIDGET_VIEW in first["content"]["data"]

            server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 3})]), text_chunks("The sum is 5."))
            asked: list[str] = []
            in_console = console.run(
                "%%pi\nAdd 2 and 3", allow_stdin=True, on_input=lambda prompt: asked.append(prompt) or "y", timeout=30
            )
            assert in_console.status == "ok", in_console.text
            assert len(asked) == 1 and asked[0].startswith("Allow add")  # not left to buttons it cannot show
            assert not any(m["msg_type"].startswith("comm_") for m in in_console.messages)
            printed = console_transcript(in_console.messages)
            assert "The sum is 5." in printed and "add" in printed
        finally:
            console.stop()


# --------------------------------------------------------------------------- busy while waiting


def _status(message: dict[str, Any]) -> str | None:
    return message["content"]["execution_state"] if message["msg_type"] == "status" else None


def status_bar(messages: list[dict[str, Any]]) -> str | None:
    """What JupyterLab's status bar shows after ``messages``: the last ``status``, except those parented by
    a request type the server leaves untracked."""
    shown = None
    for message in messages:
        if _status(message) and message["parent_header"].get("msg_type") not in UNTRACKED_BY_DEFAULT:
            shown = _status(message)
    return shown


def test_status_stays_busy_while_a_pi_cell_waits_and_the_front_end_uses_control_and_a_subshell(
    server: FakeOpenAI, pi_jupyter_path: str
) -> None:
    """ipykernel wraps a control request, and a request on a subshell, in their own busy/idle; JupyterLab
    sends both while a ``%%pi`` cell waits (a subshell for the widgets' comms; a console on a subshell
    typing ``%pi allow``). After each, the kernel says busy again for the cell."""
    with KernelDriver(env=kernel_env(server.base_url, PI_APPROVAL="ask"), jupyter_path=pi_jupyter_path) as kernel:
        assert kernel.run(SETUP).status == "ok"
        comm_id = kernel.comm_open("pi.approval")
        server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 3})]), text_chunks("The sum is 5."))
        cell = kernel.execute_request("%%pi\nAdd 2 and 3")
        request = approval_requests(kernel.wait_iopub(lambda m: approval_requests(m) is not None))
        assert request is not None

        def cell_busy(message: dict[str, Any]) -> bool:
            return _status(message) == "busy" and message["parent_header"].get("msg_id") == cell

        start = len(kernel.iopub_log)
        subshell = kernel.create_subshell()  # JupyterLab, when the view's first widget comm opens
        kernel.wait_iopub(cell_busy, timeout=10)
        waiting = kernel.iopub_log[start:]
        control = [_status(m) for m in waiting if m["parent_header"].get("msg_type") == "create_subshell_request"]
        assert control == ["busy", "idle"]  # ipykernel's status for the control request ...
        assert status_bar(waiting) == "busy"  # ... then the cell's busy again

        start = len(kernel.iopub_log)
        elsewhere = kernel.execute_request("%pi", subshell_id=subshell)  # a console on a subshell
        kernel.wait_iopub(lambda m: _status(m) == "idle" and m["parent_header"].get("msg_id") == elsewhere)
        kernel.wait_iopub(cell_busy, timeout=10)
        assert status_bar(kernel.iopub_log[start:]) == "busy"

        start = len(kernel.iopub_log)
        resolve = {"action": "resolve", "tool_call_id": request["tool_call_id"], "decision": "approve"}
        kernel.comm_send(comm_id, resolve)
        kernel.wait_iopub(lambda m: _status(m) == "idle" and m["parent_header"].get("msg_id") == cell, timeout=30)
        kernel._drain_iopub()  # whatever else came: nothing may follow the cell's own idle
        statuses = [m for m in kernel.iopub_log[start:] if _status(m)]
        assert _status(statuses[-1]) == "idle" and statuses[-1]["parent_header"]["msg_id"] == cell
        assert status_bar(kernel.iopub_log) == "idle"
        assert [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"] == ["5"]
        assert FAKE_KEY not in json.dumps(kernel.iopub_log, default=str)
