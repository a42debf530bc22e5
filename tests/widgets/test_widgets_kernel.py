"""The widget view inside the real Pi kernel: what ``%%pi`` sends, replayed as JupyterLab would show it.

The kernel runs with ``PI_WIDGETS=1`` (a widget front end). This test is that
front end: it reads the iopub messages, replays them with ``FrontEndMirror``
and clicks buttons the way the browser does, with a ``comm_msg`` carrying
``{"method": "custom", "content": {"event": "click"}}`` to the button's model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from frontend_mirror import WIDGET_VIEW, FrontEndMirror
from kernel_helpers import ADD_TOOL_CELL, FAKE_KEY, KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

SETUP = ADD_TOOL_CELL


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_delay=0.01) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_WIDGETS="1", PI_APPROVAL="ask")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
        yield driver


def _replay(messages: list[dict[str, Any]]) -> FrontEndMirror:
    mirror = FrontEndMirror()
    for message in messages:
        mirror.feed(message)
    return mirror


def click_when_shown(kernel: KernelDriver, label: str) -> Any:
    """An ``on_iopub`` that clicks the first button called ``label`` once its model is open."""
    state: dict[str, Any] = {}

    def on_iopub(message: dict[str, Any]) -> None:
        if message["msg_type"] != "comm_open" or "clicked" in state:
            return
        widget = message["content"]["data"].get("state", {})
        if widget.get("_model_name") == "ButtonModel" and widget.get("description") == label:
            comm_id = message["content"]["comm_id"]
            kernel.comm_send(comm_id, {"method": "custom", "content": {"event": "click"}})
            state["clicked"] = comm_id

    return on_iopub


def test_a_pi_cell_shows_a_live_widget_then_keeps_static_output(kernel: KernelDriver, server: FakeOpenAI) -> None:
    answer = "Hello **from** the fake model. " * 20
    server.enqueue(text_chunks(answer, parts=60))
    result = kernel.run("%%pi\nSay hello", cell_id="hello")
    assert result.status == "ok", result.text
    kinds = [message["msg_type"] for message in result.messages]
    assert "comm_open" in kinds and "update_display_data" in kinds
    first_display = next(m for m in result.messages if m["msg_type"] == "display_data")
    assert WIDGET_VIEW in first_display["content"]["data"]
    mirror = _replay(result.messages)
    [saved] = mirror.cell_outputs(result.messages[0]["parent_header"]["msg_id"])
    assert set(saved["data"]) == {"text/html", "text/markdown", "text/plain"}
    assert saved["data"]["text/markdown"].startswith(answer.strip())
    assert saved["metadata"]["pi_kernel"]["model"] == "fake-model"
    assert mirror.models == {}  # nothing for a reopened notebook to miss
    everything = json.dumps([message["content"] for message in result.messages])
    assert FAKE_KEY not in everything and server.base_url not in everything


def test_approve_button_click_runs_the_tool(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 3})]), text_chunks("The sum is 5."))
    on_iopub = click_when_shown(kernel, "Approve")
    result = kernel.run("%%pi\nAdd 2 and 3", cell_id="approve", on_iopub=on_iopub, timeout=30)
    assert result.status == "ok", result.text
    assert [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"][-1] == "5"
    [saved] = _replay(result.messages).cell_outputs(result.messages[0]["parent_header"]["msg_id"])
    [call] = saved["metadata"]["pi_kernel"]["tool_calls"]
    assert call["status"] == "done" and call["decision"]["kind"] == "approve"
    assert "The sum is 5." in saved["data"]["text/plain"]


def test_deny_button_sends_the_typed_reason(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 1})]), text_chunks("Understood."))
    buttons: dict[str, str] = {}

    def on_iopub(message: dict[str, Any]) -> None:
        if message["msg_type"] != "comm_open":
            return
        widget = message["content"]["data"].get("state", {})
        if widget.get("_model_name") == "ButtonModel":
            buttons[widget["description"]] = message["content"]["comm_id"]
        elif widget.get("_model_name") == "TextModel" and widget.get("placeholder", "").startswith("Reason"):
            # the reason box: the panel is complete (the view's message box is a TextModel too)
            typed = {"method": "update", "state": {"value": "Use mental arithmetic"}, "buffer_paths": []}
            kernel.comm_send(message["content"]["comm_id"], typed)  # as the browser syncs what was typed
            kernel.comm_send(buttons["Deny"], {"method": "custom", "content": {"event": "click"}})

    result = kernel.run("%%pi\nAdd 1 and 1", cell_id="deny", on_iopub=on_iopub, timeout=30)
    assert result.status == "ok", result.text
    assert [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"][-1] == "Use mental arithmetic"
    [saved] = _replay(result.messages).cell_outputs(result.messages[0]["parent_header"]["msg_id"])
    assert saved["metadata"]["pi_kernel"]["tool_calls"][0]["status"] == "denied"


def test_the_widget_managers_states_show_pi_widgets_masked(kernel: KernelDriver) -> None:
    """The widget manager asks the kernel for every widget's state on its control comm (a page reload): a
    widget opened in a pi cell goes out masked there too, though that comm is not pi's; the user's own
    widgets' states are left alone."""
    pi_widget = "import os, pi_kernel, ipywidgets\npis = ipywidgets.Text(value=os.environ['OPENAI_API_KEY'])"
    assert kernel.run(pi_widget).status == "ok"
    assert kernel.run("import ipywidgets\nmine = ipywidgets.Text(value='postgres://me:pw@db/x')").status == "ok"
    control = kernel.comm_open("jupyter.widget.control", metadata={"version": "1.0.0"})
    kernel.comm_send(control, {"method": "request_states"})
    assert kernel.run("pass").status == "ok"  # after the request: its answer is in the log
    [states] = [m["content"]["data"]["states"] for m in kernel.iopub_log if _method(m) == "update_states"][-1:]
    values = [state["state"].get("value") for state in states.values()]
    assert "postgres://me:pw@db/x" in values and "***" in values
    assert FAKE_KEY[:12] not in json.dumps(states)


