"""The agent edits the notebook in a real JupyterLab (headless Chromium), end to end.

The Pi kernel, the notebook bridge extension and the scripted OpenAI-compatible
server as the model: a failing cell #2 is fixed in place through ``edit_cell``
once its diff card is approved (the cell highlighted while the card waits),
then ``run_cells`` shows the new output in cell #2; ``insert_cells`` adds a
markdown and two code cells that ``run_cells`` runs; Deny leaves the notebook
as it was; ``%pi undo`` puts back the cell, a DataFrame changed in place and a
file the turn wrote. Hostile timing: a cell the user edits while its card waits
is refused as stale, and an undo after the user edited the cell keeps their
version and says so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, JupyterLabServer, NotebookPage
from fake_openai import FakeOpenAI, ToolCallSpec, text_chunks, tool_call_chunks

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

CELLS = [
    "x = 10",
    "print(x / 0)",
    "%%pi\nFix cell #2 (fix).",
    "%%pi\nAdd a section (insert).",
    "%%pi\nChange cell #1 (deny).",
    "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nopen('notes.txt', 'w').write('old notes')",
    "%%pi --approve auto\nChange the cell, the frame and the notes (undo).",
    "%pi undo",
    "print(open('notes.txt').read(), df['a'].tolist(), x)",
    "%%pi\nChange cell #1 (stale).",
    "%%pi --approve auto\nChange cell #1 again (again).",
    "%pi undo",
]
FIX, INSERT, DENY, SETUP, CHANGE, UNDO, CHECK, STALE, AGAIN, UNDO_AGAIN = range(2, 12)

SCRIPTS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "(fix)": [
        ("edit_cell", {"cell": "#2", "edits": [{"old_text": "x / 0", "new_text": "x / 4"}]}),
        ("run_cells", {"cells": ["#2"]}),
    ],
    "(insert)": [
        (
            "insert_cells",
            {
                "cells": [
                    {"type": "markdown", "source": "## Tripled"},
                    {"type": "code", "source": "y = x * 3"},
                    {"type": "code", "source": "print('y + 1 =', y + 1)"},
                ]
            },
        ),
        ("run_cells", {"cells": [f"#{len(CELLS) + 2}", f"#{len(CELLS) + 3}"]}),  # inserted at the end
    ],
    "(deny)": [("edit_cell", {"cell": "#1", "source": "x = 0"})],
    "(stale)": [("edit_cell", {"cell": "#1", "source": "x = 12"})],
    "(again)": [("edit_cell", {"cell": "#1", "source": "x = 13"})],
    "(undo)": [
        ("edit_cell", {"cell": "#1", "edits": [{"old_text": "x = 10", "new_text": "x = 11"}]}),
        ("python", {"code": "df['a'] *= 100"}),
        ("write", {"path": "notes.txt", "content": "new notes"}),
    ],
}


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def respond(body: dict[str, Any]) -> Any:
    """The model: each turn's script of tool calls, one per request, then a short answer."""
    messages = body["messages"]
    last_user = max(index for index, message in enumerate(messages) if message["role"] == "user")
    prompt = _text(messages[last_user])
    key = next(key for key in SCRIPTS if key in prompt)
    step = sum(1 for message in messages[last_user + 1 :] if message["role"] == "tool")
    script = SCRIPTS[key]
    if step < len(script):
        name, arguments = script[step]
        return tool_call_chunks([ToolCallSpec(name, arguments, f"call_{key.strip('()')}_{step}")])
    return text_chunks(f"Done {key}.")


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
        "OPENAI_API_KEY": "sk-test-SECRET-agent-edits-0123",
        "PI_MODEL": "fake-model",
        "PI_APPROVAL": "ask",
        "PI_APPROVAL_TIMEOUT": "120",
    }
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        server = JupyterLabServer(env).start()
        page = chromium.new_page(viewport={"width": 1280, "height": 1000})
        try:
            server.write_notebook("edits.ipynb", CELLS)
            yield NotebookPage(page, server, "edits.ipynb").open()
        finally:
            page.close()
            server.stop()
            chromium.close()


