"""Real recorded SSE bodies replayed byte for byte through ``fake_openai`` and the provider.

Also checks the fake server itself (byte-exact replay, non-streamed answers,
``/v1/models``, the command line used by browser tests), since every provider,
agent and kernel test leans on it.
"""

from __future__ import annotations

import asyncio
import copy
import http.client
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
from fake_openai import (
    RECORDED_STREAMS,
    FakeOpenAI,
    load_script,
    needs_recorded_streams,
    recorded_stream,
    text_chunks,
    tool_call_chunks,
)

from pi_kernel.ai.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_kernel.ai.models import AssistantMessageEvent, Context, Model, StreamOptions
from pi_kernel.ai.providers.remote import stream_openai_compatible

# The repository holds the recordings; PI_RECORDED_STREAMS may point elsewhere (skipped if absent, outside CI).
pytestmark = needs_recorded_streams()

SHARED_ORIGINALS = Path(__file__).resolve().parents[3] / "shared" / "data" / "recorded-streams"


def test_the_repository_copies_are_the_recordings_byte_for_byte() -> None:
    copies = sorted(path.name for path in RECORDED_STREAMS.glob("*.sse"))
    assert len(copies) == 5
    if not SHARED_ORIGINALS.is_dir():
        pytest.skip("the project's shared/ folder is not beside this checkout; nothing to compare with")
    assert copies == sorted(path.name for path in SHARED_ORIGINALS.glob("*.sse"))
    for name in copies:
        assert (RECORDED_STREAMS / name).read_bytes() == (SHARED_ORIGINALS / name).read_bytes(), name


def recorded_chunks(name: str) -> list[dict[str, Any]]:
    """The JSON chunks of a recording, parsed independently of the provider."""
    lines = recorded_stream(name).decode().splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


def argument_fragments(name: str, index: int = 0) -> list[str]:
    fragments = []
    for item in recorded_chunks(name):
        for choice in item["choices"]:
            for call in choice["delta"].get("tool_calls") or []:
                if call["index"] == index and call["function"].get("arguments"):
                    fragments.append(call["function"]["arguments"])
    return fragments


async def replay(
    server: FakeOpenAI, name: str, model_id: str = "gpt-4o-mini", provider: str = "openai"
) -> tuple[list[AssistantMessageEvent], AssistantMessage]:
    server.enqueue(recorded_stream(name))
    model = Model(model_id, provider=provider, base_url=server.base_url)
    stream = stream_openai_compatible(model, Context(None, [UserMessage("hi")]), StreamOptions(api_key="sk-test"))
    events = [event async for event in stream]
    return events, await stream.result()


def without_deltas(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events if not event.type.endswith("_delta")]


async def test_get_capital_tool_call(fake_openai: FakeOpenAI) -> None:
    events, message = await replay(fake_openai, "openai_tool_call_get_capital")
    assert without_deltas(events) == ["start", "toolcall_start", "toolcall_end", "done"]
    deltas = [event.delta for event in events if event.type == "toolcall_delta" and event.delta]
    assert deltas == argument_fragments("openai_tool_call_get_capital") == ['{"', "country", '":"', "UK", '"}']
    (call,) = message.content
    assert isinstance(call, ToolCall)
    assert (call.id, call.name, call.arguments, call.raw_arguments) == (
        "call_ZR5UUuTt3pf61kjwAJIYdVMj",
        "get_capital",
        {"country": "UK"},
        None,
    )
    assert message.stop_reason == "tool_use"
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (53, 15, 68)


async def test_text_after_tool(fake_openai: FakeOpenAI) -> None:
    events, message = await replay(fake_openai, "openai_text_after_tool")
    assert without_deltas(events) == ["start", "text_start", "text_end", "done"]
    assert message.content == [TextContent("The capital of the UK is London.")]
    assert message.stop_reason == "stop"
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (78, 9, 87)


async def test_parallel_tool_calls(fake_openai: FakeOpenAI) -> None:
    events, message = await replay(fake_openai, "openai_parallel_tool_calls", "gpt-4o")
    assert without_deltas(events) == [
        "start",
        "toolcall_start",
        "toolcall_start",
        "toolcall_end",
        "toolcall_end",
        "done",
    ]
    assert [(call.id, call.name, call.arguments) for call in message.tool_calls] == [
        ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", {}),
        ("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", {}),
    ]
    assert [event.content_index for event in events if event.type == "toolcall_end"] == [0, 1]
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (364, 40, 404)