def test_a_pi_html_widget_set_from_unmasked_text_sends_no_key(kernel: KernelDriver) -> None:
    """The views draw masked text, and the net stands behind them: an HTML widget of pi's kit given a key,
    opened and then updated, never sends it on iopub."""
    cell = (
        "import os\nfrom pi_kernel.widgets.kit import WidgetKit\nkit = WidgetKit()\n"
        "w = kit.html('<b>' + os.environ['OPENAI_API_KEY'] + '</b>')\n"
        "w.value = '<i>https://me:hunter2@example.com ' + os.environ['OPENAI_API_KEY'] + '</i>'"
    )
    result = kernel.run(cell)
    assert result.status == "ok", result.text
    sent = json.dumps([m["content"] for m in result.messages if m["msg_type"].startswith("comm")])
    assert "<b>***</b>" in sent and "***" in sent.split("<i>", 1)[1]  # both values went out, masked
    assert FAKE_KEY[:12] not in sent and "hunter2" not in sent


def _method(message: dict[str, Any]) -> Any:
    data = message["content"].get("data") if message["msg_type"] == "comm_msg" else None
    return data.get("method") if isinstance(data, dict) else None


# --------------------------------------------------------------------------- no widget front end: a terminal console

CONSOLE_SETUP = '''
from pi_kernel import tool

@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()
'''


def console_transcript(messages: list[dict[str, Any]]) -> str:
    """What ``jupyter console`` prints for a cell's iopub messages (its ``ZMQTerminalInteractiveShell.handle_iopub``,
    jupyter_console 6.6): stream text, the ``text/plain`` of ``display_data`` and ``execute_result``, error
    tracebacks. It ignores ``update_display_data``, comm messages and anything without ``text/plain``."""
    printed = []
    for message in messages:
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            printed.append(content["text"])
        elif kind in ("display_data", "execute_result") and "text/plain" in content["data"]:
            printed.append(content["data"]["text/plain"] + "\n")
        elif kind == "error":
            printed.append("\n".join(content["traceback"]) + "\n")
    return "".join(printed)


