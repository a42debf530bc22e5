"""A padded ``bash`` command in real JupyterLab: the card a person approves shows its dangerous tail.

The model asks to run ``echo start harmless harmless ... ; rm -rf ~/DANGER_TAIL``
(36 KB). The waiting card must show the head, a plain "characters hidden"
warning and the tail; the edit form shows the whole command. The person
denies it, and the command never runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, JupyterLabServer, NotebookPage
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

TAIL = "rm -rf ~/DANGER_TAIL"
PADDED = "echo start " + "harmless " * 4_000 + "; " + TAIL
CELLS = ["1 + 1", "%%pi\nClean up."]


def respond(body: dict[str, Any]) -> Any:
    if body["messages"][-1]["role"] == "tool":
        return text_chunks("Not run.")
    return tool_call_chunks([("bash", {"command": PADDED})])


@pytest.fixture(scope="module")
def notebook() -> Iterator[NotebookPage]:
    from playwright.sync_api import sync_playwright

    with FakeOpenAI(responder=respond) as fake, sync_playwright() as playwright:
        env = {
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test-SECRET-browser-display-0123",
            "PI_MODEL": "fake-model",
            "PI_APPROVAL": "ask",
            "PI_APPROVAL_TIMEOUT": "120",
        }
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        server = JupyterLabServer(env).start()
        page = chromium.new_page(viewport={"width": 1280, "height": 1000})
        try:
            server.write_notebook("display.ipynb", CELLS)
            page_notebook = NotebookPage(page, server, "display.ipynb").open()
            page_notebook.run(0)
            page_notebook.wait_prompt(0)
            yield page_notebook
        finally:
            page.close()
            server.stop()
            chromium.close()


def test_the_waiting_card_shows_head_warning_and_tail(notebook: NotebookPage) -> None:
    notebook.run(1)
    output = notebook.output(1)
    output.get_by_role("button", name="Approve").wait_for(timeout=30_000)
    card = notebook.output_text(1)
    assert "echo start" in card and TAIL in card
    assert card.index("echo start") < card.index("characters hidden here") < card.index(TAIL)
    output.get_by_role("button", name="Edit arguments").click()
    editor = output.locator("textarea").first
    editor.wait_for(timeout=10_000)
    assert TAIL in editor.input_value() and "characters hidden" not in editor.input_value()  # the form: whole
    notebook.screenshot("approval-display-padded")
    output.get_by_role("button", name="Deny").click()
    notebook.wait_text(1, "Not run.")
    notebook.wait_prompt(1)
