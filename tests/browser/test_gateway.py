"""The kernel as a remote kernel: JupyterLab → Jupyter Enterprise Gateway → the ``pi`` kernel.

A real Enterprise Gateway (its own virtual environment, ``.gateway-venv``,
which ``make setup-test`` creates: the gateway pins a ``jupyter_server`` 1.x
and a ``jupyter_client`` 6.x that cannot share an environment with
JupyterLab 4) launches the ``pi`` kernelspec of this working tree. JupyterLab
runs with ``--gateway-url`` pointing at it, so the kernel, its comms (the
widgets) and its interrupts all go through the gateway. In headless Chromium
the test checks the approval card, the Approve click, the tool's output, and
an interrupt while an approval waits; the gateway's own ``/api/kernels`` shows
the kernel it launched.

Without ``.gateway-venv`` the tests skip, or fail under
``PI_REQUIRE_GATEWAY=1`` (``make test`` sets it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    JupyterLabServer,
    NotebookPage,
    free_port,
    stop_process_group,
    wait_until_serving,
)
from fake_openai import FakeOpenAI, ToolCallSpec, text_chunks, tool_call_chunks

from pi_kernel.kernel.kernelspec import write_kernel_spec

REPO = Path(__file__).resolve().parents[2]
GATEWAY_VENV = Path(os.environ.get("PI_GATEWAY_VENV", REPO / ".gateway-venv"))
GATEWAY = GATEWAY_VENV / "bin" / "jupyter-enterprisegateway"
FAKE_KEY = "sk-test-SECRET-gateway-0123456789"
INTERRUPTED_CALL = "call_interrupted"
CELLS = [
    'from pi_kernel import tool\n\n@tool(approval="ask")\ndef add(a: int, b: int) -> int:\n'
    '    """Add two numbers."""\n    return a + b',
    "%%pi\nAdd 2 and 3 (approve).",
    "%%pi\nAdd 2 and 3 (interrupt).",
    "import os\nos.getpid()",
]

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module", autouse=True)
def _gateway_installed() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    if not GATEWAY.exists():
        message = f"{GATEWAY} is missing (make setup-test creates it)"
        if os.environ.get("PI_REQUIRE_GATEWAY") == "1":
            pytest.fail(f"PI_REQUIRE_GATEWAY=1 but {message}", pytrace=False)
        pytest.skip(message)


def respond(body: dict[str, Any]) -> Any:
    """The model: a call of ``add``, then what the tool said."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text_chunks(f"The tool said: {last['content']}", parts=3)
    prompt = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    call_id = INTERRUPTED_CALL if "interrupt" in prompt else None
    return tool_call_chunks([ToolCallSpec("add", {"a": 2, "b": 3}, call_id)])