def test_without_a_widget_front_end_a_terminal_console_reads_the_turn(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    """Issue #6, point 5: no ``jupyter.widget.control`` comm (a console never opens one), so no widgets;
    the turn must still read as text in what a terminal console prints."""
    env = kernel_env(server.base_url, PI_WIDGETS="0", PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as console:
        assert console.run(CONSOLE_SETUP).status == "ok"
        server.enqueue(tool_call_chunks([("shout", {"text": "hello"})]), text_chunks("The tool shouted HELLO."))
        result = console.run("%%pi\nShout hello", timeout=30)
        assert result.status == "ok", result.text
        kinds = {message["msg_type"] for message in result.messages}
        assert not any(kind.startswith("comm_") for kind in kinds)  # no widget was made
        printed = console_transcript(result.messages)
        assert "shout" in printed and "HELLO" in printed  # the call and its result
        assert "The tool shouted HELLO." in printed  # the answer
        assert printed.count("The tool shouted HELLO.") == 1  # once: the final output, not a live state too


# --------------------------------------------------------------------------- secrets in the live view

LEAK_SETUP = '''
import os, time
from pi_kernel import tool

@tool
def show_key(label: str, on_update=None) -> str:
    """Show the configured key (a tool that leaks it, on purpose)."""
    key = os.environ["OPENAI_API_KEY"]
    on_update("key: " + key[:12])  # the live output stops half-way through the key
    time.sleep(0.4)
    on_update("key: " + key + " (end)")
    time.sleep(0.4)
    return "result: " + key
'''


def click_every(kernel: KernelDriver, label: str) -> Any:
    """An ``on_iopub`` that clicks every button called ``label`` as soon as its model opens."""

    def on_iopub(message: dict[str, Any]) -> None:
        if message["msg_type"] != "comm_open":
            return
        widget = message["content"]["data"].get("state", {})
        if widget.get("_model_name") == "ButtonModel" and widget.get("description") == label:
            kernel.comm_send(message["content"]["comm_id"], {"method": "custom", "content": {"event": "click"}})

    return on_iopub


def test_a_key_quoted_by_the_model_or_a_tool_never_reaches_the_front_end(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    """The live view, not only the static output that replaces it: streamed text and thinking (the key cut
    across many deltas), the streamed arguments preview, the tool's live output (paused half-way through the
    key) and its result all go out masked."""
    assert kernel.run(LEAK_SETUP).status == "ok"
    server.enqueue(
        tool_call_chunks(
            [("show_key", {"label": f"the key is {FAKE_KEY}, see"})],
            parts=40,
            reasoning=f"The user's key is {FAKE_KEY}; I should not repeat it.",
        ),
        text_chunks(f"Your key is {FAKE_KEY} and it is safe.", parts=60),
    )
    start = len(kernel.iopub_log)
    result = kernel.run("%%pi\nWhat is my key?", cell_id="leak", on_iopub=click_every(kernel, "Approve"), timeout=60)
    assert result.status == "ok", result.text
    sent = kernel.iopub_log[start:]
    everything = json.dumps([message["content"] for message in sent])
    pieces = [FAKE_KEY[i : i + 12] for i in range(len(FAKE_KEY) - 11)]
    assert not [piece for piece in pieces if piece in everything]
    live_text = "".join(m["content"]["text"] for m in sent if m["msg_type"] == "stream")
    assert "Your key is *** and it is safe." in live_text  # the answer streamed live, masked
    assert "key: ***" in live_text  # the tool's live output
    assert "The user's key is ***" in live_text  # the thinking
    tool_result = [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"][-1]
    assert FAKE_KEY not in tool_result and "***" in tool_result  # nor does the model: tool results are masked
