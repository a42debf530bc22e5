"""The static rendering of a finished turn: HTML, markdown, plain text and metadata, never a secret."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from scripted_model import assistant_message, tool_call, tool_call_message
from test_widgets_frontend import message_events

from pi_kernel.agent.types import (
    AgentEndEvent,
    AgentStartEvent,
    AgentToolResult,
    MessageEndEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
)
from pi_kernel.ai import TextContent, ThinkingContent, Usage
from pi_kernel.ai.secrets import mask
from pi_kernel.tools.approval import ApprovalDecision, ApprovalRequest
from pi_kernel.widgets.render import METADATA_RESULT_CHARS, render_static
from pi_kernel.widgets.turn_state import TurnState

SECRET = "sk-proj-SECRETSECRETSECRET0123456789"


def _as_gpt(events: list) -> list:
    """The scripted model names itself "scripted"; these answers come from gpt-4o-mini."""
    for event in events:
        event.message.model, event.message.provider = "gpt-4o-mini", "openai"
    return events


async def _turn(*, answer: str = "Done: **2** files.", result: str = "a.txt\nb.txt\n") -> TurnState:
    state = TurnState(model="gpt-4o-mini", provider="openai")
    state.apply(AgentStartEvent())
    first = tool_call_message(tool_call("bash", {"command": "ls ```"}, id="c1"), text="Listing.")
    first.usage = Usage(input=40, output=20, cache_read=60, total_tokens=120, cost=0.001)  # a 100-token prompt
    for event in _as_gpt(await message_events(first)):
        state.apply(event)
    state.apply(ToolExecutionStartEvent("c1", "bash", {"command": "ls ```"}))
    state.apply_approval("requested", ApprovalRequest("c1", "bash", {"command": "ls"}))
    state.apply_approval("resolved", ApprovalRequest("c1", "bash", {}, decision=ApprovalDecision("approve")))
    state.apply(ToolExecutionEndEvent("c1", "bash", AgentToolResult([TextContent(result)]), False))
    second = assistant_message(ThinkingContent("Two files."), answer)
    second.usage = Usage(input=150, output=10, total_tokens=160, cost=0.002)
    for event in _as_gpt(await message_events(second)):
        state.apply(event)
    state.apply(AgentEndEvent([]))
    return state


async def test_static_bundle_has_html_markdown_and_plain_text_of_the_whole_turn() -> None:
    static = render_static(await _turn())
    html, markdown, plain = (static.data[key] for key in ("text/html", "text/markdown", "text/plain"))
    assert "<strong>2</strong>" in html and "Listing." in html and "a.txt" in html and "Thinking" in html
    assert "<details" in html and "approved" in html and "done" in html
    assert "Done: **2** files." in markdown and "`bash`" in markdown and "> Two files." in markdown
    assert "````bash\nls ```\n````" in markdown  # a fence longer than any backtick run inside
    assert plain.startswith("Listing.") and "── bash (bash) · done" in plain and "  a.txt" in plain
    assert "Done: **2** files." in plain
    for text in (html, markdown, plain):  # "in" is the whole prompt: 40 uncached + 60 cached + 150
        assert "250 in (60 cached)" in text and "30 out" in text and "$0.0030" in text and "gpt-4o-mini" in text


async def test_a_short_finished_call_stays_open_and_a_long_one_folds_to_its_header() -> None:
    short = render_static(await _turn()).data["text/html"]
    assert short.count("<details open") == 1  # the bash card: its command and its two-line result show
    long = render_static(await _turn(result="".join(f"file{n}.txt\n" for n in range(200)))).data["text/html"]
    assert "<details open" not in long and "file199.txt" in long  # folded, the result still inside


async def test_static_html_is_self_contained_and_escapes_the_model() -> None:
    answer = (
        "Look: <script>alert(1)</script> <img src=x onerror=alert(2)> [x](javascript:alert(3))\n\n```python\nx = 1\n```"
    )
    html = render_static(await _turn(answer=answer)).data["text/html"]
    assert "<script" not in html and "onerror=alert" not in html.replace("onerror=alert(2)&gt;", "")
    assert "javascript:" not in html
    assert "&lt;script&gt;" in html
    assert not re.search(r"<(link|iframe|object|embed)\b", html)
    assert not re.search(r'\bsrc="(?!data:)', html)  # no external resource
    assert 'class="' not in html  # inline styles only: no stylesheet needed anywhere
    assert "<span style=" in html  # the code block is highlighted inline


async def test_metadata_holds_the_structured_turn_and_is_json() -> None:
    state = await _turn(result="x" * (METADATA_RESULT_CHARS + 500))
    meta = render_static(state).metadata["pi_kernel"]
    json.dumps(meta)
    assert meta["model"] == "gpt-4o-mini" and meta["provider"] == "openai"
    assert meta["usage"]["input"] == 190 and meta["usage"]["cache_read"] == 60  # input: the uncached part
    assert meta["usage"]["cost"] == pytest.approx(0.003)
    [call] = meta["tool_calls"]
    assert call["name"] == "bash" and call["arguments"] == {"command": "ls ```"} and call["status"] == "done"
    assert call["decision"]["kind"] == "approve" and call["decision"]["source"] == "user"
    assert len(call["result"]["text"]) < METADATA_RESULT_CHARS + 100 and "earlier characters" in call["result"]["text"]


async def test_no_secret_reaches_the_output_or_its_metadata(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789abcdef")
    state = TurnState(model="m")
    state.apply(AgentStartEvent())
    args = {"url": "https://alice:hunter2pass@example.com/v1", "key": SECRET, "t": "tok-0123456789abcdef"}
    state.apply(ToolExecutionStartEvent("c1", "fetch", args))
    text = f"used key {SECRET} at https://bob:pw12345@host/x and sk-ABCDEFGHIJKLMNOPQRSTU"
    state.apply(ToolExecutionEndEvent("c1", "fetch", AgentToolResult([TextContent(text)]), False))
    message = assistant_message(f"The key is {SECRET}.")
    state.apply(MessageEndEvent(message))
    state.apply(AgentEndEvent([]))
    static = render_static(state)
    everything = json.dumps(static.data) + json.dumps(static.metadata)
    for secret in (SECRET, "tok-0123456789abcdef", "hunter2pass", "pw12345", "sk-ABCDEFGHIJKLMNOPQRSTU"):
        assert secret not in everything
    assert "example.com" in everything  # the rest of the text is kept


def test_scrub_keeps_ordinary_text() -> None:
    assert mask("see https://example.com/a?b=c and skip-this") == "see https://example.com/a?b=c and skip-this"


def test_static_rendering_does_not_import_ipywidgets() -> None:
    code = (
        "import sys; import pi_kernel.widgets.render, pi_kernel.widgets.turn_state; "
        "assert 'ipywidgets' not in sys.modules, 'ipywidgets imported'"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


async def test_a_saved_turn_converts_with_nbconvert() -> None:
    nbconvert = pytest.importorskip("nbconvert")
    nbformat = pytest.importorskip("nbformat")
    static = render_static(await _turn(answer="The answer is **forty-two**."))
    output = nbformat.v4.new_output("display_data", data=static.data, metadata=static.metadata)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("%%pi\nWhat is it?", outputs=[output])])
    nbformat.validate(notebook)
    html, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
    assert "<strong>forty-two</strong>" in html and "model not found" not in html.lower()
    markdown, _ = nbconvert.MarkdownExporter().from_notebook_node(notebook)
    assert "forty-two" in markdown
