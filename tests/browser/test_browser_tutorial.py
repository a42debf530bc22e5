"""The quickstart tutorial as a newcomer meets it: JupyterLab, the offline model, one click on Approve.

``make lab`` opens (a copy of) ``notebooks/01_quickstart.ipynb`` on the Pi kernel with the
local model and nobody configured anything. This test does the same in
headless Chromium: Run All, wait for the approval card of the tool call,
click **Approve**, and check that every cell ran without an error, that the
approved call ran (its card says ``done``) and that the denied one did not.
The cell forces the tool call the tutorial describes (``--tool``), so it does not
depend on the model's choice; its wording is never checked.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, JupyterLabServer, NotebookPage
from kernel_helpers import REPO, kernel_env

QUICKSTART = REPO / "notebooks" / "01_quickstart.ipynb"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.local_model,  # skipped without the model, failed under PI_REQUIRE_LOCAL_MODEL=1 (conftest)
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def quickstart() -> Iterator[NotebookPage]:
    from playwright.sync_api import sync_playwright

    server = JupyterLabServer(kernel_env(PI_APPROVAL="ask", PI_APPROVAL_TIMEOUT="300")).start()
    shutil.copy(QUICKSTART, server.notebooks / QUICKSTART.name)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            yield NotebookPage(page, server, QUICKSTART.name).open()
        finally:
            browser.close()
            server.stop()


def _code_cell(notebook: NotebookPage, needle: str) -> int:
    """The index (among all cells on the page) of the code cell whose source contains ``needle``."""
    cells = notebook.page.locator(".jp-Notebook .jp-Cell")
    for index in range(cells.count()):
        cell = cells.nth(index)
        if "jp-CodeCell" in (cell.get_attribute("class") or "") and needle in cell.locator(".cm-content").inner_text():
            return index
    raise AssertionError(f"no code cell contains {needle!r}")


def _run_all(notebook: NotebookPage) -> None:
    page = notebook.page
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()


def test_quickstart_runs_in_jupyterlab_with_one_approval_click(quickstart: NotebookPage) -> None:
    notebook = quickstart
    ask = _code_cell(notebook, "What is 21 degrees Celsius")
    deny = _code_cell(notebook, "--approve deny")
    last = _code_cell(notebook, "%pi usage")
    _run_all(notebook)

    approve = notebook.output(ask).get_by_role("button", name="Approve")
    approve.wait_for(timeout=240_000)  # the chat cells before it run on the local model first
    assert "celsius_to_fahrenheit" in notebook.output_text(ask)
    assert notebook.prompt(last) == "[*]:", "Run All must wait behind the cell that waits for approval"
    notebook.screenshot("tutorial-01-approval")
    approve.click()

    notebook.wait_prompt(last, timeout=240)
    notebook.screenshot("tutorial-01-done")
    errors = notebook.page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tracebacks = [text for text in errors.all_inner_texts() if "Error" in text]
    assert tracebacks == [], tracebacks
    assert re.search(r"\bdone\b", notebook.output_text(ask)), notebook.output_text(ask)
    assert re.search(r"°C is [\d.]+ °F", notebook.output_text(ask))  # the tool's own result, shown on its card
    denied = notebook.output_text(deny)
    # A denied call never runs: no result of the tool (the model may still write about °F itself).
    assert "denied" in denied and "°C is 212.0 °F" not in denied
    assert re.search(r"over [1-9]\d* model request", notebook.output_text(last))  # %pi usage counted them