async def test_long_nested_arguments(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(recorded_stream("openai_long_nested_arguments"))
    model = Model("gpt-4o", provider="openai", base_url=fake_openai.base_url)
    stream = stream_openai_compatible(model, Context(None, [UserMessage("hi")]), StreamOptions(api_key="sk-test"))
    partials, deltas = [], []
    async for event in stream:
        if event.type == "toolcall_delta" and event.delta:
            deltas.append(event.delta)
            partials.append(copy.deepcopy(event.partial.tool_calls[0].arguments))
    message = await stream.result()
    fragments = argument_fragments("openai_long_nested_arguments")
    assert len(fragments) > 50 and deltas == fragments
    expected = json.loads("".join(fragments))
    (call,) = message.tool_calls
    assert call.name == "final_result" and call.arguments == expected and call.raw_arguments is None
    assert partials[-1] == expected
    sizes = [len(json.dumps(partial)) for partial in partials]
    assert sizes == sorted(sizes)  # the live preview only grows
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (448, 62, 510)


async def test_deepseek_reasoner_thinking_then_text(fake_openai: FakeOpenAI) -> None:
    events, message = await replay(fake_openai, "deepseek_reasoner_thinking_text", "deepseek-reasoner", "deepseek")
    assert without_deltas(events) == ["start", "thinking_start", "thinking_end", "text_start", "text_end", "done"]
    reasoning = "".join(
        item["choices"][0]["delta"].get("reasoning_content") or ""
        for item in recorded_chunks("deepseek_reasoner_thinking_text")
    )
    thinking, text = message.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == reasoning and len(reasoning) > 500
    assert thinking.signature == "reasoning_content"
    assert isinstance(text, TextContent) and text.text == "Hello there! 😊 How can I help you today?"
    assert message.stop_reason == "stop"
    usage = message.usage
    assert (usage.input, usage.output, usage.total_tokens, usage.cache_read) == (6, 212, 218, 0)
    assert usage.cost == pytest.approx((6 * 0.28 + 212 * 0.42) / 1_000_000)


# --------------------------------------------------------------------------- the fake server itself


@pytest.mark.parametrize("path", sorted(RECORDED_STREAMS.glob("*.sse")), ids=lambda path: path.stem)
def test_fake_server_replays_recordings_byte_for_byte(fake_openai: FakeOpenAI, path: Path) -> None:
    fake_openai.enqueue(path.read_bytes())
    connection = http.client.HTTPConnection("127.0.0.1", fake_openai.port, timeout=5)
    connection.request(
        "POST", "/v1/chat/completions", json.dumps({"stream": True}), {"Content-Type": "application/json"}
    )
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type", "").startswith("text/event-stream")
    assert response.read() == path.read_bytes()
    connection.close()


async def test_fake_server_non_streamed_answer_and_models() -> None:
    with FakeOpenAI([tool_call_chunks([("get_capital", {"country": "UK"})], text="Checking.")]) as server:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
        try:
            completion = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            models = await client.models.list()
        finally:
            await client.close()
    message = completion.choices[0].message
    assert message.content == "Checking." and completion.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls is not None
    assert json.loads(message.tool_calls[0].function.arguments) == {"country": "UK"}  # type: ignore[union-attr]
    assert [model.id for model in models.data] == ["fake-model"]
    assert server.bodies == [{"model": "m", "messages": [{"role": "user", "content": "x"}]}]


async def test_fake_server_without_script_answers_500(fake_openai: FakeOpenAI) -> None:
    model = Model("m", provider="llamacpp", base_url=fake_openai.base_url)
    options = StreamOptions(max_retries=0)
    message = await stream_openai_compatible(model, Context(None, [UserMessage("x")]), options).result()
    assert message.error_message == "500 fake_openai: no scripted response left"


SCRIPT = """
from fake_openai import text_chunks, tool_call_chunks

def responder(body):
    if not any(message["role"] == "tool" for message in body["messages"]):
        return tool_call_chunks([("shout", {"text": "hi"})])
    return text_chunks("Tool said " + body["messages"][-1]["content"])
"""


async def test_command_line_serves_a_responder_script(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    server_file = Path(__file__).resolve().parents[1] / "fake_openai.py"
    process = subprocess.Popen(
        [sys.executable, str(server_file), "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    try:
        assert process.stdout is not None
        ready = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 20)
        assert ready.startswith("READY http://127.0.0.1:")
        model = Model("m", provider="llamacpp", base_url=ready.split()[1])
        first = await stream_openai_compatible(model, Context(None, [UserMessage("go")]), StreamOptions()).result()
        call = first.tool_calls[0]
        assert (call.name, call.arguments) == ("shout", {"text": "hi"})
        history: list[Message] = [UserMessage("go"), first, ToolResultMessage(call.id, "shout", [TextContent("HI")])]
        second = await stream_openai_compatible(model, Context(None, history), StreamOptions()).result()
        assert second.text == "Tool said HI"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


async def test_json_script_shorthands(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    specs = [
        {"tool_calls": [{"name": "f", "arguments": {"a": 1}, "id": "call_f"}], "style": "llamacpp"},
        {"sse_file": "openai_text_after_tool"},
        {"error": 400, "message": "Bad history"},
    ]
    script.write_text(json.dumps(specs))
    responses, responder = load_script(str(script))
    assert responder is None
    with FakeOpenAI(responses) as server:
        model = Model("m", provider="llamacpp", base_url=server.base_url)
        results = [
            await stream_openai_compatible(model, Context(None, [UserMessage("x")]), StreamOptions()).result()
            for _ in specs
        ]
    assert [(call.id, call.arguments) for call in results[0].tool_calls] == [("call_f", {"a": 1})]
    assert results[1].text == "The capital of the UK is London."
    assert results[2].error_message == "400 Bad history"


def test_text_chunks_builder_round_trips() -> None:
    chunks = text_chunks("abcdefg", parts=3)
    deltas = [item["choices"][0]["delta"].get("content") for item in chunks if item["choices"]]
    assert "".join(delta or "" for delta in deltas) == "abcdefg"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 15
