"""The widgets in a real JupyterLab, in headless Chromium, against the fake OpenAI server.

One JupyterLab, one notebook, one page for the module; the tests run its
cells in order (each builds on the kernel the previous ones used):
streaming text, a tool card approved, one denied (the model receives the
reason), an interrupt while an approval waits, and the saved notebook
reloaded. Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, JupyterLabServer, NotebookPage
from fake_openai import Chunks, FakeOpenAI, ToolCallSpec, text_chunks, tool_call_chunks

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

FAKE_KEY = "sk-test-SECRET-browser-0123456789"
WORDS = " ".join(f"word{index}" for index in range(200))
LONG_ANSWER = f"Streaming **works**: {WORDS}."
REASON = (
    "Use mental arithmetic instead: adding two small numbers needs no tool at all, and every call of this one"
    " waits for somebody to click a button first"
)
"""Long on purpose: the denied card's header must keep the tool's name beside the disclosure caret."""
INTERRUPTED_CALL = "call_interrupted"
CELLS = [
    'from pi_kernel import tool\n\n@tool(approval="ask")\ndef add(a: int, b: int) -> int:\n'
    '    """Add two numbers."""\n    return a + b',
    "%%pi\nPlease stream a long answer.",
    "%%pi\nAdd 2 and 3 (approve).",
    "%%pi\nAdd 2 and 3 (deny).",
    "%%pi\nAdd 2 and 3 (interrupt).",
    "1 + 1",
]


def respond(body: dict[str, Any]) -> Any:
    """The model: a slow long answer, or a call of ``add`` and then what the tool said."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text_chunks(f"The tool said: {last['content']}", parts=3)
    prompt = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    if "stream" in prompt:
        return Chunks(text_chunks(LONG_ANSWER, parts=100), delay=0.03)
    call_id = INTERRUPTED_CALL if "interrupt" in prompt else None  # None: call_0
    return tool_call_chunks([ToolCallSpec("add", {"a": 2, "b": 3}, call_id)])


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=respond) as server:
        yield server


def _kernel_env(fake: FakeOpenAI) -> dict[str, str]:
    return {
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": FAKE_KEY,
        "PI_MODEL": "fake-model",
        "PI_APPROVAL": "ask",
        "PI_APPROVAL_TIMEOUT": "120",
    }


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _open_notebook(browser: Any, fake: FakeOpenAI, app: str) -> Iterator[NotebookPage]:
    server = JupyterLabServer(_kernel_env(fake), app=app).start()
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        server.write_notebook("agent.ipynb", CELLS)
        notebook = NotebookPage(page, server, "agent.ipynb").open()
        notebook.run(0)
        notebook.wait_prompt(0)
        yield notebook
    finally:
        page.close()
        server.stop()


@pytest.fixture(scope="module")
def notebook(browser: Any, fake: FakeOpenAI) -> Iterator[NotebookPage]:
    """The notebook in JupyterLab 4."""
    yield from _open_notebook(browser, fake, "lab")


@pytest.fixture(scope="module")
def notebook7(browser: Any, fake: FakeOpenAI) -> Iterator[NotebookPage]:
    """The notebook in Notebook 7."""
    yield from _open_notebook(browser, fake, "notebook")


def _approve_button(notebook: NotebookPage, cell: int) -> Any:
    button = notebook.output(cell).get_by_role("button", name="Approve")
    button.wait_for(timeout=30_000)
    return button


def test_text_streams_in_then_stays_as_static_markdown(notebook: NotebookPage) -> None:
    notebook.run(1)
    notebook.wait_text(1, "word20")
    partial = notebook.output_text(1)
    live_widgets = notebook.output(1).locator(".jupyter-widgets").count()
    notebook.screenshot("01-streaming")
    assert "word199" not in partial, "the answer should be visible while it still streams"
    assert live_widgets > 0, "it streams into the live widget view (the text view would pass the rest)"
    notebook.wait_prompt(1)
    notebook.wait_text(1, "word199")
    strong = notebook.output(1).locator("strong", has_text="works")
    strong.wait_for(timeout=10_000)  # rendered markdown, not the raw stream
    assert notebook.output(1).locator(".jupyter-widgets").count() == 0  # the live widgets were replaced
    notebook.screenshot("02-streamed")


def test_tool_card_is_approved_and_the_answer_follows(notebook: NotebookPage) -> None:
    notebook.run(2)
    button = _approve_button(notebook, 2)
    card = notebook.output_text(2)
    assert "add" in card and "waiting for approval" in card
    assert re.search(r"\d+\.\d s", card)  # elapsed time
    assert re.search(r'"a":\s*2', card)  # the arguments, as pretty JSON
    # The cell stays busy while it waits: its prompt, the notebook's execution indicator and the status bar
    # say so (JupyterLab opens a comm subshell for the widgets; the kernel re-asserts "busy" after that control
    # request's own busy/idle, ipykernel issue #799).
    assert notebook.prompt(2) == "[*]:"
    assert notebook.execution_indicator() == "busy"
    assert notebook.status_bar_kernel_state() == "Busy"
    notebook.screenshot("03-approval-waiting")
    button.click()
    notebook.wait_text(2, "The tool said: 5")
    notebook.wait_prompt(2)
    text = notebook.output_text(2)
    assert "done" in text and "approved" in text
    result = notebook.output(2).locator("details pre", has_text=re.compile(r"^\s*5\s*$"))
    assert result.is_visible()  # the tool's result, shown (a short card stays open)
    notebook.screenshot("04-approved")