class EnterpriseGateway:
    """``jupyter enterprisegateway`` on 127.0.0.1 with the ``pi`` kernelspec on its ``JUPYTER_PATH``."""

    def __init__(self, kernel_env: dict[str, str]) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pi-gateway-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.root / "gateway.log"
        self._kernel_env = kernel_env
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> EnterpriseGateway:
        data = self.root / "data"
        # The operator's side: a kernelspec whose argv runs the kernel's interpreter, whose env holds the
        # provider settings (the gateway forwards only KERNEL_* variables from the client).
        write_kernel_spec(data / "kernels" / "pi", sys.executable, self._kernel_env)
        for name in ("config", "runtime"):
            (self.root / name).mkdir()
        env = {
            **{key: value for key, value in os.environ.items() if not key.startswith(("PI_", "OPENAI_", "JUPYTER"))},
            "JUPYTER_PATH": str(data),
            "JUPYTER_DATA_DIR": str(data),
            "JUPYTER_CONFIG_DIR": str(self.root / "config"),
            "JUPYTER_RUNTIME_DIR": str(self.root / "runtime"),
            "HOME": str(self.root),
        }
        command = [
            "timeout", "600", str(GATEWAY),
            "--ip=127.0.0.1", f"--port={self.port}", "--port_retries=0",
            "--EnterpriseGatewayApp.allowed_kernels=['pi']",
            "--EnterpriseGatewayApp.default_kernel_name=pi",
            # JupyterLab lists the running kernels (its /api/status too); the gateway forbids that by default.
            "--EnterpriseGatewayApp.list_kernels=True",
            # JupyterLab opens the kernel's websocket twice in a row; the gateway can leave the second one
            # dead until its ping times out (30 s at least, 90 s by default): ping often, time out soonest.
            "--EnterpriseGatewayApp.ws_ping_interval=2",
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_until_serving(self._process, f"{self.url}/api/kernelspecs", self.log, timeout)
        return self

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        if self.log.exists():
            shutil.copy(self.log, ARTIFACTS / "gateway.log")  # for a failed run
        if self._process is not None:
            stop_process_group(self._process)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=respond) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(fake: FakeOpenAI) -> Iterator[EnterpriseGateway]:
    kernel_env = {
        "PYTHONPATH": str(REPO),
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": FAKE_KEY,
        "PI_MODEL": "fake-model",
        "PI_APPROVAL": "ask",
        "PI_APPROVAL_TIMEOUT": "120",
    }
    server = EnterpriseGateway(kernel_env).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def notebook(gateway: EnterpriseGateway) -> Iterator[NotebookPage]:
    from playwright.sync_api import sync_playwright

    # The lab has no provider settings of its own: all of them are the gateway's. KERNEL_USERNAME is
    # forwarded to the gateway (it refuses kernels for root, the default user of a CI box).
    lab = JupyterLabServer(
        {},
        # expose_app_in_browser: ``connect`` reconnects through JupyterLab's own command.
        extra_args=[
            f"--gateway-url={gateway.url}",
            "--GatewayClient.request_timeout=120",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.disable_check_xsrf=True",  # start_session posts without a browser cookie
        ],
        extra_env={"KERNEL_USERNAME": "pi-user"},
    ).start()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = chromium.new_page(viewport={"width": 1280, "height": 1000})
        try:
            lab.write_notebook("remote.ipynb", CELLS)
            # The notebook's session and its remote kernel exist before the page opens: JupyterLab then
            # connects to that kernel once, instead of starting one and reconnecting at once, the double
            # connection the gateway can leave silent (see ``connect``).
            start_session(lab.url, "remote.ipynb")
            page_notebook = NotebookPage(page, lab, "remote.ipynb")
            page.goto(f"{lab.url}/lab/tree/remote.ipynb?reset", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            connect(page_notebook)
            page_notebook.run(0)
            page_notebook.wait_prompt(0, timeout=90)
            yield page_notebook
        finally:
            page.close()
            chromium.close()
            ARTIFACTS.mkdir(exist_ok=True)
            shutil.copy(lab.log, ARTIFACTS / "gateway-lab.log")
            lab.stop()


def start_session(lab_url: str, path: str) -> None:
    """Create the notebook's session (its ``pi`` kernel on the gateway) through the lab's REST API."""
    body = json.dumps({"path": path, "type": "notebook", "name": path, "kernel": {"name": "pi"}}).encode()
    request = urllib.request.Request(
        f"{lab_url}/api/sessions", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.status == 201, response.status


def connect(notebook: NotebookPage) -> None:
    """Wait for the kernel to be idle; reconnect where the gateway left the kernel's websocket silent.

    Starting a kernel, JupyterLab opens its websocket twice in a row; Enterprise Gateway 3.3 can replace
    the first ("Replacing stale connection") in a way that leaves the second silent. ``start_session``
    avoids that start; should it happen anyway, what a person does, Kernel > Reconnect to Kernel, brings
    the connection back (docs/enterprise-gateway.md).
    """
    reconnect = "kernelmenu:reconnect-to-kernel"
    assert notebook.page.evaluate(f"window.jupyterapp.commands.hasCommand('{reconnect}')")
    for _attempt in range(3):
        try:
            notebook.wait_idle(timeout=40)
            return
        except Exception:  # noqa: BLE001 - Playwright's TimeoutError: still connecting
            notebook.page.evaluate(f"window.jupyterapp.commands.execute('{reconnect}')")
    notebook.wait_idle(timeout=40)


def _approve_button(notebook: NotebookPage, cell: int) -> Any:
    button = notebook.output(cell).get_by_role("button", name="Approve")
    button.wait_for(timeout=60_000)
    return button


def test_the_kernel_runs_behind_the_gateway(notebook: NotebookPage, gateway: EnterpriseGateway) -> None:
    kernels = gateway.get("/api/kernels")
    assert [kernel["name"] for kernel in kernels] == ["pi"], kernels


def test_approval_card_and_click_through_the_gateway(notebook: NotebookPage, fake: FakeOpenAI) -> None:
    notebook.run(1)
    button = _approve_button(notebook, 1)
    card = notebook.output_text(1)
    assert "add" in card and "waiting for approval" in card
    assert notebook.prompt(1) == "[*]:"  # the cell still runs while the card waits
    notebook.screenshot("gateway-01-approval-waiting")
    button.click()
    notebook.wait_text(1, "The tool said: 5", timeout=60)
    notebook.wait_prompt(1)
    text = notebook.output_text(1)
    assert "done" in text and "approved" in text
    result = notebook.output(1).locator("details pre", has_text=re.compile(r"^\s*5\s*$"))
    assert result.is_visible()  # the tool's output, in the card
    tool_messages = [message for message in fake.last_body["messages"] if message["role"] == "tool"]
    assert tool_messages[-1]["content"] == "5"
    notebook.screenshot("gateway-02-approved")


def test_interrupt_through_the_gateway(notebook: NotebookPage, fake: FakeOpenAI) -> None:
    notebook.run(2)
    _approve_button(notebook, 2)
    notebook.interrupt()
    notebook.wait_text(2, "interrupted", timeout=30)
    notebook.wait_prompt(2, timeout=30)
    card = notebook.output(2).locator("details summary", has_text="add").first
    assert "interrupted" in card.inner_text()
    notebook.screenshot("gateway-03-interrupted")
    notebook.run(3)
    notebook.wait_text(3, re.compile(r"^\d+$"), timeout=30)  # the same kernel answers afterwards
    assert "5" not in fake.tool_results(INTERRUPTED_CALL), "the interrupted call ran and its result reached the model"
