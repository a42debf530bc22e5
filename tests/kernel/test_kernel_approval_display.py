"""What a person approves is shown whole, or cut with its head and tail visible and a plain warning.

A ``bash`` command padded with harmless text once hid its dangerous tail in
the stdin question and the plain-text view (both cut it at one end), and it
ran after ``y``. Every approval surface keeps both ends now: the stdin
question, the text view, the widget card (see also the browser test) and the
edit form (whole).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env
from test_widgets_frontend import install_recording_comms

from pi_kernel.tools.approval import ApprovalRequest, cut_middle
from pi_kernel.widgets.approval_panel import ApprovalPanel
from pi_kernel.widgets.kit import WidgetKit
from pi_kernel.widgets.render import call_html
from pi_kernel.widgets.turn_state import ShownRequest, ToolCallBlock

TAIL = "rm -rf ~/DANGER_TAIL"
PADDED = "echo start " + "harmless " * 4_000 + "; " + TAIL
"""36 KB: longer than every surface shows whole."""


def test_cut_middle_keeps_both_ends_and_names_what_it_hides() -> None:
    assert cut_middle("short", 100) == "short"
    shown = cut_middle(PADDED, 1_000)
    assert shown.startswith("echo start") and shown.endswith(TAIL)
    assert f"{len(PADDED) - 1_000:,} characters hidden here" in shown


def _waiting_block() -> ToolCallBlock:
    block = ToolCallBlock(id="c1", name="bash")
    block.arguments = {"command": PADDED}
    block.status = "waiting"
    block.request = ApprovalRequest("c1", "bash", {"command": PADDED}, label="bash")
    return block


def test_the_widget_card_shows_the_tail_of_a_long_call() -> None:
    html = call_html(_waiting_block())
    assert html.index("echo") < html.index("characters hidden here") < html.index("DANGER_TAIL")  # head, warning, tail


def test_the_edit_form_shows_the_whole_call(monkeypatch: pytest.MonkeyPatch) -> None:
    install_recording_comms(monkeypatch, [])
    request = _waiting_block().request
    assert request is not None
    panel = ApprovalPanel(WidgetKit(), ShownRequest(request), lambda decision: True)
    panel.edit.click()
    assert PADDED in panel.editor.value


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.mark.kernel
def test_stdin_question_and_text_view_show_the_tail(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as kernel:
        questions: list[str] = []
        shown: list[str] = []

        def answer(prompt: str) -> str:
            questions.append(prompt)
            shown.extend(_texts(kernel.iopub_log))  # what the text view showed while the person decided
            return "n: not that"

        server.enqueue(tool_call_chunks([("bash", {"command": PADDED})]), text_chunks("Not run."))
        result = kernel.run("%%pi\nclean up", allow_stdin=True, on_input=answer)
    assert result.status == "ok" and len(questions) == 1
    assert TAIL in questions[0] and "characters hidden here" in questions[0] and "echo start" in questions[0]
    waiting = [text for text in shown if "waiting for approval" in text]
    assert waiting and TAIL in waiting[-1] and "characters hidden here" in waiting[-1]


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    kinds = ("display_data", "update_display_data", "stream")
    return [
        str(m["content"].get("data", {}).get("text/plain", "")) + str(m["content"].get("text", ""))
        for m in messages
        if m["msg_type"] in kinds
    ]


# -- a bad tool definition never reaches a request -------------------------------------------------------------

BAD_TOOL_CELL = '''
from pi_kernel import tool

@tool
def scale(factor: float = float("nan")) -> float:
    """Scale something."""
    return factor
'''


@pytest.mark.kernel
def test_a_tool_whose_schema_cannot_be_sent_is_refused_in_its_cell(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as kernel:
        defined = kernel.run(BAD_TOOL_CELL)
        server.enqueue(text_chunks("Still fine."))
        later = kernel.run("%%pi\nhello")
    assert defined.status == "error" and 'Tool "scale": its parameters schema is not plain JSON' in defined.text
    assert later.status == "ok" and "Still fine." in later.text
    sent = [tool["function"]["name"] for tool in server.last_body.get("tools", [])]
    assert "scale" not in sent