def test_deny_sends_the_reason_to_the_model(notebook: NotebookPage, fake: FakeOpenAI) -> None:
    notebook.run(3)
    _approve_button(notebook, 3)
    reason_box = notebook.output(3).get_by_placeholder(re.compile("Reason for denying"))
    reason_box.fill(REASON)
    notebook.output(3).get_by_role("button", name="Deny").click()
    notebook.wait_text(3, f"The tool said: {REASON}")
    notebook.wait_prompt(3)
    tool_messages = [message for message in fake.last_body["messages"] if message["role"] == "tool"]
    assert tool_messages[-1]["content"] == REASON
    assert "denied" in notebook.output_text(3)
    notebook.screenshot("05-denied")
    # The static card's header: the name on the disclosure caret's line (not pushed below it by the
    # long reason), the reason on the next line.
    summary = notebook.output(3).locator("details summary").first
    name, reason = summary.locator("b").first, summary.get_by_text(re.compile("^denied: Use mental"))
    summary_box, name_box, reason_box = summary.bounding_box(), name.bounding_box(), reason.bounding_box()
    assert name_box["y"] - summary_box["y"] < name_box["height"] / 2, (summary_box, name_box)
    assert reason_box["y"] >= name_box["y"] + name_box["height"] - 2, (name_box, reason_box)


def test_interrupt_while_an_approval_waits(notebook: NotebookPage, fake: FakeOpenAI) -> None:
    notebook.run(4)
    _approve_button(notebook, 4)
    notebook.interrupt()
    notebook.wait_text(4, "interrupted", timeout=15)
    notebook.wait_prompt(4, timeout=15)
    card = notebook.output(4).locator("details summary", has_text="add").first
    assert "interrupted" in card.inner_text()  # the call's own card, not only a notice under it
    notebook.screenshot("06-interrupted")
    notebook.run(5)
    notebook.wait_text(5, re.compile(r"^2$"), timeout=20)  # the kernel is usable afterwards
    assert "5" not in fake.tool_results(INTERRUPTED_CALL), "the interrupted call ran and its result reached the model"


def test_saved_notebook_renders_after_reload(notebook: NotebookPage) -> None:
    saved = notebook.save()
    for index in (1, 2, 3, 4):
        outputs = saved["cells"][index]["outputs"]
        kinds = {key for output in outputs for key in output.get("data", {})}
        assert "application/vnd.jupyter.widget-view+json" not in kinds
        assert {"text/html", "text/markdown", "text/plain"} <= kinds
        assert any("pi_kernel" in output.get("metadata", {}) for output in outputs)
    assert FAKE_KEY not in str(saved)
    notebook.open()
    notebook.wait_text(1, "word199")
    notebook.wait_text(2, "The tool said: 5")
    notebook.wait_text(3, f"The tool said: {REASON}")
    page_text = notebook.page.locator(".jp-Notebook").inner_text()
    assert "model not found" not in page_text.lower()
    assert "error displaying widget" not in page_text.lower()
    notebook.screenshot("07-reloaded")
    # The same static output in the dark theme (an artifact to look at: colours must read in both).
    page = notebook.page
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Theme", exact=True).hover()
    page.locator(".lm-Menu-itemLabel").get_by_text("JupyterLab Dark", exact=True).click()
    page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=10_000)
    page.wait_for_timeout(500)  # the theme's stylesheet applies
    notebook.cell(3).scroll_into_view_if_needed()
    notebook.screenshot("07-reloaded-dark")


def test_notebook7_streams_approves_and_keeps_static_output(notebook7: NotebookPage) -> None:
    notebook7.run(1)
    notebook7.wait_text(1, "word20")
    assert "word199" not in notebook7.output_text(1)
    notebook7.wait_prompt(1)
    notebook7.output(1).locator("strong", has_text="works").wait_for(timeout=10_000)
    notebook7.run(2)
    _approve_button(notebook7, 2).click()
    notebook7.wait_text(2, "The tool said: 5")
    notebook7.wait_prompt(2)
    saved = notebook7.save()
    kinds = {key for output in saved["cells"][2]["outputs"] for key in output.get("data", {})}
    assert "application/vnd.jupyter.widget-view+json" not in kinds and "text/html" in kinds
    notebook7.open()
    notebook7.wait_text(2, "The tool said: 5")
    page_text = notebook7.page.locator(".jp-Notebook").inner_text().lower()
    assert "model not found" not in page_text and "error displaying widget" not in page_text
    notebook7.screenshot("08-notebook7-reloaded")
