"""A stock Python kernel gets the notebook bridge at ``%load_ext pi_kernel`` (real JupyterLab, headless Chromium).

The extension opens ``pi.notebook`` when the kernel is ready, but a stock
kernel has no such target yet and closes it. ``%load_ext pi_kernel``
registers the target and opens ``pi.notebook.hello``; the extension answers
by opening ``pi.notebook`` again, so the next ``%%pi`` turn can change
another cell (``edit_cell``, the scripted OpenAI-compatible server as the
model).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, REPO, JupyterLabServer, NotebookPage
from fake_openai import FakeOpenAI, ToolCallSpec, text_chunks, tool_call_chunks

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

CELLS = ["x = 1", "%load_ext pi_kernel", "%%pi --approve auto\nSet x to 2 in cell #1."]


def stock_notebook(sources: list[str]) -> dict[str, Any]:
    """A notebook for the stock ``python3`` kernel (no Pi kernel: the bridge comes with ``%load_ext``)."""
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [{**cell, "id": f"cell-{n}", "source": source} for n, source in enumerate(sources)],
    }


def respond(body: dict[str, Any]) -> Any:
    if body["messages"][-1]["role"] == "tool":
        return text_chunks("Cell #1 now sets x to 2.")
    return tool_call_chunks([ToolCallSpec("edit_cell", {"cell": "#1", "source": "x = 2"})])


@pytest.fixture(scope="module")
def notebook() -> Iterator[NotebookPage]:
    from playwright.sync_api import sync_playwright

    with FakeOpenAI(responder=respond) as fake, sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # The stock kernel inherits the server's environment: the working tree and the scripted model.
        env = {
            "PYTHONPATH": str(REPO),
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-test-SECRET-load-ext-0123",
            "PI_MODEL": "fake-model",
        }
        server = JupyterLabServer({}, extra_env=env).start()
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        try:
            (server.notebooks / "stock.ipynb").write_text(json.dumps(stock_notebook(CELLS), indent=1))
            yield NotebookPage(page, server, "stock.ipynb").open()
        finally:
            page.close()
            server.stop()
            chromium.close()


def test_load_ext_connects_the_bridge_and_a_turn_edits_another_cell(notebook: NotebookPage) -> None:
    notebook.run(1)
    notebook.wait_prompt(1)
    notebook.run(2)
    notebook.wait_text(2, "Cell #1 now sets x to 2.", timeout=60)
    notebook.wait_prompt(2)
    editor = notebook.cell(0).locator(".jp-InputArea-editor .cm-content")
    deadline = time.monotonic() + 10
    while editor.text_content() != "x = 2" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert editor.text_content() == "x = 2"
    assert "needs the notebook bridge" not in notebook.output_text(2)
