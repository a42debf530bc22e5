"""A notebook change's approval shows the cell's diff the same way on every surface: widget card, stdin, text.

The change's ``ApprovalPreview`` (what ``edit_cell`` and the other notebook tools put on their request)
is drawn with its title (``#N`` and the cell's first line), removed lines tinted red and added lines
green in the widget, ``-``/``+`` lines on stdin, ANSI colours in the plain-text view; keys are masked
and invisible characters shown on each.
"""

from __future__ import annotations

import re
from html import unescape

import pytest
from test_widgets_frontend import install_recording_comms

from pi_kernel.kernel.approval_hook import question
from pi_kernel.kernel.text_view import colour_diff
from pi_kernel.tools.approval import ApprovalDecision, ApprovalPreview, ApprovalRequest
from pi_kernel.tools.builtin.notebook_edits import cell_diff
from pi_kernel.widgets.approval_panel import ApprovalPanel
from pi_kernel.widgets.kit import WidgetKit
from pi_kernel.widgets.render import ADDED_BG, REMOVED_BG
from pi_kernel.widgets.turn_state import ShownRequest

KEY = "sk-test-SECRET-0123456789abcdef"
TITLE = "edit cell #2 (code) y = x +* 2"


def preview(after: str = "y = x * 2\ny") -> ApprovalPreview:
    return ApprovalPreview(TITLE, cell_diff("y = x +* 2\ny", after, "#2 (code) y = x +* 2"), "cell-2")


def request(change: ApprovalPreview) -> ApprovalRequest:
    args = {"cell": "#2", "edits": [{"old_text": "x +* 2", "new_text": "x * 2"}]}
    return ApprovalRequest("c1", "edit_cell", args, label="edit_cell", preview=change)


def test_the_widget_card_shows_the_title_and_the_tinted_diff_above_its_buttons(monkeypatch: pytest.MonkeyPatch) -> None:
    install_recording_comms(monkeypatch, [])
    decisions: list[ApprovalDecision] = []
    panel = ApprovalPanel(
        WidgetKit(), ShownRequest(request(preview())), lambda decision: decisions.append(decision) or True
    )
    html = panel.change.value
    assert f"<b>{TITLE}</b>" in unescape(html)
    assert re.search(rf"background:{re.escape(REMOVED_BG)}[^>]*>-y = x \+\* 2<", unescape(html))
    assert re.search(rf"background:{re.escape(ADDED_BG)}[^>]*>\+y = x \* 2<", unescape(html))
    assert panel.widget.children[0] is panel.change  # the diff first, then the buttons
    panel.approve.click()
    assert decisions[-1].kind == "approve"


def test_a_request_without_a_change_has_no_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    install_recording_comms(monkeypatch, [])
    plain = ApprovalRequest("c2", "bash", {"command": "ls"}, label="bash")
    assert ApprovalPanel(WidgetKit(), ShownRequest(plain), lambda decision: True).change.value == ""


def test_stdin_and_the_text_view_show_the_same_diff_with_keys_masked() -> None:
    change = preview(f"y = x * 2\nkey = '{KEY}'\ny")
    asked = question("edit_cell", request(change).args, None, change)
    assert asked.startswith(f"{TITLE}\n--- #2 (code) y = x +* 2 (before)\n")
    assert "\n-y = x +* 2\n" in asked and "\n+y = x * 2\n" in asked and KEY not in asked
    assert asked.rstrip().endswith("to edit the arguments:")
    coloured = colour_diff(change.diff)
    assert "\x1b[31m-y = x +* 2\x1b[0m" in coloured and "\x1b[32m+y = x * 2\x1b[0m" in coloured
    assert "\x1b[32m+++" not in coloured and "\x1b[31m---" not in coloured  # the header is not a change


def test_a_bidi_override_in_a_cells_first_line_shows_in_the_title_on_every_card(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_recording_comms(monkeypatch, [])
    title = "delete #2 (code) ok = 1  # \u202etxt.lmth\u202c"
    change = ApprovalPreview(title, cell_diff("ok = 1", "", "#2 (code)"), "cell-2")
    html = unescape(ApprovalPanel(WidgetKit(), ShownRequest(request(change)), lambda decision: True).change.value)
    assert "\u202e" not in html and "<b>delete #2 (code) ok = 1  # \\u202etxt.lmth\\u202c</b>" in html
    asked = question("delete_cells", {"cells": ["#2"]}, None, change)
    assert "\u202e" not in asked and "ok = 1  # \\u202etxt.lmth\\u202c\n" in asked
    assert asked.startswith("[")  # the warning about invisible characters comes first


def test_a_change_to_the_final_newline_shows_on_the_diff() -> None:
    added = cell_diff("x = 1", "x = 1\n", "#1 (code) x = 1")
    assert "-x = 1\n\\ No newline at end of file\n+x = 1\n" in added
    assert "No newline" not in cell_diff("x = 1", "x = 2", "#1 (code) x = 1")
