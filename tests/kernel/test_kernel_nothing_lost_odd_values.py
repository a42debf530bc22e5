"""Issue 11 point 2 (review r11b), through the real kernel: more members of the "nothing lost" classes.

- a saved conversation whose text holds U+2028/U+2029/U+0085 loads back;
- a tool result whose ``details`` hold objects JSON cannot (a lock) can be saved;
- a tool whose description is not valid Unicode (a lone surrogate) does not break every turn;
- ``%pi compact`` keeps the conversation it replaces for ``%pi undo``; a failed one changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, HTTPError, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, setup_kernel

pytestmark = pytest.mark.kernel

SETUP = '''
import threading
from pi_kernel import tool
from pi_kernel.agent import AgentToolResult
from pi_kernel.ai import TextContent

@tool
def open_handle() -> AgentToolResult:
    """Open a handle (its details keep a live object for the UI; the model never sees details)."""
    return AgentToolResult([TextContent("opened")], details={"handle": threading.Lock(), ("a", 1): "tuple key"})
'''


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with setup_kernel(server.base_url, pi_jupyter_path, SETUP) as driver:
        yield driver


def message_count(kernel: KernelDriver) -> int:
    text = kernel.run("%pi").text
    return int(text.split("messages:")[1].split()[0])


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_saved_conversation_with_a_line_separator_in_its_text_loads_back(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path, separator: str
) -> None:
    """``json.dumps(ensure_ascii=False)`` writes U+2028/U+2029/U+0085 raw; the loader must not cut a record there."""
    kernel.run("%pi reset")
    server.enqueue(text_chunks(f"first{separator}second"))
    assert kernel.run(f"%%pi\nSay two lines{separator}please", cell_id="sep").status == "ok"
    path = tmp_path / "sep.jsonl"
    assert "Saved 2 messages" in kernel.run(f"%pi save {path}").text
    loaded = kernel.run(f"%pi load {path}")
    assert loaded.status == "ok" and "Loaded 2 messages" in loaded.text, loaded.text


def test_tool_result_details_that_are_not_json_do_not_break_save(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    """A lock in ``details`` made ``dataclasses.asdict`` (a deepcopy) fail in every later ``%pi save``."""
    kernel.run("%pi reset")
    server.enqueue(tool_call_chunks([("open_handle", {})]), text_chunks("Opened."))
    result = kernel.run("%%pi\nOpen a handle", cell_id="handle")
    assert result.status == "ok", result.text
    saved = kernel.run(f"%pi save {tmp_path / 'handle.jsonl'}")
    assert saved.status == "ok" and "Saved 4 messages" in saved.text, saved.text
    loaded = kernel.run(f"%pi load {tmp_path / 'handle.jsonl'}")
    assert loaded.status == "ok" and "Loaded 4 messages" in loaded.text, loaded.text


def test_a_tool_description_that_is_not_valid_unicode_does_not_break_every_turn(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    """A lone surrogate in a docstring went into every request's ``tools`` and system prompt: the client
    could not encode the body, so every later turn failed. It becomes U+FFFD where the tool is defined."""
    defined = kernel.run('@tool\ndef odd() -> str:\n    "Odd \\ud800 tool."\n    return "x"\n')
    try:
        assert defined.status == "ok", defined.text
        kernel.run("%pi reset")
        server.enqueue(text_chunks("Hello."))
        turn = kernel.run("%%pi\nhi", cell_id="odd")
        assert turn.status == "ok", turn.text
        tools = server.chat_requests[-1].body["tools"]
        assert any(entry["function"]["description"].startswith("Odd \ufffd tool") for entry in tools), tools
    finally:
        kernel.run("from pi_kernel.kernel.session import get_session\nget_session().registry.remove('odd')")


def three_turns(kernel: KernelDriver, server: FakeOpenAI, prefix: str) -> None:
    kernel.run("%pi reset")
    for number, text in enumerate(("one", "two", "three")):
        server.enqueue(text_chunks(f"ok {text}"))
        assert kernel.run(f"%%pi\n{text}", cell_id=f"{prefix}{number}").status == "ok"
    assert message_count(kernel) == 6


def test_pi_compact_can_be_undone(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """Whatever drops messages keeps the conversation it replaces (docs/conversation.md)."""
    three_turns(kernel, server, "c")
    server.enqueue(text_chunks("Summary: the user said one, two."))
    compacted = kernel.run("%pi compact")
    assert compacted.status == "ok" and "compacted" in compacted.text, compacted.text
    assert message_count(kernel) < 6
    kernel.run("%pi undo")
    assert message_count(kernel) == 6, kernel.run("%pi undo list").text
    assert "[assistant] ok one" in kernel.run("%pi history").text


def test_a_failed_pi_compact_leaves_the_conversation_as_it_was(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """When the summary request fails, ``%pi compact`` replaces nothing (no bare list of prompts stands in)."""
    three_turns(kernel, server, "f")
    server.enqueue(HTTPError(400, message="Bad request"))
    failed = kernel.run("%pi compact")
    assert "Not compacted" in failed.text and "unchanged" in failed.text, failed.text
    assert message_count(kernel) == 6
    assert "[assistant] ok one" in kernel.run("%pi history").text
