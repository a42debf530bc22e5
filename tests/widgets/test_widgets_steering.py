"""Steering a running turn from its live widget, in the real Pi kernel: this test is the front end, typing
into the view's message box and pressing Enter (ipywidgets' ``submit`` event) or clicking "Queue"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from frontend_mirror import FrontEndMirror
from kernel_helpers import KernelDriver, kernel_env

from pi_kernel.widgets.steer_box import PLACEHOLDER

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_delay=0.01) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_WIDGETS="1", PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


def type_into_the_box(kernel: KernelDriver, server: FakeOpenAI, text: str, press: str) -> Any:
    """An ``on_iopub`` that, once the turn's first model request is out (its slow tool call comes next),
    types ``text`` into the message box and presses Enter (``press="enter"``) or clicks Queue, as the
    browser would."""
    before = len(server.requests)
    widgets: dict[str, str] = {}

    def on_iopub(message: dict[str, Any]) -> None:
        if message["msg_type"] == "comm_open":
            state = message["content"]["data"].get("state", {})
            if state.get("_model_name") == "TextModel" and state.get("placeholder") == PLACEHOLDER:
                widgets["box"] = message["content"]["comm_id"]
            elif state.get("_model_name") == "ButtonModel" and state.get("description") == "Queue":
                widgets["queue"] = message["content"]["comm_id"]
        if len(server.requests) > before and "box" in widgets and "queue" in widgets and "sent" not in widgets:
            widgets["sent"] = "yes"
            kernel.comm_send(widgets["box"], {"method": "update", "state": {"value": text}, "buffer_paths": []})
            if press == "enter":
                kernel.comm_send(widgets["box"], {"method": "custom", "content": {"event": "submit"}})
            else:
                kernel.comm_send(widgets["queue"], {"method": "custom", "content": {"event": "click"}})

    return on_iopub


def user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            texts.append(content if isinstance(content, str) else content[0]["text"])
    return texts


def slow_tool() -> list[Any]:
    return tool_call_chunks([{"name": "bash", "arguments": {"command": "sleep 3; echo slept"}, "id": "slow"}])


def test_enter_in_the_message_box_steers_the_next_model_request(kernel: KernelDriver, server: FakeOpenAI) -> None:
    before = len(server.requests)
    server.enqueue(slow_tool(), text_chunks("Using polars then."))
    on_iopub = type_into_the_box(kernel, server, "Use polars, not pandas", "enter")
    result = kernel.run("%%pi\nLoad the data", cell_id="steer", on_iopub=on_iopub, timeout=60)
    assert result.status == "ok", result.text
    first, second = server.bodies[before:]
    assert user_texts(first)[-1] == "Load the data"
    assert user_texts(second)[-2:] == ["Load the data", "Use polars, not pandas"]
    roles = [message["role"] for message in second["messages"]]
    assert roles[-2:] == ["tool", "user"]  # seen after the running tool call
    mirror = FrontEndMirror()
    for message in result.messages:
        mirror.feed(message)
    [saved] = mirror.cell_outputs(result.messages[0]["parent_header"]["msg_id"])
    assert "Use polars, not pandas" in saved["data"]["text/plain"]  # in the turn's transcript


def test_queue_sends_a_follow_up_after_the_turn_would_end(kernel: KernelDriver, server: FakeOpenAI) -> None:
    before = len(server.requests)
    server.enqueue(slow_tool(), text_chunks("Loaded."), text_chunks("Plotted."))
    on_iopub = type_into_the_box(kernel, server, "Then plot it", "queue")
    result = kernel.run("%%pi\nLoad it", cell_id="queue", on_iopub=on_iopub, timeout=60)
    assert result.status == "ok", result.text
    _first, second, third = server.bodies[before:]
    assert user_texts(second)[-1] == "Load it"  # not a steering message: the turn went on without it
    assert user_texts(third)[-2:] == ["Load it", "Then plot it"]
    assert [message["role"] for message in third["messages"]][-2:] == ["assistant", "user"]
