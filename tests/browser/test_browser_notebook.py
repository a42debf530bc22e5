"""``%%pi --cells`` in a real JupyterLab (headless Chromium): the python tool's code appears as a new cell.

The kernel's execute reply carries a ``set_next_input`` payload; JupyterLab is
documented to insert its text as a new cell below the running one. This checks
that it does, with the fake OpenAI server as the model: one ``python`` call,
then an answer.
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

CODE = "answer = 6 * 7\nanswer"


def respond(body: dict[str, Any]) -> Any:
    if body["messages"][-1]["role"] == "tool":
        return text_chunks("The answer is 42.")
    return tool_call_chunks([("python", {"code": CODE})])


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=respond) as server:
        yield server


@pytest.fixture(scope="module")
def notebook(fake: FakeOpenAI) -> Iterator[NotebookPage]:
    from playwright.sync_api import sync_playwright

    env = {
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "sk-test-SECRET-browser-notebook-0123",
        "PI_MODEL": "fake-model",
        "PI_APPROVAL": "ask",
    }
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        server = JupyterLabServer(env).start()
        page = chromium.new_page(viewport={"width": 1280, "height": 1000})
        try:
            server.write_notebook("cells.ipynb", ["%%pi --cells --approve auto\nCompute the answer.", "1 + 1"])
            yield NotebookPage(page, server, "cells.ipynb").open()
        finally:
            page.close()
            server.stop()
            chromium.close()


def test_pi_cells_puts_the_python_code_in_a_new_cell_below(notebook: NotebookPage) -> None:
    cells = notebook.page.locator(".jp-Notebook .jp-Cell")
    assert cells.count() == 2  # a second cell: Shift+Enter moves to it rather than adding an empty one
    notebook.run(0)
    notebook.wait_prompt(0)
    notebook.wait_text(0, "The answer is 42.")
    new_cell = notebook.cell(1).locator(".jp-InputArea-editor")
    new_cell.get_by_text("answer = 6 * 7").first.wait_for(timeout=15_000)
    notebook.screenshot("notebook-cells")
    source = str(new_cell.inner_text())
    assert source.splitlines()[:3] == ["# pi: python call 1 of 1", "answer = 6 * 7", "answer"], source
    assert cells.count() == 3
    assert "1 + 1" in str(notebook.cell(2).locator(".jp-InputArea-editor").inner_text())  # inserted right below
