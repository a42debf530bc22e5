"""The "Undo this turn" button under a finished turn, in the real Pi kernel: a click (this test is the
front end) reverts what the turn changed, as ``%pi undo`` does, and the button becomes the report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env

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


def undo_buttons(messages: list[dict[str, Any]]) -> list[str]:
    return [
        message["content"]["comm_id"]
        for message in messages
        if message["msg_type"] == "comm_open"
        and message["content"]["data"].get("state", {}).get("description") == "Undo this turn"
    ]


def agent_sets(kernel: KernelDriver, server: FakeOpenAI, code: str, cell_id: str) -> list[str]:
    server.enqueue(
        tool_call_chunks([{"name": "python", "arguments": {"code": code}, "id": cell_id}]), text_chunks("Set.")
    )
    result = kernel.run(f"%%pi\nset it ({cell_id})", cell_id=cell_id)
    assert result.status == "ok", result.text
    return undo_buttons(result.messages)


def test_the_undo_button_reverts_the_turn_and_shows_the_report(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run("kept = [1, 2]").status == "ok"
    [button] = agent_sets(kernel, server, "kept.append(3)\nmade = 1", "b1")
    kernel.comm_send(button, {"method": "custom", "content": {"event": "click"}})

    def report(message: dict[str, Any]) -> bool:
        text = str(message["content"].get("data", {}).get("text/plain", ""))
        return message["msg_type"] == "update_display_data" and "Undid the turn" in text

    shown = kernel.wait_iopub(report, timeout=30)["content"]["data"]["text/plain"]
    assert "Restored 1 variable, 1 object changed in place." in shown, shown
    assert kernel.run("print(kept, 'made' in globals())").text.strip() == "[1, 2] False"


def test_a_newer_turn_retires_the_older_button(kernel: KernelDriver, server: FakeOpenAI) -> None:
    [older] = agent_sets(kernel, server, "first = 1", "b2")
    server.enqueue(text_chunks("Nothing to change."))
    result = kernel.run("%%pi\njust answer", cell_id="b3")
    assert result.status == "ok" and not undo_buttons(result.messages)  # it changed nothing: no button
    closed = [m for m in kernel.iopub_log if m["msg_type"] == "comm_close" and m["content"]["comm_id"] == older]
    assert closed, "the older turn's button stays open"
