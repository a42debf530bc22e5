"""``serve-local``: the local model behind an OpenAI-compatible server, through the real ``openai`` client.

On the real SmolLM2-135M model (no mocks); ``max_tokens`` stays small and
assertions are about structure and status codes, never about wording.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from pydantic import BaseModel, Field

from pi_kernel.ai import Context, Model, StreamOptions, Tool, ToolCall, UserMessage, stream, validate_tool_arguments
from pi_kernel.ai.providers.local_engine import LOCAL_MODEL_ID, get_engine

pytestmark = pytest.mark.local_model  # skipped without the model, failed under PI_REQUIRE_LOCAL_MODEL=1 (conftest)


class Weather(BaseModel):
    city: str = Field(description="The city name")


WEATHER = Tool(name="get_weather", description="Get the current weather in a city.", parameters=Weather)


def ask(text: str, tools: list[Tool] | None = None) -> Context:
    return Context(system_prompt="You are a helpful assistant.", messages=[UserMessage(text)], tools=tools)


def kinds(events: list[Any]) -> list[str]:
    """Event types with runs of deltas collapsed to one."""
    out: list[str] = []
    for event in events:
        if not (out and out[-1] == event.type and event.type.endswith("_delta")):
            out.append(event.type)
    return out


@pytest.fixture
def local_server() -> Any:
    import threading

    from pi_kernel.ai.providers.local_server import make_server

    server = make_server(0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


WEATHER_FUNCTION: Any = {  # an OpenAI tool param (a TypedDict the literal cannot be inferred as)
    "type": "function",
    "function": {"name": "get_weather", "description": WEATHER.description, "parameters": WEATHER.json_schema()},
}


def test_server_answers_a_named_tool_call_without_streaming(local_server: str) -> None:
    import openai

    client = openai.OpenAI(base_url=local_server, api_key="unused")
    response = client.chat.completions.create(
        model=LOCAL_MODEL_ID,
        messages=[{"role": "user", "content": "What is the weather in Rome?"}],
        tools=[WEATHER_FUNCTION],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=40,
    )

    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    validate_tool_arguments(WEATHER, ToolCall(call.id, call.function.name, json.loads(call.function.arguments)))
    assert response.usage is not None and response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    assert [model.id for model in client.models.list()] == [LOCAL_MODEL_ID]


def test_server_streams_text_with_usage_and_takes_tool_results(local_server: str) -> None:
    import openai

    client = openai.OpenAI(base_url=local_server, api_key="unused")
    chunks = list(
        client.chat.completions.create(
            model=LOCAL_MODEL_ID,
            messages=[
                {"role": "user", "content": "What is the weather in Rome?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "Rainy, 12 C"},
            ],
            tools=[WEATHER_FUNCTION],
            max_tokens=16,
            stream=True,
            stream_options={"include_usage": True},
        )
    )

    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    finishes = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason]
    assert text.strip() and finishes in (["stop"], ["length"])
    assert not any(chunk.choices[0].delta.tool_calls for chunk in chunks if chunk.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


async def test_pi_openai_provider_streams_a_tool_call_from_the_local_server(local_server: str) -> None:
    model = Model(id=LOCAL_MODEL_ID, provider="openai-compatible", base_url=local_server, api_key_env="PI_TEST_NO_KEY")
    s = stream(
        model, ask("What is the weather in Oslo?", [WEATHER]), StreamOptions(tool_choice="required", max_tokens=40)
    )
    events = [event async for event in s]
    message = await s.result()

    assert kinds(events) == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    assert message.stop_reason == "tool_use"
    validate_tool_arguments(WEATHER, message.tool_calls[0])


def test_server_rejects_an_unknown_tool_choice_with_400(local_server: str) -> None:
    import openai

    client = openai.OpenAI(base_url=local_server, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="get_stock_price"):
        client.chat.completions.create(
            model=LOCAL_MODEL_ID,
            messages=[{"role": "user", "content": "Hi"}],
            tools=[WEATHER_FUNCTION],
            tool_choice={"type": "function", "function": {"name": "get_stock_price"}},
        )


@pytest.mark.parametrize("streamed", [False, True])
def test_a_prompt_longer_than_the_context_is_a_400_not_retried(local_server: str, streamed: bool) -> None:
    """A 5xx makes the ``openai`` client retry a request that can only fail again; a 400 it does not."""
    import openai

    long = "lorem ipsum dolor sit amet " * 1200  # about 12,000 tokens; the context holds 4,096
    client = openai.OpenAI(base_url=local_server, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="context holds") as raised:
        client.chat.completions.create(
            model=LOCAL_MODEL_ID, messages=[{"role": "user", "content": long}], max_tokens=8, stream=streamed
        )
    assert raised.value.status_code == 400


def test_server_stops_decoding_when_the_client_disconnects(local_server: str) -> None:
    import socket
    from urllib.parse import urlparse

    address = urlparse(local_server)
    body = json.dumps(
        {
            "model": LOCAL_MODEL_ID,
            "messages": [{"role": "user", "content": "Write a very long essay about the history of Europe."}],
            "max_tokens": 2000,
            "stream": True,
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {address.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((address.hostname, address.port or 80), timeout=30) as sock:
        sock.sendall(head + body)
        received = b""
        while b'"content": "' not in received.split(b"\r\n\r\n", 1)[-1]:
            received += sock.recv(4096)  # until the answer's first text arrives
        assert received.startswith(b"HTTP/1.1 200")
        decoded_at_hang_up = get_engine().tokens_decoded
    # hung up mid-answer

    # The model is busy with one request at a time: a quick answer now means the long one was stopped.
    import openai

    client = openai.OpenAI(base_url=local_server, api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model=LOCAL_MODEL_ID, messages=[{"role": "user", "content": "Say hi."}], max_tokens=4
    )
    assert reply.choices[0].message.content
    # The reply waited for the abandoned request to stop; it stopped after a handful of its 2000 tokens.
    assert get_engine().tokens_decoded - decoded_at_hang_up < 60, "the abandoned request kept decoding"


def test_serve_local_command_serves_on_loopback(tmp_path: Any) -> None:
    """``python -m pi_kernel serve-local``: the subcommand starts the server on 127.0.0.1 and stops on Ctrl+C."""
    from kernel_helpers import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "pi_kernel", "serve-local", "--port", "0", "--quiet"]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()  # printed once the model has loaded and the port is bound
        found = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", banner)
        assert found, banner
        with urllib.request.urlopen(found[1] + "/models", timeout=30) as response:
            listed = json.loads(response.read())
        assert [entry["id"] for entry in listed["data"]] == [LOCAL_MODEL_ID]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
