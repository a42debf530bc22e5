"""Secrets in the live widget view: masked before they leave, even when they arrive in pieces.

The kernel-level proof (every iopub message of a real ``%%pi`` turn) is in
test_widgets_kernel.py; these tests pin each part: the masked stream, the
view model it feeds, what the stream output and the HTML widgets send, the highlighted previews, the
approval editor.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from test_widgets_frontend import RecordingSender, install_recording_comms

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import TextContent
from pi_kernel.ai.messages import AssistantMessage, ToolCall
from pi_kernel.ai.secrets import MaskedStream, mask
from pi_kernel.kernel.persistence import save_conversation
from pi_kernel.tools.approval import ApprovalDecision, ApprovalRequest
from pi_kernel.widgets.approval_panel import ApprovalPanel
from pi_kernel.widgets.kit import WidgetKit
from pi_kernel.widgets.render import call_html, notice_html, render_static, result_html
from pi_kernel.widgets.stream_output import OutputRouter, StreamOutput
from pi_kernel.widgets.turn_state import NoticeBlock, ShownRequest, TextBlock, ToolCallBlock, TurnState

KEY = "sk-live-Zq8Lm2Np4Rt6Vx8Bq0Wc"
OTHER = "Hx7Kp3Lw9Mz2Qv5T"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("SERVICE_TOKEN", OTHER)


def _leaks(text: str) -> list[str]:
    pieces = [secret[i : i + 12] for secret in (KEY, OTHER) for i in range(len(secret) - 11)]
    return [piece for piece in pieces if piece in text]


def test_masked_stream_masks_keys_cut_anywhere() -> None:
    rng = random.Random(7)
    words = ["see ", KEY, OTHER, "s", "sk-", "\n", "https://u:pw@host/x ", "x", "//a:b@c ", " sk-abcdefghijklmnopqrst "]
    for _ in range(2000):
        text = "".join(rng.choice(words) for _ in range(8))
        stream = MaskedStream([KEY, OTHER])
        shown, position = "", 0
        while position < len(text):
            size = rng.randint(1, 12)
            shown += stream.feed(text[position : position + size])
            position += size
            assert not _leaks(shown) and "pw@" not in shown and "a:b@" not in shown and "efghijklmnop" not in shown
        shown += stream.flush()
        assert shown == mask(text, [KEY, OTHER])  # in the end, exactly what masking the whole text gives


def test_a_run_of_a_key_is_masked_where_text_was_cut_to_length() -> None:
    assert mask(f"…{KEY[-14:]} (end)", [KEY]) == "…*** (end)"  # a rolling tail that starts inside the key
    assert mask(f"{KEY[:13]}… [truncated]", [KEY]) == "***… [truncated]"
    assert mask(f"{KEY[:8]} is public", [KEY]) == f"{KEY[:8]} is public"  # a few characters give nothing away


def test_partial_text_leaves_out_what_may_become_a_key() -> None:
    assert mask(f"token {KEY[:10]}", [KEY], partial=True) == "token "
    assert mask(f"token {KEY} and more!", [KEY], partial=True) == "token *** and more!"
    assert mask("the end is live", [KEY], partial=True) == "the end is "  # "live" is a piece of the key: it waits
    assert mask("an ordinary sentence.", [KEY], partial=True) == "an ordinary sentence."


def test_streamed_text_reaches_the_stream_output_with_no_piece_of_a_key_and_the_rest_when_done() -> None:
    """Pieces are masked as they enter the view model (``TextBlock``); the stream output sends what it holds."""
    log: list[dict[str, Any]] = []

    class Widget:
        msg_id = ""

    output = StreamOutput(Widget(), OutputRouter(RecordingSender(log)))
    block = TextBlock("text")
    drawn = 0

    def draw() -> None:  # as the live view drains a text block
        nonlocal drawn
        output.append(block.text[drawn:])
        drawn = block.buffer.length

    for piece in ["Your key is ", KEY[:5], KEY[5:17], KEY[17:], " ok. Bye s"]:
        block.append(piece)
        draw()
    sent_before_done = "".join(m["content"]["text"] for m in log if m["header"]["msg_type"] == "stream")
    assert sent_before_done == "Your key is *** ok. Bye "  # the lone "s" might start a key: held back
    block.settle(None)
    draw()
    output.done()
    sent = "".join(m["content"]["text"] for m in log if m["header"]["msg_type"] == "stream")
    assert sent == "Your key is *** ok. Bye s"


def test_html_widgets_hold_and_send_only_masked_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """The views set widget values drawn from the view model, masked as text entered it."""
    log: list[dict[str, Any]] = []
    install_recording_comms(monkeypatch, log)
    kit = WidgetKit()
    widget = kit.html(notice_html(NoticeBlock("error", f"<b>{KEY}</b>")))
    assert "&lt;b&gt;***&lt;/b&gt;" in widget.value
    widget.value = notice_html(NoticeBlock("error", f"{OTHER} https://me:hunter2@example.com"))
    assert "*** https://***@example.com" in widget.value
    sent = json.dumps(log)
    assert not _leaks(sent) and "hunter2" not in sent
    kit.close_all()


def test_highlighted_code_and_results_are_masked_before_highlighting() -> None:
    block = ToolCallBlock(id="c1", name="bash", arguments={"command": f"curl -H 'Authorization: Bearer {KEY}' x"})
    block.status = "pending"
    html = call_html(block)
    assert "<span" in html and not _leaks(html) and "***" in html
    block.status = "streaming"
    block.arguments = {"command": f"export OPENAI_API_KEY={KEY[:14]}"}
    live = call_html(block)
    assert not _leaks(live) and "export" in live
    block.status = "done"
    block.result = AgentToolResult(
        [TextContent(f"printed {KEY}")], {"outputs": [{"output_type": "stream", "text": OTHER}]}
    )
    assert not _leaks(result_html(block))


def test_the_approval_editor_shows_masked_arguments_and_keeps_the_masked_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_recording_comms(monkeypatch, [])
    kit = WidgetKit()
    decisions: list[ApprovalDecision] = []
    request = ApprovalRequest("c1", "deploy", {"token": KEY, "target": "staging"})
    panel = ApprovalPanel(kit, ShownRequest(request), lambda decision: decisions.append(decision) or True)
    panel.edit.click()
    assert not _leaks(panel.editor.value) and "***" in panel.editor.value
    panel.editor.value = panel.editor.value.replace("staging", "production")
    panel.approve.click()
    assert decisions[0].args == {"token": KEY, "target": "production"}  # the key is not turned into ***
    kit.close_all()


def test_a_stream_that_starts_inside_a_key_still_masks_its_run() -> None:
    """A rolling tail (bash keeps the last 50 KB) may begin in the middle of a key: its rest is held back
    while it grows, then masked, however small the pieces (as it enters the view model's live output)."""
    log: list[dict[str, Any]] = []

    class Widget:
        msg_id = ""

    output = StreamOutput(Widget(), OutputRouter(RecordingSender(log)))
    block = ToolCallBlock(id="c1", name="bash", status="running")
    text = f"key tail: {KEY[-20:]}\n"
    for end in range(4, len(text) + 4, 4):
        block.set_output(text[:end])  # the whole output so far, as the tool reports it
        output.sync(block.output)  # as a tool card passes it
    output.done()
    shown = "".join(m["content"]["text"] for m in log if m["header"]["msg_type"] == "stream")
    assert shown == "key tail: ***\n"


def test_keys_of_mappings_and_odd_urls_are_masked() -> None:
    assert mask({"headers": {f"Bearer {KEY}": "x"}}, [KEY]) == {"headers": {"Bearer ***": "x"}}
    assert mask("redis://:hunter2-secret@cache:6379/0") == "redis://***@cache:6379/0"  # no user name
    assert mask("postgres://me:p@ss@db/x") == "postgres://***@db/x"  # an @ inside the password


def test_markdown_escaping_comes_after_masking(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-AbCdEf_GhIjKlMn_OpQrStUv_WxYz0123456789"  # real OpenAI keys hold underscores
    monkeypatch.setenv("OPENAI_API_KEY", key)
    state = TurnState(model="m")
    state.blocks.append(NoticeBlock("error", f"401: Incorrect API key provided: {key}"))
    state.finish()
    output = render_static(state)
    for text in (*output.data.values(), json.dumps(output.metadata)):
        assert not [key[i : i + 12] for i in range(len(key) - 11) if key[i : i + 12] in text.replace("\\", "")]


def test_saved_sessions_mask_keys_in_argument_names(tmp_path: Any) -> None:
    call = ToolCall(id="c1", name="http", arguments={"headers": {f"Bearer {KEY}": "x"}})
    path = save_conversation(tmp_path / "chat.jsonl", [AssistantMessage(content=[call], stop_reason="tool_use")])
    assert not _leaks(path.read_text())


def test_the_approval_editor_restores_a_masked_argument_name(monkeypatch: pytest.MonkeyPatch) -> None:
    install_recording_comms(monkeypatch, [])
    kit = WidgetKit()
    decisions: list[ApprovalDecision] = []
    request = ApprovalRequest("c1", "http", {"headers": {f"Bearer {KEY}": "x"}, "url": "https://a.example"})
    panel = ApprovalPanel(kit, ShownRequest(request), lambda decision: decisions.append(decision) or True)
    panel.edit.click()
    assert not _leaks(panel.editor.value)
    panel.editor.value = panel.editor.value.replace("a.example", "b.example")
    panel.approve.click()
    assert decisions[0].args == {"headers": {f"Bearer {KEY}": "x"}, "url": "https://b.example"}
    kit.close_all()


def test_a_run_of_the_key_that_ends_where_another_reading_begins_is_not_shown_in_two_parts() -> None:
    """``test-SECRET-`` is a run of the key, and its last ``-`` also begins ``-t`` (another place in the key):
    held back on that reading alone, the run would go out as ``test-SECRET`` and then ``-tx``."""
    key = "sk-test-SECRET-0123456789abcdef"
    for text in ("A test-SECRET-tx", "A k-test-SECRECx"):
        for size in (1, 2, 3):
            stream = MaskedStream([key])
            shown = "".join(stream.feed(text[i : i + size]) for i in range(0, len(text), size))
            shown += stream.flush()
            assert not [key[i : i + 12] for i in range(len(key) - 11) if key[i : i + 12] in shown], (size, shown)


def test_masking_keeps_odd_mapping_keys_and_compact_json() -> None:
    assert mask({(1, 2): "cell"}, [KEY]) == {(1, 2): "cell"}  # a tuple key stays a (hashable) tuple
    text = '{"url":"http://localhost:8000","owner":"bob@example.com"}'
    assert mask(text) == text  # no credentials here: nothing swallowed up to the e-mail's @
