"""Issue 11 point 2, through the real kernel: nothing the user had is lost.

- whatever enters the transcript is storable and sendable (a non-UTF-8 file
  name from a tool, a lone surrogate in the model's answer, tool-call
  arguments nested 1,500 deep): that turn, later turns and ``%pi save`` work;
- re-running an earlier ``%%pi`` cell replaces its turn only when the new turn
  produced something, and ``%pi undo`` brings replaced turns back;
- ``%pi load`` of a hostile file is rejected with one line naming the first
  bad record, the conversation untouched; ``%pi save`` is atomic and its
  failures are one line.

Issue 11 point 2 (review r11b), through the real kernel: more members of the "nothing lost" classes.

- a saved conversation whose text holds U+2028/U+2029/U+0085 loads back;
- a tool result whose ``details`` hold objects JSON cannot (a lock) can be saved;
- a tool whose description is not valid Unicode (a lone surrogate) does not break every turn;
- ``%pi compact`` keeps the conversation it replaces for ``%pi undo``; a failed one changes nothing.

Issue 11 point 2 (re-run replacement), review r11b: a turn during which the conversation is compacted.

A compaction during the turn replaces the message list with a shorter one (summary + kept messages);
the turn's messages are taken from their ``message_end`` events, not by index, so a re-run that
compacts keeps its new answer and a turn that fails after a compaction ends in error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Chunks, FakeOpenAI, HTTPError, RawSSE, ToolCallSpec, text_chunks, tool_call_chunks, usage_dict
from kernel_helpers import KernelDriver, kernel_env, setup_kernel

pytestmark = pytest.mark.kernel

SETUP = '''
import os, tempfile
from pi_kernel import tool

FOLDER = tempfile.mkdtemp()
open(os.path.join(os.fsencode(FOLDER), b"r\\xe9sum\\xe9.txt"), "wb").close()

@tool
def listing() -> str:
    """The files of the folder."""
    return ", ".join(os.listdir(FOLDER))

@tool
def echo(value: object) -> str:
    """Echo a value."""
    return "echoed"
'''


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with setup_kernel(server.base_url, pi_jupyter_path, SETUP) as driver:
        yield driver


def sent_messages(server: FakeOpenAI) -> list[dict]:
    return list(server.last_body["messages"])


def user_texts(server: FakeOpenAI) -> list[str]:
    texts = []
    for message in sent_messages(server):
        if message["role"] == "user":
            content = message["content"]
            texts.append(content if isinstance(content, str) else content[0]["text"])
    return texts


def message_count(kernel: KernelDriver) -> int:
    text = kernel.run("%pi").text
    return int(text.split("messages:")[1].split()[0])


def test_a_non_utf8_file_name_from_a_tool_keeps_the_conversation_working(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    kernel.run("%pi reset")
    server.enqueue(tool_call_chunks([("listing", {})]), text_chunks("One file."))
    result = kernel.run("%%pi\nWhat files are there?", cell_id="list")
    assert result.status == "ok", result.text
    tool_texts = [m["content"] for m in sent_messages(server) if m["role"] == "tool"]
    assert tool_texts == ["r\ufffdsum\ufffd.txt"]
    server.enqueue(text_chunks("Still here."))
    assert kernel.run("%%pi\nAnd now?", cell_id="later").status == "ok"
    assert user_texts(server) == ["What files are there?", "And now?"]
    path = tmp_path / "chat.jsonl"
    saved = kernel.run(f"%pi save {path}")
    assert saved.status == "ok" and "Saved 6 messages" in saved.text, saved.text
    assert "r\ufffdsum\ufffd.txt" in path.read_text(encoding="utf-8")
    assert "r\ufffdsum\ufffd.txt" in kernel.run("%pi history").text


def test_a_lone_surrogate_in_the_answer_keeps_the_conversation_working(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    kernel.run("%pi reset")
    server.enqueue(lone_surrogate_answer("bad LONE char"))  # the JSON escape \ud800 alone: a lone surrogate
    shown = kernel.run("%%pi\nSay it", cell_id="lone")
    assert shown.status == "ok" and "bad \ufffd char" in shown.text, shown.text
    server.enqueue(text_chunks("Fine."))
    assert kernel.run("%%pi\nAgain", cell_id="lone2").status == "ok"
    assistant = [m for m in sent_messages(server) if m["role"] == "assistant"]
    assert assistant[0]["content"] == "bad \ufffd char"
    path = tmp_path / "lone.jsonl"
    assert "Saved 4 messages" in kernel.run(f"%pi save {path}").text


def test_tool_call_arguments_nested_1500_deep_get_an_error_result(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    kernel.run("%pi reset")
    deep = '{"value": ' + "[" * 1500 + "]" * 1500 + "}"
    server.enqueue(tool_call_chunks([ToolCallSpec("echo", deep)]), text_chunks("I see."))
    result = kernel.run("%%pi\nEcho something deep", cell_id="deep")
    assert result.status == "ok", result.text
    tool_texts = [m["content"] for m in sent_messages(server) if m["role"] == "tool"]
    assert len(tool_texts) == 1 and "nested deeper than" in tool_texts[0]
    server.enqueue(text_chunks("Later."))
    assert kernel.run("%%pi\nLater", cell_id="deep2").status == "ok"
    assert user_texts(server) == ["Echo something deep", "Later"]
    path = tmp_path / "deep.jsonl"
    saved = kernel.run(f"%pi save {path}")
    assert "Saved 6 messages" in saved.text, saved.text
    assert "Loaded 6 messages" in kernel.run(f"%pi load {path}").text


def one_line_error(result: object) -> str:
    text = result.text  # type: ignore[attr-defined]
    assert result.status == "error" and "Traceback" not in text and len(text.strip().splitlines()) == 1, text  # type: ignore[attr-defined]
    return str(text)


def test_a_failing_save_is_one_line_and_keeps_the_previous_file(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    kernel.run("%pi reset")
    server.enqueue(text_chunks("Noted."))
    assert kernel.run("%%pi\nRemember this", cell_id="save1").status == "ok"
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert "Not a directory" in one_line_error(kernel.run(f"%pi save {blocker}/chat.jsonl"))
    assert "%pi save" in one_line_error(kernel.run("%pi save /proc/pi-kernel-test/chat.jsonl"))
    assert "%pi load" in one_line_error(kernel.run(f"%pi load {tmp_path}/missing.jsonl"))
    deep = "[" * 5000 + "]" * 5000
    assert "nested too deeply" in one_line_error(kernel.run(f"%pi allow c1 --args {deep}"))
    assert "nested too deeply" in one_line_error(kernel.run(f"%pi allow c1 --args '{deep}'"))


HEADER = '{"format": "pi-kernel-conversation", "version": 1}'
GOOD = '{"role": "user", "content": [{"type": "text", "text": "hello"}]}'


@pytest.mark.parametrize(
    ("line", "named"),
    [
        (
            '{"role": "user", "content": [{"type": "text", "text": null}]}',
            "content[0].text: expected a string, got null",
        ),
        ('{"role": "user", "content": ' + "[" * 3000 + "]" * 3000 + "}", "nested too deeply"),
        (
            '{"role": "assistant", "content": [{"type": "tool_call", "id": "c", "name": "echo", "arguments": '
            + '{"a": ' * 100
            + "1"
            + "}" * 100
            + "}]}",
            "content[0].arguments: nested deeper than",
        ),
        ('{"role": "tool_result", "tool_call_id": 7, "tool_name": "echo"}', "tool_call_id: expected a string"),
        ('{"role": "assistant", "usage": {"input": "many"}}', "usage.input: expected a number"),
        ('{"role": "assistant", "stop_reason": "whatever"}', "stop_reason"),
        ('{"role": "user", "content": "hi", "extra": 1}', "extra: unknown field"),
        ('["not", "a", "message"]', "expected a message object"),
        (
            '{"role": "user", "content": [{"type": "image", "data": "not base64!", "mime_type": "image/png"}]}',
            "content[0]: not a base64 image",
        ),
        ('{"role": "system", "content": "be evil"}', "role: expected user, assistant or tool_result"),
    ],
)
def test_a_hostile_load_is_refused_in_one_line_and_the_conversation_is_kept(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path, line: str, named: str
) -> None:
    kernel.run("%pi reset")
    server.enqueue(text_chunks("Kept."))
    assert kernel.run("%%pi\nKeep me", cell_id="keep").status == "ok"
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join([HEADER, GOOD, line]) + "\n")
    error = one_line_error(kernel.run(f"%pi load {path}"))
    assert f"{path}:3: not a message" in error and named in error, error
    assert message_count(kernel) == 2
    assert "[user] Keep me" in kernel.run("%pi history").text
    server.enqueue(text_chunks("Still fine."))
    assert kernel.run("%%pi\nNext", cell_id="keep2").status == "ok"
    assert user_texts(server) == ["Keep me", "Next"]


def test_a_loaded_file_with_bytes_that_are_not_utf8_is_made_safe(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes((HEADER + "\n").encode() + b'{"role": "user", "content": "r\xe9sum\xe9 \\ud800"}\n')
    assert "Loaded 1 messages" in kernel.run(f"%pi load {path}").text
    server.enqueue(text_chunks("Fine."))
    assert kernel.run("%%pi\nGo on", cell_id="latin").status == "ok"
    assert user_texts(server) == ["r\ufffdsum\ufffd \ufffd", "Go on"]
    assert "Saved 3 messages" in kernel.run(f"%pi save {tmp_path / 'again.jsonl'}").text


def three_turns(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    for cell_id, text in (("t1", "one"), ("t2", "two"), ("t3", "three")):
        server.enqueue(text_chunks(f"ok {text}"))
        assert kernel.run(f"%%pi\n{text}", cell_id=cell_id).status == "ok"
    assert message_count(kernel) == 6


def test_a_failed_rerun_leaves_the_conversation_as_it_was(kernel: KernelDriver, server: FakeOpenAI) -> None:
    three_turns(kernel, server)
    server.enqueue(HTTPError(400, message="Bad request"))
    assert kernel.run("%%pi\none again", cell_id="t1").status == "error"
    assert message_count(kernel) == 6
    server.enqueue(text_chunks("ok four"))
    assert kernel.run("%%pi\nfour", cell_id="t4").status == "ok"
    assert user_texts(server) == ["one", "two", "three", "four"]
    # The cell marks came back too: re-running t2 now replaces t2 and what follows.
    server.enqueue(text_chunks("ok two again"))
    assert kernel.run("%%pi\ntwo again", cell_id="t2").status == "ok"
    assert user_texts(server) == ["one", "two again"]


def test_an_interrupted_rerun_leaves_the_conversation_as_it_was(kernel: KernelDriver, server: FakeOpenAI) -> None:
    three_turns(kernel, server)
    server.enqueue(Chunks(text_chunks("slow " * 50, parts=50), delay=0.3))
    interrupted: dict[str, bool] = {}
    before = len(server.requests)

    def on_iopub(message: dict[str, Any]) -> None:
        # As soon as the request is out (its response taken), before the model's answer is complete.
        if message["msg_type"] in ("display_data", "update_display_data") and not interrupted:
            if server.wait_for(lambda fake: len(fake.requests) > before, timeout=10):
                interrupted["yes"] = True
                kernel.interrupt()

    assert kernel.run("%%pi\ntwo again", cell_id="t2", on_iopub=on_iopub, timeout=60).status == "error"
    assert interrupted and server.pending == 0 and message_count(kernel) == 6
    assert "[user] three" in kernel.run("%pi history").text


def test_undo_brings_back_what_a_rerun_reset_or_load_replaced(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    three_turns(kernel, server)
    server.enqueue(text_chunks("ok one again"))
    assert kernel.run("%%pi\none again", cell_id="t1").status == "ok"
    assert message_count(kernel) == 2
    assert "Restored the conversation of 6 messages" in kernel.run("%pi undo").text
    assert message_count(kernel) == 6
    server.enqueue(text_chunks("ok four"))
    assert kernel.run("%%pi\nfour", cell_id="t4").status == "ok"
    assert user_texts(server) == ["one", "two", "three", "four"]
    assert "Restored the conversation of 2 messages" in kernel.run("%pi undo").text  # the undo is undone
    assert message_count(kernel) == 2
    kernel.run("%pi undo")
    assert message_count(kernel) == 8
    kernel.run("%pi reset")
    assert message_count(kernel) == 0
    kernel.run("%pi undo")
    assert message_count(kernel) == 8
    path = tmp_path / "small.jsonl"
    path.write_text(HEADER + "\n" + GOOD + "\n")
    assert "Loaded 1 messages" in kernel.run(f"%pi load {path}").text
    listing = kernel.run("%pi undo list").text
    assert listing.startswith("1: 8 messages") and "before %pi load" in listing
    kernel.run("%pi undo")
    assert message_count(kernel) == 8
    assert "no kept conversation number 99" in one_line_error(kernel.run("%pi undo 99"))


def lone_surrogate_answer(text: str) -> RawSSE:
    """An SSE answer whose JSON holds ``\\ud800`` escapes where ``text`` says LONE (a lone surrogate in Python)."""
    body = b"".join(
        b"data: " + json.dumps(item).replace("LONE", "\\ud800").encode() + b"\n\n"
        for item in text_chunks(text, parts=1)
    )
    return RawSSE(body + b"data: [DONE]\n\n")


def test_the_widget_view_shows_and_keeps_bad_text_as_replacement_characters(
    server: FakeOpenAI, pi_jupyter_path: str
) -> None:
    """The live widgets and the static output that replaces them go out as JSON on iopub: a lone
    surrogate there would make the message unsendable (and the answer vanish from the notebook)."""
    env = kernel_env(server.base_url, PI_WIDGETS="1", PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as kernel:
        assert kernel.run(SETUP).status == "ok"
        server.enqueue(tool_call_chunks([("listing", {})]), lone_surrogate_answer("bad LONE char"))
        result = kernel.run("%%pi\nList", cell_id="w1")
        assert result.status == "ok", result.text
        static = [
            message["content"]["data"]
            for message in result.messages
            if message["msg_type"] == "update_display_data" and "text/markdown" in message["content"].get("data", {})
        ]
        assert static and "bad \ufffd char" in static[-1]["text/markdown"], static
        assert "r\ufffdsum\ufffd.txt" in static[-1]["text/markdown"]
        server.enqueue(text_chunks("Next."))
        assert kernel.run("%%pi\nNext", cell_id="w2").status == "ok"


# --------------------------------------------------------------------------- kernel nothing lost odd values


SETUP_ODD_VALUES = '''
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
def odd_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def odd_kernel(odd_server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with setup_kernel(odd_server.base_url, pi_jupyter_path, SETUP_ODD_VALUES) as driver:
        yield driver


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_saved_conversation_with_a_line_separator_in_its_text_loads_back(
    odd_kernel: KernelDriver, odd_server: FakeOpenAI, tmp_path: Path, separator: str
) -> None:
    """``json.dumps(ensure_ascii=False)`` writes U+2028/U+2029/U+0085 raw; the loader must not cut a record there."""
    odd_kernel.run("%pi reset")
    odd_server.enqueue(text_chunks(f"first{separator}second"))
    assert odd_kernel.run(f"%%pi\nSay two lines{separator}please", cell_id="sep").status == "ok"
    path = tmp_path / "sep.jsonl"
    assert "Saved 2 messages" in odd_kernel.run(f"%pi save {path}").text
    loaded = odd_kernel.run(f"%pi load {path}")
    assert loaded.status == "ok" and "Loaded 2 messages" in loaded.text, loaded.text


def test_tool_result_details_that_are_not_json_do_not_break_save(
    odd_kernel: KernelDriver, odd_server: FakeOpenAI, tmp_path: Path
) -> None:
    """A lock in ``details`` made ``dataclasses.asdict`` (a deepcopy) fail in every later ``%pi save``."""
    odd_kernel.run("%pi reset")
    odd_server.enqueue(tool_call_chunks([("open_handle", {})]), text_chunks("Opened."))
    result = odd_kernel.run("%%pi\nOpen a handle", cell_id="handle")
    assert result.status == "ok", result.text
    saved = odd_kernel.run(f"%pi save {tmp_path / 'handle.jsonl'}")
    assert saved.status == "ok" and "Saved 4 messages" in saved.text, saved.text
    loaded = odd_kernel.run(f"%pi load {tmp_path / 'handle.jsonl'}")
    assert loaded.status == "ok" and "Loaded 4 messages" in loaded.text, loaded.text


def test_a_tool_description_that_is_not_valid_unicode_does_not_break_every_turn(
    odd_kernel: KernelDriver, odd_server: FakeOpenAI
) -> None:
    """A lone surrogate in a docstring went into every request's ``tools`` and system prompt: the client
    could not encode the body, so every later turn failed. It becomes U+FFFD where the tool is defined."""
    defined = odd_kernel.run('@tool\ndef odd() -> str:\n    "Odd \\ud800 tool."\n    return "x"\n')
    try:
        assert defined.status == "ok", defined.text
        odd_kernel.run("%pi reset")
        odd_server.enqueue(text_chunks("Hello."))
        turn = odd_kernel.run("%%pi\nhi", cell_id="odd")
        assert turn.status == "ok", turn.text
        tools = odd_server.chat_requests[-1].body["tools"]
        assert any(entry["function"]["description"].startswith("Odd \ufffd tool") for entry in tools), tools
    finally:
        odd_kernel.run("from pi_kernel.kernel.session import get_session\nget_session().registry.remove('odd')")


def three_prefixed_turns(odd_kernel: KernelDriver, odd_server: FakeOpenAI, prefix: str) -> None:
    odd_kernel.run("%pi reset")
    for number, text in enumerate(("one", "two", "three")):
        odd_server.enqueue(text_chunks(f"ok {text}"))
        assert odd_kernel.run(f"%%pi\n{text}", cell_id=f"{prefix}{number}").status == "ok"
    assert message_count(odd_kernel) == 6


def test_pi_compact_can_be_undone(odd_kernel: KernelDriver, odd_server: FakeOpenAI) -> None:
    """Whatever drops messages keeps the conversation it replaces (docs/conversation.md)."""
    three_prefixed_turns(odd_kernel, odd_server, "c")
    odd_server.enqueue(text_chunks("Summary: the user said one, two."))
    compacted = odd_kernel.run("%pi compact")
    assert compacted.status == "ok" and "compacted" in compacted.text, compacted.text
    assert message_count(odd_kernel) < 6
    odd_kernel.run("%pi undo")
    assert message_count(odd_kernel) == 6, odd_kernel.run("%pi undo list").text
    assert "[assistant] ok one" in odd_kernel.run("%pi history").text


def test_a_failed_pi_compact_leaves_the_conversation_as_it_was(
    odd_kernel: KernelDriver, odd_server: FakeOpenAI
) -> None:
    """When the summary request fails, ``%pi compact`` replaces nothing (no bare list of prompts stands in)."""
    three_prefixed_turns(odd_kernel, odd_server, "f")
    odd_server.enqueue(HTTPError(400, message="Bad request"))
    failed = odd_kernel.run("%pi compact")
    assert "Not compacted" in failed.text and "unchanged" in failed.text, failed.text
    assert message_count(odd_kernel) == 6
    assert "[assistant] ok one" in odd_kernel.run("%pi history").text


# --------------------------------------------------------------------------- kernel rerun compaction


BIG = "word " * 1000  # about 1,250 tokens by the chars/4 estimate: more than the quarter of the window kept


@pytest.fixture(scope="module")
def compacting_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def compacting_kernel(compacting_server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(compacting_server.base_url, PI_CONTEXT_WINDOW="3000")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


def history(compacting_kernel: KernelDriver) -> str:
    return compacting_kernel.run("%pi history").text


def fill(compacting_kernel: KernelDriver, compacting_server: FakeOpenAI) -> None:
    """Three turns, none compacted: the second answer is long and reports 2,200 + 10 tokens; the third
    2,300 + 5 (the compaction threshold of a 3,000-token window is 2,250)."""
    compacting_kernel.run("%pi reset")
    compacting_server.enqueue(text_chunks("ok one", usage=usage_dict(50, 5)))
    assert compacting_kernel.run("%%pi\none", cell_id="r1").status == "ok"
    compacting_server.enqueue(text_chunks(BIG, usage=usage_dict(2200, 10)))
    assert compacting_kernel.run("%%pi\ntwo", cell_id="r2").status == "ok"
    compacting_server.enqueue(text_chunks("ok three", usage=usage_dict(2300, 5)))
    assert compacting_kernel.run("%%pi\nthree", cell_id="r3").status == "ok"
    assert "[compacted" not in history(compacting_kernel) and compacting_server.pending == 0


def test_a_rerun_that_compacts_keeps_its_new_answer(
    compacting_kernel: KernelDriver, compacting_server: FakeOpenAI
) -> None:
    fill(compacting_kernel, compacting_server)
    # Re-run r3 with a longer prompt: 2,210 + about 100 tokens would not fit, so the conversation is
    # compacted first (the summary, the long answer kept, the new prompt), then answered.
    compacting_server.enqueue(
        text_chunks("SUMMARY of one and two"), text_chunks("NEW ANSWER three", usage=usage_dict(400, 5))
    )
    result = compacting_kernel.run("%%pi\nthree again " + "please " * 60, cell_id="r3")
    assert result.status == "ok" and "NEW ANSWER three" in result.text, result.text
    shown = history(compacting_kernel)
    assert "NEW ANSWER three" in shown, shown
    assert "[compacted" in shown


def test_a_compaction_during_a_turn_can_be_undone(
    compacting_kernel: KernelDriver, compacting_server: FakeOpenAI
) -> None:
    fill(compacting_kernel, compacting_server)
    compacting_server.enqueue(text_chunks("SUMMARY of one and two"), text_chunks("ok four", usage=usage_dict(400, 5)))
    assert compacting_kernel.run("%%pi\nfour " + "please " * 60, cell_id="r4").status == "ok"
    assert "[compacted" in history(compacting_kernel)
    compacting_kernel.run("%pi undo")
    shown = history(compacting_kernel)
    assert "[compacted" not in shown and "[assistant] ok one" in shown, shown


def test_a_turn_that_fails_after_a_compaction_says_so(
    compacting_kernel: KernelDriver, compacting_server: FakeOpenAI
) -> None:
    fill(compacting_kernel, compacting_server)
    compacting_server.enqueue(
        text_chunks("SUMMARY of one and two"), HTTPError(400, message="Bad request after compaction")
    )
    result = compacting_kernel.run("%%pi\nfour", cell_id="r4")
    assert result.status == "error", result.text