def source(notebook: NotebookPage, index: int) -> str:
    return str(notebook.cell(index).locator(".jp-InputArea-editor .cm-content").text_content())


def sources(notebook: NotebookPage) -> list[str]:
    return [source(notebook, index) for index in range(notebook.page.locator(".jp-Notebook .jp-Cell").count())]


def wait_source(notebook: NotebookPage, index: int, expected: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while source(notebook, index) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"cell {index} shows {source(notebook, index)!r}, not {expected!r}")
        time.sleep(0.05)


def approve_button(notebook: NotebookPage, cell: int, name: str = "Approve") -> Any:
    """The card's button that is still enabled (a decided card keeps its buttons, disabled)."""
    button = notebook.output(cell).locator("button:not([disabled])", has_text=name).first
    button.wait_for(timeout=30_000)
    return button


def highlighted(notebook: NotebookPage) -> list[int]:
    return list(
        notebook.page.evaluate(
            """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell'))
                .map((cell, index) => cell.classList.contains('pi-bridge-highlight') ? index : -1)
                .filter(index => index >= 0)"""
        )
    )


def test_a_failing_cell_is_fixed_in_place_after_its_diff_is_approved(notebook: NotebookPage) -> None:
    notebook.run(0)
    notebook.wait_prompt(0)
    notebook.run(1)
    notebook.wait_text(1, "ZeroDivisionError")
    notebook.run(FIX)
    approve = approve_button(notebook, FIX)
    card = notebook.output_text(FIX)
    assert "edit_cell" in card and "#2" in card and "print(x / 0)" in card
    removed = notebook.output(FIX).get_by_text("-print(x / 0)").first
    added = notebook.output(FIX).get_by_text("+print(x / 4)").first
    assert removed.is_visible() and added.is_visible()  # the card shows the cell's line diff
    assert highlighted(notebook) == [1]  # cell #2 is marked while its card waits
    time.sleep(0.5)  # the card has grown below it: the cell stays in view
    assert in_view(notebook, notebook.cell(1))
    assert source(notebook, 1) == "print(x / 0)"  # nothing changed before the approval
    notebook.screenshot("agent-edits-diff-card")
    approve.click()
    wait_source(notebook, 1, "print(x / 4)")
    approve_button(notebook, FIX).click()  # run_cells
    notebook.wait_text(1, re.compile(r"^\s*2\.5\s*$"))
    assert "ZeroDivisionError" not in notebook.output_text(1)  # the new output replaced the error
    notebook.wait_text(FIX, "Done (fix).")
    notebook.wait_prompt(FIX)
    assert re.fullmatch(r"\[\d+\]:", notebook.prompt(1))
    assert highlighted(notebook) == []
    notebook.screenshot("agent-edits-fixed")


def test_inserted_markdown_and_code_cells_are_run(notebook: NotebookPage) -> None:
    count = len(CELLS)
    notebook.run(INSERT)
    approve = approve_button(notebook, INSERT)
    assert "+## Tripled" in notebook.output_text(INSERT) and "+y = x * 3" in notebook.output_text(INSERT)
    approve.click()
    cells = notebook.page.locator(".jp-Notebook .jp-Cell")
    deadline = time.monotonic() + 15
    while cells.count() < count + 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cells.count() == count + 3
    heading = cells.nth(count).locator(".jp-RenderedMarkdown h2")
    heading.wait_for(timeout=5000)
    assert str(heading.text_content()).rstrip("¶") == "Tripled"
    assert sources(notebook)[count + 1 :] == ["y = x * 3", "print('y + 1 =', y + 1)"]
    approve_button(notebook, INSERT).click()  # run_cells
    notebook.wait_text(count + 2, "y + 1 = 31")
    notebook.wait_text(INSERT, "Done (insert).")
    notebook.wait_prompt(INSERT)
    assert re.fullmatch(r"\[\d+\]:", notebook.prompt(count + 1))


