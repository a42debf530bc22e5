"""Issue 13, points 1 and 2: a long turn in the plain-text view stays linear, and an interrupt ends it at once.

The live display shows the recent part of the turn (its size does not grow
with the turn); the final output holds every call. Argument previews never
serialize the whole value. Timing targets live in
``benchmarks/view_scaling.py``; these tests assert sizes and behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import Chunks, FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import (
    FAKE_KEY,
    KernelDriver,
    approval_comm,
    assert_one_result_per_call,
    conversation_tool_calls,
    kernel_env,
)

from pi_kernel.kernel.text_view import preview_json
from pi_kernel.widgets.turn_state import TextBuffer, ToolCallBlock

SETUP = '''
import asyncio
from pi_kernel import tool

@tool
def noop(n: int) -> int:
    """Return n."""
    return n

@tool(approval="ask")
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

@tool
async def hang(n: int) -> int:
    """Wait a minute."""
    await asyncio.sleep(60)
    return n
'''


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_WIDGETS="0")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
        yield driver


def live_updates(result: Any) -> list[str]:
    return [m["content"]["data"]["text/plain"] for m in result.messages if m["msg_type"] == "update_display_data"]


@pytest.mark.kernel
def test_live_text_of_a_long_turn_shows_its_recent_part_and_the_final_output_all(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    kernel.run("%pi reset")
    calls = 400
    server.enqueue(
        tool_call_chunks([("noop", {"n": n}) for n in range(calls)]),
        Chunks(text_chunks("done " * 2000, parts=200), delay=0.002),  # a 10 KB answer streamed after them
    )
    result = kernel.run("%%pi --approve auto\nGo", timeout=120)
    assert result.status == "ok", result.text[-2000:]
    updates = live_updates(result)
    assert updates, "the turn was shown live"
    assert max(len(text) for text in updates) < 8000  # the whole turn would be > 20 KB
    assert any("earlier item(s) of this turn" in text for text in updates)
    final = [m for m in result.messages if m["msg_type"] == "display_data"][-1]["content"]["data"]["text/plain"]
    assert all(f'"n": {n}' in final for n in range(calls))  # every call is in the final output
    assert final.count("done") >= 2000


@pytest.mark.kernel
def test_a_call_waiting_for_approval_stays_in_the_live_text_when_older_than_its_window(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    kernel.run("%pi reset")
    server.enqueue(
        tool_call_chunks([("add", {"a": 2, "b": 3})] + [("noop", {"n": n}) for n in range(40)]), text_chunks("5.")
    )
    state: dict[str, Any] = {"seen": False, "answered": False, "start": time.monotonic()}
    with approval_comm(kernel) as comm_id:

        def approve() -> None:
            if not state["answered"]:
                state["answered"] = True
                kernel.comm_send(comm_id, {"action": "resolve", "tool_call_id": "call_0", "decision": "approve"})

        def on_iopub(message: dict[str, Any]) -> None:
            text = message["content"].get("data", {}).get("text/plain", "")
            if message["msg_type"] == "update_display_data" and "earlier item(s)" in text:
                if "waiting for approval (call_0)" in text and "%pi allow call_0" in text:
                    state["seen"] = True
                    approve()

        def on_poll() -> None:
            if time.monotonic() - state["start"] > 10:
                approve()  # never shown: answer anyway so the turn ends, and fail below

        result = kernel.run("%%pi\nAdd, then many noops", on_iopub=on_iopub, on_poll=on_poll, timeout=60)
    assert result.status == "ok", result.text[-2000:]
    assert state["seen"], "the waiting call scrolled out of the live text"


@pytest.mark.kernel
def test_interrupt_ends_a_turn_of_2000_tool_calls_within_seconds(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    calls = 2000
    server.enqueue(tool_call_chunks([("hang", {"n": n}) for n in range(calls)]))
    seen: dict[str, float] = {}

    def on_iopub(message: dict[str, Any]) -> None:
        if "at" in seen or message["msg_type"] != "update_display_data":
            return
        if "▶ hang" in message["content"]["data"].get("text/plain", ""):
            seen["at"] = time.monotonic()
            kernel.interrupt()

    result = kernel.run("%%pi --approve auto\nWait a lot", on_iopub=on_iopub, timeout=300)
    ended = time.monotonic()
    assert "at" in seen, result.text[-2000:]
    assert result.reply["ename"] == "PiInterrupted", result.text[-2000:]
    assert ended - seen["at"] < 5  # ABORT_GRACE (1 s) and the cleanup grace (1 s), plus the final output
    assert conversation_tool_calls(kernel) == calls
    server.enqueue(text_chunks("Still here."))
    after = kernel.run("%%pi\nStill there?")
    assert after.status == "ok" and "Still here." in after.text
    assert_one_result_per_call(server.last_body["messages"], expected_calls=calls)


def test_argument_preview_is_bounded_whatever_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    deep: Any = "bottom"
    for _ in range(100_000):  # json.dumps would raise RecursionError
        deep = [deep]
    assert preview_json(deep, 300).startswith("[[[[")
    huge = {"path": "x.py", "content": "x" * 5_000_000}
    text = preview_json(huge, 300)
    assert len(text) == 300 and text.startswith('{"path": "x.py", "content": "xxx') and text.endswith("…")
    # A key that straddles the cut is masked before the cut (as it enters the view model), so no part of it shows.
    straddling = ToolCallBlock(id="c1", name="write", arguments={"content": "y" * 260 + FAKE_KEY}, status="pending")
    assert FAKE_KEY[:12] not in preview_json(straddling.shown_arguments(), 300)
    # While streaming, the end of a string may be the start of a key: held back.
    streaming = ToolCallBlock(id="c2", name="write", arguments={"content": "z" + FAKE_KEY[:10]})
    assert FAKE_KEY[:10] not in preview_json(streaming.shown_arguments(), 300)


def test_text_buffer_tail_does_not_join_the_whole_text() -> None:
    buffer = TextBuffer()
    for n in range(10_000):
        buffer.append(f"{n},")
    assert buffer.tail(6) == ",9999,"
    assert buffer._joined is None  # nothing joined the 10,000 pieces
    assert buffer.text.endswith(buffer.tail(50))


def test_widget_view_of_a_long_turn_draws_its_recent_part_and_keeps_a_waiting_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from test_widgets_frontend import WidgetHarness

    from pi_kernel.agent.types import AgentStartEvent, AgentToolResult, ToolExecutionEndEvent, ToolExecutionStartEvent
    from pi_kernel.ai import TextContent
    from pi_kernel.tools.approval import ApprovalRequest
    from pi_kernel.widgets.turn_view import LIVE_BLOCKS

    harness = WidgetHarness(monkeypatch)
    harness.feed(AgentStartEvent(), ToolExecutionStartEvent("c0", "add", {"a": 1, "b": 2}))
    harness.view.handle_approval("requested", ApprovalRequest("c0", "add", {"a": 1, "b": 2}))
    calls = 300
    for n in range(1, calls):
        harness.feed(ToolExecutionStartEvent(f"c{n}", "noop", {"n": n}), step=0.01)
        harness.feed(ToolExecutionEndEvent(f"c{n}", "noop", AgentToolResult([TextContent(str(n))]), False), step=0.01)
    harness.settle()
    children = harness.widget_state(harness.view.widget)["children"]
    assert len(children) <= LIVE_BLOCKS + 3  # the earlier-items line, the waiting call, the window, the footer
    assert harness.view.card("c0") is not None  # still waiting: its buttons stay on screen
    assert harness.view.card("c1") is None and harness.view.card(f"c{calls - 1}") is not None
    static = harness.view.finish()
    assert all(f'"n": {n}' in static.data["text/plain"] for n in range(1, calls))


def test_secrets_read_once_answers_from_one_reading_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from pi_kernel.ai.secrets import mask, secret_values, secrets_read_once

    monkeypatch.setenv("VIEWS_TEST_API_KEY", "first-secret-value")
    with secrets_read_once():
        monkeypatch.setenv("VIEWS_TEST_API_KEY", "second-secret-value")
        assert "first-secret-value" in secret_values()
        assert mask("first-secret-value") == "***"
    assert "second-secret-value" in secret_values()


def test_widget_preview_of_streaming_arguments_is_made_from_their_cut_end() -> None:
    from pi_kernel.widgets.render import call_html
    from pi_kernel.widgets.turn_state import LIVE_STRING_KEEP, ToolCallBlock, live_tail

    deep: Any = "bottom"
    for _ in range(100_000):  # json.dumps inside the preview would raise RecursionError
        deep = [deep]
    assert str(live_tail(deep)).count("[") <= 30
    huge = {"path": "x.txt", "content": "a" * 5_000_000 + "THE-END"}
    cut = live_tail(huge)
    assert len(cut["content"]) == LIVE_STRING_KEEP + 1 and cut["content"].endswith("THE-END")
    block = ToolCallBlock(id="c1", name="write", arguments=huge, status="streaming")
    html = call_html(block)
    assert "THE-END" in html and len(html) < 20_000
