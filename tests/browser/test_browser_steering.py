"""Steering a running turn in real JupyterLab: a message typed into the live view's box while a slow tool
runs, sent with Enter, reaches the next model request (after the tool's result) and shows in the turn.
And the finished turn's "Undo this turn" button reverts what it changed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, JupyterLabServer, NotebookPage
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks

from pi_kernel.widgets.steer_box import PLACEHOLDER

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

STEERING = "Use polars, not pandas"
CELLS = ["1 + 1", "%%pi\nLoad the data.", "%%pi\nMake a variable.", "print('made' in globals())"]


def respond(body: dict[str, Any]) -> Any:
    last = body["messages"][-1]
    if last["role"] == "user" and "Make a variable." in str(last["content"]):
        return tool_call_chunks([{"name": "python", "arguments": {"code": "made = 1"}, "id": "make"}])
    if last["role"] == "user" and "Load the data." in str(last["content"]):
        return tool_call_chunks([{"name": "bash", "arguments": {"command": "sleep 8; echo loaded"}, "id": "slow"}])
    return text_chunks(f"Answered after {len(body['messages'])} messages.")


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[NotebookPage, FakeOpenAI]]:
    from playwright.sync_api import sync_playwright

    with FakeOpenAI(responder=respond) as fake, sync_playwright() as playwright:
        env = {
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent.parent),
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test-SECRET-browser-steering-0123",
            "PI_MODEL": "fake-model",
            "PI_APPROVAL": "auto",
        }
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        server = JupyterLabServer(env).start()
        page = chromium.new_page(viewport={"width": 1280, "height": 1000})
        try:
            server.write_notebook("steer.ipynb", CELLS)
            notebook = NotebookPage(page, server, "steer.ipynb").open()
            notebook.run(0)
            notebook.wait_prompt(0)
            yield notebook, fake
        finally:
            page.close()
            server.stop()
            chromium.close()


def test_a_message_typed_while_a_slow_tool_runs_reaches_the_next_request(
    lab: tuple[NotebookPage, FakeOpenAI],
) -> None:
    notebook, server = lab
    notebook.run(1)
    box = notebook.output(1).get_by_placeholder(PLACEHOLDER)
    box.wait_for(timeout=60_000)
    assert server.wait_for(lambda fake: len(fake.requests) >= 1, timeout=30)
    box.fill(STEERING)
    box.press("Enter")
    assert len(server.requests) == 1, "the slow tool ended before the message was sent"
    notebook.wait_text(1, "Answered after", timeout=60)
    notebook.wait_prompt(1)
    first, second = server.bodies[-2:]
    assert [message["role"] for message in second["messages"]][-3:] == ["assistant", "tool", "user"]
    assert STEERING in str(second["messages"][-1]["content"]) and STEERING not in str(first["messages"])
    assert STEERING in notebook.output_text(1)  # the turn's transcript shows it


def test_the_undo_button_reverts_the_finished_turn(lab: tuple[NotebookPage, FakeOpenAI]) -> None:
    notebook, _server = lab
    notebook.run(2)
    button = notebook.output(2).get_by_role("button", name="Undo this turn")
    button.wait_for(timeout=60_000)
    notebook.wait_prompt(2)
    notebook.run(3)
    notebook.wait_text(3, "True")
    button.click()
    notebook.wait_text(2, "Restored 1 variable.", timeout=30)
    notebook.run(3)
    notebook.wait_text(3, "False")