def test_deny_leaves_the_notebook_unchanged(notebook: NotebookPage, fake: FakeOpenAI) -> None:
    before = sources(notebook)
    notebook.run(DENY)
    approve_button(notebook, DENY)
    assert highlighted(notebook) == [0]
    approve_button(notebook, DENY, "Deny").click()
    notebook.wait_text(DENY, "Done (deny).")
    notebook.wait_prompt(DENY)
    assert sources(notebook) == before
    assert highlighted(notebook) == []
    tool_messages = [message for message in fake.last_body["messages"] if message["role"] == "tool"]
    assert "denied" in _text(tool_messages[-1]).lower() or "deny" in _text(tool_messages[-1]).lower()


def test_pi_undo_restores_the_cell_the_frame_and_the_file(notebook: NotebookPage) -> None:
    notebook.run(SETUP)
    notebook.wait_prompt(SETUP)
    notebook.run(CHANGE)
    notebook.wait_text(CHANGE, "Done (undo).", timeout=60)
    notebook.wait_prompt(CHANGE)
    wait_source(notebook, 0, "x = 11")
    notes = notebook.server.notebooks / "notes.txt"
    assert notes.read_text() == "new notes"
    notebook.run(UNDO)
    notebook.wait_prompt(UNDO)
    wait_source(notebook, 0, "x = 10")
    assert notes.read_text() == "old notes"
    notebook.run(CHECK)
    notebook.wait_text(CHECK, "old notes [1, 2, 3]")
    notebook.screenshot("agent-edits-undone")


def test_a_cell_the_user_changes_while_its_card_waits_is_not_overwritten(
    notebook: NotebookPage, fake: FakeOpenAI
) -> None:
    notebook.run(STALE)
    approve = approve_button(notebook, STALE)
    assert source(notebook, 0) == "x = 10"
    editor = notebook.cell(0).locator(".jp-InputArea-editor .cm-content")
    editor.click()
    notebook.page.keyboard.press("End")
    notebook.page.keyboard.type("  # mine")
    wait_source(notebook, 0, "x = 10  # mine")
    approve.click()
    notebook.wait_text(STALE, "Done (stale).")
    notebook.wait_prompt(STALE)
    assert source(notebook, 0) == "x = 10  # mine"  # the user's edit stays; the agent's change was refused
    tool_messages = [message for message in fake.last_body["messages"] if message["role"] == "tool"]
    assert "changed while waiting for approval" in _text(tool_messages[-1])


def test_undo_keeps_a_cell_the_user_edited_after_the_turn_and_says_so(notebook: NotebookPage) -> None:
    notebook.run(AGAIN)
    notebook.wait_text(AGAIN, "Done (again).")
    notebook.wait_prompt(AGAIN)
    wait_source(notebook, 0, "x = 13")
    notebook.cell(0).locator(".jp-InputArea-editor .cm-content").click()
    notebook.page.keyboard.press("End")
    notebook.page.keyboard.type("  # user")
    wait_source(notebook, 0, "x = 13  # user")
    notebook.run(UNDO_AGAIN)
    notebook.wait_text(UNDO_AGAIN, "changed since the turn; your version is kept")
    assert source(notebook, 0) == "x = 13  # user"
    assert "#1" in notebook.output_text(UNDO_AGAIN)


def in_view(notebook: NotebookPage, locator: Any) -> bool:
    """The element's box overlaps the notebook's scrolled viewport."""
    return bool(
        locator.evaluate(
            """node => {
                const box = node.getBoundingClientRect();
                const view = node.closest('.jp-WindowedPanel-outer').getBoundingClientRect();
                return box.bottom > view.top + 10 && box.top < view.bottom - 10;
            }"""
        )
    )
