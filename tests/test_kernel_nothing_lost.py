"""Issue 11 point 2, through the real kernel: nothing the user had is lost.

- whatever enters the transcript is storable and sendable (a non-UTF-8 file
  name from a tool, a lone surrogate in the model's answer, tool-call
  arguments nested 1,500 deep): that turn, later turns and ``%pi save`` work;
- re-running an earlier ``%%pi`` cell replaces its turn only when the new turn
  produced something, and ``%pi undo`` brings replaced turns back;
- ``%pi load`` of a hostile file is rejected with one line naming the first
  bad record, the conversation untouched; ``%pi save`` is atomic and its
  failures are one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, RawSSE, ToolCallSpec, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env

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
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
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
    # The JSON escape \ud800 alone decodes to a lone surrogate in Python.
    body = b"".join(
        b"data: " + json.dumps(item).replace("LONE", "\\ud800").encode() + b"\n\n"
        for item in text_chunks("bad LONE char", parts=1)
    ) + b"data: [DONE]\n\n"
    server.enqueue(RawSSE(body))
    assert kernel.run("%%pi\nSay it", cell_id="lone").status == "ok"
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
