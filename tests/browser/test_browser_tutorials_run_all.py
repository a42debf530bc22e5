"""Every tutorial as a new user runs it: ``make lab``, the printed URL, Run All, Approve on each card.

``make lab`` (its setup step taken as done: the test run's environment is
the one it builds) serves a git-ignored copy of ``notebooks/`` and prints a
URL that opens the quickstart. In headless Chromium this test opens that URL,
then runs every tutorial with JupyterLab's own Run All, clicking **Approve**
on each approval card, as a person reading the notebook would. The tutorials
run on the offline model with nothing configured; the real notebook bridge
(the prebuilt extension the package installs) connects 09.

Each saved notebook must show its lesson: the same checks as the nbclient
run (``test_notebooks.CHECKS``, with every call approved by a click), and for
09 the fixed, re-run cell and the added summary. A cell JupyterLab inserted
from ``%%pi --cells`` is run too, as the person would. At the end
``git status`` is what it was before: nothing was written into the
repository outside the ignored copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from browser_helpers import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    NotebookPage,
    free_port,
    stop_process_group,
    wait_until_serving,
)
from kernel_helpers import REPO
from test_notebooks import CHECKS, NEXT_INPUT_TAG, check_every_turn, local_settings

TUTORIALS = sorted(path.name for path in (REPO / "notebooks").glob("*.ipynb"))
NOTEBOOK_TIMEOUT_S = 600

pytestmark = [
    pytest.mark.browser,
    pytest.mark.local_model,  # skipped without the model, failed under PI_REQUIRE_LOCAL_MODEL=1 (conftest)
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
    pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
]


@dataclass
class MadeLab:
    """What ``make lab`` started: the URL it printed, the folder it serves (the copy), the process."""

    printed_url: str
    notebooks: Path
    process: subprocess.Popen[bytes]
    status_before: str
    """``git status`` before ``make lab`` started."""
    app: str = "lab"

    @property
    def url(self) -> str:
        return self.printed_url.split("/lab", 1)[0]


def git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def made_lab() -> Iterator[MadeLab]:
    """``make lab`` as the README runs it, on a free port, serving a copy in ``.tutorials/`` (git-ignored)."""
    status_before = git_status()
    copy = REPO / ".tutorials" / f"run-all-{uuid.uuid4().hex[:8]}"
    home = Path(tempfile.mkdtemp(prefix="pi-make-lab-"))
    port = free_port()
    flags = (
        "--no-browser --allow-root --ip=127.0.0.1 --ServerApp.token= --ServerApp.password= "
        "--LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"
    )
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith(("PI_", "OPENAI_", "JUPYTER"))},
        **local_settings(),
        "HOME": str(home),  # no user configuration, no user .env: a new user's machine
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
    }
    notification = home / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text('{"fetchNews": "false"}')
    command = [
        "timeout", str(NOTEBOOK_TIMEOUT_S * (len(TUTORIALS) + 1)),
        "make", "-o", "setup", "lab",
        f"VENV={sys.prefix}", f"TUTORIALS={copy}", f"PORT={port}", f"LAB_FLAGS={flags}",
    ]  # fmt: skip
    log = home / "make-lab.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_until_serving(process, f"http://127.0.0.1:{port}/api/status", log, timeout=120)
        deadline = time.monotonic() + 30
        printed = None
        while printed is None and time.monotonic() < deadline:
            found = re.search(rf"http://127\.0\.0\.1:{port}/\S+", log.read_text())
            printed = found.group(0) if found else None
            time.sleep(0.2)
        assert printed, log.read_text()[-2000:]
        yield MadeLab(printed, copy, process, status_before)
    finally:
        stop_process_group(process)
        shutil.rmtree(copy, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def browser_page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 1000})
        finally:
            browser.close()


def run_all_approving(notebook: NotebookPage, original_ids: set[str]) -> dict[str, Any]:
    """Run All from the menu, click Approve on every card, until every cell of the tutorial has run and no
    card waits; returns the notebook as saved. (JupyterLab draws only the cells in view, so what has run is
    read from the saved file, not from the page.)"""
    page = notebook.page
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    deadline = time.monotonic() + NOTEBOOK_TIMEOUT_S
    pending: list[str] | None = None
    while True:
        settle_approving(notebook, deadline)
        saved = notebook.save()
        before, pending = (
            pending,
            [
                cell["id"]
                for cell in saved["cells"]
                if cell["cell_type"] == "code"
                and cell.get("id") in original_ids
                and cell.get("execution_count") is None
            ],
        )
        if not pending or pending == before or time.monotonic() > deadline:
            return saved


def kernel_idle(notebook: NotebookPage) -> bool:
    from playwright.sync_api import Error as PlaywrightError

    try:
        return notebook.status_bar_kernel_state(timeout=2) == "Idle"
    except PlaywrightError:  # starting, restarting: not idle
        return False


def settle_approving(notebook: NotebookPage, deadline: float) -> None:
    """Click Approve on each card as it comes, until nothing runs and no card waits for 5 seconds."""
    from playwright.sync_api import Error as PlaywrightError

    page = notebook.page
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        approve = page.get_by_role("button", name="Approve", exact=True).locator("visible=true")
        clicked = False
        if approve.count():
            try:  # a card can be answered (and its buttons go) between the count and the click
                approve.first.click(timeout=5000)
                clicked = True
            except PlaywrightError:
                pass
        prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").all_inner_texts()
        busy = (
            clicked
            or any("*" in prompt for prompt in prompts)
            or notebook.execution_indicator() == "busy"
            or not kernel_idle(notebook)
        )
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 5:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{notebook.name} did not finish in {NOTEBOOK_TIMEOUT_S} s")


def run_inserted_cells(notebook: NotebookPage, original_ids: set[str], saved: dict[str, Any]) -> bool:
    """Run the code cells JupyterLab inserted from a ``%%pi --cells`` payload (not in the tutorial, never run),
    as the person would; ``True`` if there was one."""
    inserted = [
        index
        for index, cell in enumerate(saved["cells"])
        if cell["cell_type"] == "code" and cell.get("id") not in original_ids and cell.get("execution_count") is None
    ]
    for index in inserted:
        notebook.run(index)
        settle_approving(notebook, time.monotonic() + NOTEBOOK_TIMEOUT_S)
    return bool(inserted)


def check_agent_edits(nb: Any) -> None:
    """09's lesson, on the saved notebook: cell #6 fixed in place and run (its output in it), the kernel has
    ``average``, and a summary markdown cell was added at the end."""
    fixed = nb.cells[5]
    assert fixed.source == "prices = [3, 5, 8]\naverage = sum(prices) / len(prices)\naverage", fixed.source
    assert fixed.outputs[-1]["output_type"] == "execute_result", fixed.outputs
    assert fixed.outputs[-1]["data"]["text/plain"].startswith("5.333"), fixed.outputs
    average = next(cell for cell in nb.cells if cell.cell_type == "code" and cell.source == "average")
    assert average.outputs and average.outputs[0]["data"]["text/plain"].startswith("5.333"), average.outputs
    assert nb.cells[-1].cell_type == "markdown" and nb.cells[-1].source.startswith("## Summary"), nb.cells[-1]


def shut_down_kernels(page: Any) -> None:
    """Every kernel of the server, so the next tutorial has the machine to itself."""
    page.evaluate(
        """async () => {
            const xsrf = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || "";
            const sessions = await (await fetch("/api/sessions")).json();
            for (const s of sessions) {
                await fetch(`/api/sessions/${s.id}`, {method: "DELETE", headers: {"X-XSRFToken": xsrf}});
            }
        }"""
    )


def test_the_printed_url_opens_the_quickstart(made_lab: MadeLab, browser_page: Any) -> None:
    assert made_lab.printed_url.endswith("/lab/tree/01_quickstart.ipynb"), made_lab.printed_url
    browser_page.goto(made_lab.printed_url, timeout=90_000)
    browser_page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    current = browser_page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel")
    assert current.first.inner_text() == "01_quickstart.ipynb"


@pytest.mark.timeout(NOTEBOOK_TIMEOUT_S)
@pytest.mark.parametrize("name", TUTORIALS)
def test_run_all_shows_the_lesson(name: str, made_lab: MadeLab, browser_page: Any) -> None:
    original = nbformat.read(REPO / "notebooks" / name, as_version=4)
    original_ids = {cell.get("id") for cell in original.cells}
    notebook = NotebookPage(browser_page, made_lab, name).open()  # type: ignore[arg-type]
    try:
        saved = run_all_approving(notebook, original_ids)
        if run_inserted_cells(notebook, original_ids, saved):
            saved = notebook.save()
        notebook.screenshot(f"run-all-{Path(name).stem}")
        (ARTIFACTS / f"run-all-{name}").write_text(json.dumps(saved, indent=1))  # what the checks read
    finally:
        shut_down_kernels(browser_page)
    nb = nbformat.reads(nbformat.writes(nbformat.from_dict(saved)), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.get("id") not in original_ids:
            cell.metadata.setdefault("tags", []).append(NEXT_INPUT_TAG)
    errors = [
        (cell.source[:80], output.get("ename"), output.get("evalue"))
        for cell in nb.cells
        if cell.cell_type == "code" and "raises-exception" not in cell.metadata.get("tags", [])
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert errors == [], errors
    not_run = [cell.source[:80] for cell in nb.cells if cell.cell_type == "code" and cell.execution_count is None]
    assert not_run == [], f"Run All left cells that never ran: {not_run}"
    noise = [
        output["text"][:300]
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream"
        and any(mark in output["text"] for mark in ("Traceback (most recent", "Task was destroyed", "never awaited"))
    ]
    assert noise == [], noise  # a dropped kernel message or a stray traceback, even if every lesson holds
    check_every_turn(nb)
    if name in CHECKS:
        CHECKS[name](nb, "ask", made_lab.notebooks)
    else:
        check_agent_edits(nb)


def test_running_the_tutorials_leaves_git_status_as_it_was(made_lab: MadeLab) -> None:
    """Runs after every tutorial's Run All (pytest keeps the file's order)."""
    assert git_status() == made_lab.status_before, "running the tutorials wrote into the repository"
    assert not list((REPO / "notebooks").glob("todo*.txt"))
