"""Pi's output stays masked however pi is run from a cell whose code does not name it.

The outgoing mask (``pi_kernel.kernel.outgoing``) judges a cell from its code and also claims a cell as pi's when
pi runs in it; the ``%pi`` printer masks as it prints, for output captured in the cell before it is sent. Each test
runs a real Pi kernel against the scripted OpenAI server; the model echoes the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import FAKE_KEY, KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

ECHO_TOOL = '''
from pi_kernel import tool

@tool(approval="ask")
def echo(text: str) -> str:
    """Echo a text."""
    return text
'''


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(ECHO_TOOL).status == "ok"
        server.enqueue(text_chunks(f"Remembered. (Your key {FAKE_KEY} is safe.)"))
        shown = driver.run("%%pi\nRemember blue", cell_id="remember")
        assert shown.status == "ok" and FAKE_KEY not in shown.text  # a %%pi cell: masked
        yield driver


def test_automagic_pi_history_is_masked(kernel: KernelDriver) -> None:
    """IPython's automagic (on by default): ``pi history`` is ``%pi history`` without the ``%``."""
    result = kernel.run("pi history")
    assert result.status == "ok" and "Remembered" in result.text, result.text  # it really ran %pi history
    assert FAKE_KEY not in result.text


def test_automagic_pi_model_shows_no_url_credentials(kernel: KernelDriver) -> None:
    """The same, for ``%pi model URL``: test_kernel_outgoing pins this masked for ``%pi model`` (terminal)."""
    result = kernel.run("pi model https://me:hunter2-secret@127.0.0.1:9/v1")
    assert "127.0.0.1:9" in result.text, result.text  # it really ran %pi model
    assert "hunter2-secret" not in result.text
    kernel.run("%pi model fake-model")


def test_alias_magic_history_is_masked(kernel: KernelDriver) -> None:
    """``%alias_magic ask pi`` (IPython's own feature), then ``%ask history``."""
    assert kernel.run("%alias_magic ask pi").status == "ok"
    history = kernel.run("%ask history")
    assert "Remembered" in history.text and FAKE_KEY not in history.text


def test_awaited_runner_turn_is_masked(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """``run_pi_cell`` imported under a short name once, then awaited from plain cells: while a call waits
    for approval the live text view shows the finished answer (``update_display_data``), masked."""
    assert kernel.run(ECHO_TOOL + "\nfrom pi_kernel.kernel.extension import run_pi_cell as ask").status == "ok"
    server.enqueue(tool_call_chunks([("echo", {"text": "hi"})], text=f"Your key is {FAKE_KEY}."), text_chunks("ok"))
    result = kernel.run("await ask('go')", cell_id="awaited", allow_stdin=True, on_input=lambda prompt: "n")
    assert result.status == "ok", result.text
    users = [m["content"][0]["text"] for m in server.last_body["messages"] if m["role"] == "user"]
    assert users[-1] == "go"  # a real turn
    leaked = [m["msg_type"] for m in result.messages if FAKE_KEY in json.dumps(m["content"], default=str)]
    assert leaked == []


def test_captured_pi_history_is_masked(kernel: KernelDriver, tmp_path: Path) -> None:
    """``%%capture`` (or ``redirect_stdout``) keeps ``%pi history`` inside the kernel, before
    ``Session.send``: shown by a later plain cell, or written to a file, it is masked all the same."""
    assert kernel.run("%%capture cap\n%pi history").status == "ok"
    shown = kernel.run("print(cap.stdout)")
    assert "Remembered" in shown.text and FAKE_KEY not in shown.text
    path = tmp_path / "history.txt"
    code = (
        "import contextlib, io\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
        f"    get_ipython().run_line_magic('pi', 'history')\nopen({str(path)!r}, 'w').write(buf.getvalue())"
    )
    assert kernel.run(code).status == "ok"
    assert "Remembered" in path.read_text() and FAKE_KEY not in path.read_text()
