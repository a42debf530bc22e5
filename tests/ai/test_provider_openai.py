"""The OpenAI-compatible provider, through the real ``openai`` client against ``fake_openai``.

Longer than ~400 lines on purpose: it is the one place that pins down the
provider's observable behaviour (events, finish reasons, usage, errors, retries,
abort, request body, history replay), each test small and named for it.
"""

from __future__ import annotations

import asyncio
import copy
import email.utils
import json
import threading
import time
from typing import Any

import pytest
from fake_openai import (
    Chunks,
    FakeOpenAI,
    HTTPError,
    ToolCallSpec,
    chunk,
    split_text,
    text_chunks,
    tool_call_chunks,
    usage_dict,
)
from pydantic import BaseModel

from pi_kernel.ai.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_kernel.ai.models import AbortController, AssistantMessageEvent, Compat, Context, Model, StreamOptions
from pi_kernel.ai.providers.openai_format import convert_tools
from pi_kernel.ai.providers.remote import (
    RetryPolicy,
    backoff_delay,
    is_retryable_status,
    parse_retry_after,
    stream_openai_compatible,
)
from pi_kernel.ai.tool import Tool, ToolArgumentsError, validate_tool_arguments

FAST_RETRY = RetryPolicy(base_delay=0.01, max_delay=0.05)


def model_for(server: FakeOpenAI, model_id: str = "gpt-4o-mini", provider: str = "llamacpp", **changes: Any) -> Model:
    return Model(model_id, provider=provider, base_url=server.base_url, **changes)  # type: ignore[arg-type]


async def collect(
    model: Model,
    messages: list[Message] | None = None,
    *,
    tools: list[Tool] | None = None,
    system_prompt: str | None = "You are terse.",
    policy: RetryPolicy = FAST_RETRY,
    **options: Any,
) -> tuple[list[AssistantMessageEvent], AssistantMessage]:
    context = Context(system_prompt, messages if messages is not None else [UserMessage("hi")], tools)
    stream = stream_openai_compatible(model, context, StreamOptions(**options), retry_policy=policy)
    events = [event async for event in stream]
    return events, await stream.result()


def types_of(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events]


def without_deltas(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events if not event.type.endswith("_delta")]


class ReadFile(BaseModel):
    path: str
    limit: int = 10


READ_TOOL = Tool("read", "Read a file", ReadFile)
STRICT_TOOL = Tool("read_strict", "Read a file", ReadFile, constrained_sampling=True)


# --------------------------------------------------------------------------- events


async def test_text_answer_emits_start_text_block_and_done(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(text_chunks("Hello there, world", parts=3))
    events, message = await collect(model_for(fake_openai))
    assert types_of(events) == ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"]
    assert "".join(event.delta or "" for event in events if event.type == "text_delta") == "Hello there, world"
    assert events[-2].content == "Hello there, world" and events[-2].content_index == 0
    assert message.text == "Hello there, world" and message.stop_reason == "stop"


async def test_toolcall_deltas_carry_growing_partial_arguments(fake_openai: FakeOpenAI) -> None:
    arguments = {"path": "notes/today.txt", "content": "line one\nline two " * 5}
    fake_openai.enqueue(tool_call_chunks([("write", arguments)], parts=12))
    stream = stream_openai_compatible(model_for(fake_openai), Context(None, [UserMessage("go")]), StreamOptions())
    snapshots = []
    async for event in stream:
        if event.type == "toolcall_delta":
            call = event.partial.content[event.content_index]  # type: ignore[index]
            snapshots.append(copy.deepcopy(call.arguments))  # type: ignore[union-attr]
    message = await stream.result()
    sizes = [len(json.dumps(snapshot)) for snapshot in snapshots]
    assert len(snapshots) >= 12 and sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert snapshots[-1] == arguments
    assert message.tool_calls[0].arguments == arguments and message.tool_calls[0].raw_arguments is None


async def test_llamacpp_repeated_id_and_name_are_set_once(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(tool_call_chunks([ToolCallSpec("read", {"path": "a.py"}, "call_llama")], style="llamacpp"))
    events, message = await collect(model_for(fake_openai))
    assert without_deltas(events) == ["start", "toolcall_start", "toolcall_end", "done"]
    (call,) = message.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_llama", "read", {"path": "a.py"})


async def test_late_tool_call_id_is_taken_and_missing_id_is_generated(fake_openai: FakeOpenAI) -> None:
    late_id = [
        chunk({"tool_calls": [{"index": 0, "function": {"name": "read", "arguments": '{"path":'}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_late", "function": {"arguments": '"x"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"name": "read", "arguments": '{"path":"y"}'}}]}),
        chunk({}, finish_reason="tool_calls"),
    ]
    fake_openai.enqueue(late_id)
    _, message = await collect(model_for(fake_openai))
    first, second = message.tool_calls
    assert first.id == "call_late" and first.arguments == {"path": "x"}
    assert second.id.startswith("call_") and second.id != first.id and second.arguments == {"path": "y"}


async def test_late_name_is_taken_once(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        [
            chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": '{"path":'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"name": "read", "arguments": '"x"'}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"name": "read", "arguments": "}"}}]}),
            chunk({}, finish_reason="tool_calls"),
        ]
    )
    _, message = await collect(model_for(fake_openai))
    (call,) = message.tool_calls
    assert (call.id, call.name, call.arguments) == ("c1", "read", {"path": "x"})


async def test_ollama_whole_calls_in_one_chunk(fake_openai: FakeOpenAI) -> None:
    calls = [("read", {"path": "a"}), ("read", {"path": "b", "limit": 3})]
    fake_openai.enqueue(tool_call_chunks(calls, style="ollama"))
    events, message = await collect(model_for(fake_openai, provider="ollama"))
    assert without_deltas(events) == [
        "start",
        "toolcall_start",
        "toolcall_start",
        "toolcall_end",
        "toolcall_end",
        "done",
    ]
    assert [call.arguments for call in message.tool_calls] == [{"path": "a"}, {"path": "b", "limit": 3}]
    assert message.stop_reason == "tool_use"


async def test_same_index_with_a_new_id_is_a_new_call(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(tool_call_chunks([("read", {"path": "a"}), ("read", {"path": "b"})], style="ollama_per_chunk"))
    _, message = await collect(model_for(fake_openai, provider="ollama"))
    assert [(call.id, call.arguments) for call in message.tool_calls] == [
        ("call_0", {"path": "a"}),
        ("call_1", {"path": "b"}),
    ]


async def test_thinking_text_and_tool_blocks_follow_each_other(fake_openai: FakeOpenAI) -> None:
    chunks = tool_call_chunks([("read", {"path": "a"})], reasoning="Let me look.", text="Reading it.", style="deepseek")
    fake_openai.enqueue(chunks)
    events, message = await collect(model_for(fake_openai, "deepseek-chat", provider="deepseek"))
    assert without_deltas(events) == [
        "start",
        "thinking_start",
        "thinking_end",
        "text_start",
        "text_end",
        "toolcall_start",
        "toolcall_end",
        "done",
    ]
    thinking, text, call = message.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "Let me look."
    assert thinking.signature == "reasoning_content"
    assert isinstance(text, TextContent) and text.text == "Reading it."
    assert isinstance(call, ToolCall) and call.arguments == {"path": "a"}


async def test_text_after_a_tool_call_starts_a_new_text_block(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        [
            chunk({"content": "First."}),
            chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "read", "arguments": "{}"}}]}),
            chunk({"content": "Second."}),
            chunk({}, finish_reason="tool_calls"),
        ]
    )
    events, message = await collect(model_for(fake_openai))
    assert [type(block).__name__ for block in message.content] == ["TextContent", "ToolCall", "TextContent"]
    starts = [(event.type, event.content_index) for event in events if event.type.endswith("_start")]
    assert starts == [("text_start", 0), ("toolcall_start", 1), ("text_start", 2)]


@pytest.mark.parametrize("field", ["reasoning", "reasoning_text"])
async def test_other_reasoning_fields_are_thinking_with_their_name(fake_openai: FakeOpenAI, field: str) -> None:
    fake_openai.enqueue(text_chunks("Answer.", reasoning="Hmm.", reasoning_field=field))
    _, message = await collect(model_for(fake_openai))
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingContent) and (thinking.thinking, thinking.signature) == ("Hmm.", field)


# --------------------------------------------------------------------------- finish reasons and usage


@pytest.mark.parametrize(
    ("finish_reason", "with_call", "stop_reason", "error"),
    [
        ("stop", False, "stop", None),
        ("length", False, "length", None),
        ("tool_calls", True, "tool_use", None),
        ("function_call", True, "tool_use", None),
        ("stop", True, "tool_use", None),
        ("content_filter", False, "error", "Provider finish_reason: content_filter"),
        ("surprise", False, "error", "Provider finish_reason: surprise"),
    ],
)
async def test_finish_reason_mapping(
    fake_openai: FakeOpenAI, finish_reason: str, with_call: bool, stop_reason: str, error: str | None
) -> None:
    calls = [("read", {"path": "a"})] if with_call else []
    fake_openai.enqueue(tool_call_chunks(calls, text="Some text.", finish_reason=finish_reason))
    events, message = await collect(model_for(fake_openai))
    assert message.stop_reason == stop_reason and message.error_message == error
    assert events[-1].type == ("error" if error else "done")
    assert message.text == "Some text."


async def test_stream_without_finish_reason_is_an_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue([chunk({"content": "Half an answ"})])
    events, message = await collect(model_for(fake_openai))
    assert events[-1].type == "error" and message.stop_reason == "error"
    assert message.error_message == "Stream ended without finish_reason"
    assert message.text == "Half an answ"


async def test_tool_calls_cut_at_max_tokens_report_length(fake_openai: FakeOpenAI) -> None:
    # vLLM says "tool_calls" even when max_tokens cut the output.
    fake_openai.enqueue(tool_call_chunks([("read", '{"path": "a')], usage=usage_dict(30, 16)))
    _, message = await collect(model_for(fake_openai, provider="vllm"), max_tokens=16)
    assert message.stop_reason == "length"
    assert message.tool_calls[0].raw_arguments == '{"path": "a'


async def test_usage_only_chunk_after_finish_reason_is_read(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(text_chunks("Hi.", usage=usage_dict(1200, 40, cached=1024)))
    _, message = await collect(model_for(fake_openai, "gpt-4o-mini"))
    usage = message.usage
    # As pi: input is the uncached part of the 1200-token prompt; the total is unchanged.
    assert (usage.input, usage.output, usage.cache_read, usage.total_tokens) == (176, 40, 1024, 1240)
    assert usage.prompt_tokens == 1200
    expected = (176 * 0.15 + 40 * 0.60 + 1024 * 0.075) / 1_000_000
    assert usage.cost == pytest.approx(expected)


async def test_deepseek_usage_with_finish_chunk_and_cache_hits(fake_openai: FakeOpenAI) -> None:
    deepseek_usage = {"prompt_tokens": 500, "completion_tokens": 20, "total_tokens": 520}
    deepseek_usage |= {"prompt_cache_hit_tokens": 448, "prompt_cache_miss_tokens": 52}
    fake_openai.enqueue(text_chunks("Hi.", style="deepseek", usage=deepseek_usage))
    assert fake_openai.pending == 1
    _, message = await collect(model_for(fake_openai, "deepseek-chat", provider="deepseek"))
    assert (message.usage.input, message.usage.cache_read, message.usage.total_tokens) == (52, 448, 520)
    assert message.usage.cost == pytest.approx((52 * 0.28 + 20 * 0.42 + 448 * 0.028) / 1_000_000)


async def test_unknown_model_has_no_cost(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(text_chunks("Hi."))
    _, message = await collect(model_for(fake_openai, "my-local-model"))
    assert message.usage.input == 10 and message.usage.cost is None


# --------------------------------------------------------------------------- errors and retries


@pytest.mark.parametrize("status", [401, 400])
async def test_http_error_message_starts_with_status(fake_openai: FakeOpenAI, status: int) -> None:
    fake_openai.enqueue(HTTPError(status, message="Something is wrong with the request"))
    events, message = await collect(model_for(fake_openai))
    assert types_of(events) == ["error"]
    assert message.stop_reason == "error"
    assert message.error_message == f"{status} Something is wrong with the request"
    assert len(fake_openai.chat_requests) == 1  # not retried


async def test_api_key_is_sent_but_never_in_error_text(fake_openai: FakeOpenAI) -> None:
    key = "sk-test-VERY-SECRET-0123456789"
    fake_openai.enqueue(HTTPError(401, message=f"Incorrect API key provided: {key}."))
    _, message = await collect(model_for(fake_openai), api_key=key)
    assert fake_openai.chat_requests[0].headers["authorization"] == f"Bearer {key}"
    assert message.error_message is not None and message.error_message.startswith("401 Incorrect API key")
    assert key not in message.error_message and key not in repr(message)


async def test_api_key_from_model_env_var_else_placeholder(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_TEST_FAKE_KEY", "sk-from-env")
    fake_openai.enqueue(text_chunks("a"), text_chunks("b"))
    await collect(model_for(fake_openai, api_key_env="PI_TEST_FAKE_KEY"))
    await collect(model_for(fake_openai, api_key_env="PI_TEST_UNSET_KEY"))
    headers = [request.headers["authorization"] for request in fake_openai.chat_requests]
    assert headers == ["Bearer sk-from-env", "Bearer not-needed"]


async def test_hosted_provider_without_key_fails_without_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    events, message = await collect(Model("deepseek-chat", provider="deepseek"))
    assert types_of(events) == ["error"]
    assert message.error_message == "No API key for provider deepseek: set DEEPSEEK_API_KEY"


async def test_429_with_retry_after_is_retried_then_succeeds(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(HTTPError(429, headers={"Retry-After": "0.2"}), text_chunks("Finally."))
    started = time.monotonic()
    # A long backoff base shows that the server's Retry-After is what was waited.
    _, message = await collect(model_for(fake_openai), policy=RetryPolicy(base_delay=30.0))
    elapsed = time.monotonic() - started
    assert message.stop_reason == "stop" and message.text == "Finally."
    assert len(fake_openai.chat_requests) == 2
    assert 0.2 <= elapsed < 10


def test_retry_after_parsing_and_caps() -> None:
    now = 1_700_000_000.0
    http_date = email.utils.formatdate(now + 7, usegmt=True)
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after": http_date}, now=now) == pytest.approx(7, abs=1)
    assert parse_retry_after({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, max_retry_after=60.0, jitter=0.25)
    assert backoff_delay(0, policy, retry_after=3600) == 60.0  # a server asking for an hour is not obeyed
    assert 0.75 <= backoff_delay(0, policy) <= 1.0 and 1.5 <= backoff_delay(1, policy) <= 2.0
    assert 3.75 <= backoff_delay(10, policy) <= 5.0


async def test_5xx_is_retried_max_retries_times_then_gives_up(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(*[HTTPError(503, message="Overloaded")] * 3)
    _, message = await collect(model_for(fake_openai), max_retries=2)
    assert len(fake_openai.chat_requests) == 3
    assert message.stop_reason == "error" and message.error_message == "503 Overloaded"


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
async def test_retryable_statuses_are_retried(fake_openai: FakeOpenAI, status: int) -> None:
    fake_openai.enqueue(HTTPError(status, message="Try again"), text_chunks("Recovered."))
    _, message = await collect(model_for(fake_openai))
    assert message.stop_reason == "stop" and message.text == "Recovered."
    assert len(fake_openai.chat_requests) == 2


def test_which_statuses_are_retryable() -> None:
    statuses = (400, 401, 403, 404, 408, 409, 422, 429, 500, 503, 529)
    assert [status for status in statuses if is_retryable_status(status)] == [408, 409, 429, 500, 503, 529]
    # The server's own x-should-retry header wins either way.
    assert is_retryable_status(400, {"x-should-retry": "true"})
    assert not is_retryable_status(503, {"x-should-retry": "false"})


async def test_insufficient_quota_429_is_not_retried(fake_openai: FakeOpenAI) -> None:
    body = {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}
    fake_openai.enqueue(HTTPError(429, body), text_chunks("never"))
    _, message = await collect(model_for(fake_openai))
    assert message.error_message == "429 You exceeded your current quota"
    assert len(fake_openai.chat_requests) == 1


async def test_connection_refused_is_retried_then_reported() -> None:
    with FakeOpenAI() as server:
        model = model_for(server)
    # The server is gone: every attempt fails to connect.
    events, message = await collect(model, max_retries=1)
    assert types_of(events) == ["error"]
    assert message.error_message is not None and message.error_message.startswith("Connection error.")


async def test_disconnect_before_any_chunk_is_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Chunks(text_chunks("lost"), disconnect_after=0), text_chunks("Second try."))
    _, message = await collect(model_for(fake_openai))
    assert message.stop_reason == "stop" and message.text == "Second try."
    assert len(fake_openai.chat_requests) == 2


async def test_mid_stream_disconnect_is_an_error_with_partial_text(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Chunks(text_chunks("Hello brave new world", parts=4), disconnect_after=3))
    events, message = await collect(model_for(fake_openai))
    assert events[-1].type == "error" and message.stop_reason == "error"
    assert message.text == "Hello brave"  # the first two deltas (chunk 1 is the role chunk)
    assert message.error_message is not None and message.error_message.startswith("Connection error.")
    assert len(fake_openai.chat_requests) == 1  # content was shown: no retry


async def test_error_object_inside_the_stream_keeps_partial_text(fake_openai: FakeOpenAI) -> None:
    chunks = text_chunks("Partial answer", parts=2)[:3]
    fake_openai.enqueue([*chunks, {"error": {"message": "Model overloaded mid-answer", "type": "server_error"}}])
    events, message = await collect(model_for(fake_openai))
    assert events[-1].type == "error" and message.stop_reason == "error"
    assert message.error_message == "Model overloaded mid-answer" and message.text == "Partial answer"


async def test_malformed_tool_arguments_keep_the_raw_text(fake_openai: FakeOpenAI) -> None:
    broken = '{"path": "a.txt", "limit": 5,, "x"}'
    fake_openai.enqueue(tool_call_chunks([("read", broken)]))
    events, message = await collect(model_for(fake_openai))
    (call,) = message.tool_calls
    assert call.raw_arguments == broken
    assert call.arguments == {"path": "a.txt", "limit": 5}
    end = next(event for event in events if event.type == "toolcall_end")
    assert end.tool_call is call and message.stop_reason == "tool_use"
    # The best-effort preview would pass validation; the raw text makes it fail, naming the tool.
    assert ReadFile.model_validate(call.arguments)
    expected = r'^Validation failed for tool "read":\n  - root: The arguments are not valid JSON'
    with pytest.raises(ToolArgumentsError, match=expected):
        validate_tool_arguments(READ_TOOL, call)


# --------------------------------------------------------------------------- abort


async def test_abort_mid_stream_ends_aborted_promptly_with_partial_text(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Chunks(text_chunks("one two three four five six seven", parts=7), delay=5.0))
    controller = AbortController()
    stream = stream_openai_compatible(
        model_for(fake_openai), Context(None, [UserMessage("count")]), StreamOptions(signal=controller.signal)
    )
    aborted_at = 0.0
    async for event in stream:
        if event.type == "text_delta" and not controller.signal.aborted:
            aborted_at = time.monotonic()
            controller.abort()
    message = await stream.result()
    assert time.monotonic() - aborted_at < 2.5  # well before the next chunk was due (5 s)
    assert message.stop_reason == "aborted" and message.error_message == "Operation aborted"
    assert message.text == split_text("one two three four five six seven", 7)[0]
    assert await fake_openai.wait_for_async(lambda server: server.client_disconnects == 1, timeout=2)
    assert asyncio.all_tasks() == {asyncio.current_task()}  # no producer left behind


async def test_abort_from_another_thread_while_waiting_for_a_chunk(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Chunks(text_chunks("slow answer", parts=2), delay=10.0))
    controller = AbortController()
    timer = threading.Timer(0.2, controller.abort, args=("Interrupted by the user",))
    timer.start()
    started = time.monotonic()
    events, message = await collect(model_for(fake_openai), signal=controller.signal)
    timer.join()
    assert time.monotonic() - started < 5  # not waiting for the chunk due in 10 s
    assert types_of(events) == ["start", "error"]
    assert message.stop_reason == "aborted" and message.error_message == "Interrupted by the user"


async def test_abort_during_retry_backoff(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(HTTPError(429, headers={"Retry-After": "30"}))
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.2, controller.abort)
    started = time.monotonic()
    _, message = await collect(model_for(fake_openai), signal=controller.signal)
    assert time.monotonic() - started < 10  # not waiting out the 30 s Retry-After
    assert message.stop_reason == "aborted" and len(fake_openai.chat_requests) == 1


async def test_already_aborted_signal_sends_no_request(fake_openai: FakeOpenAI) -> None:
    controller = AbortController()
    controller.abort()
    events, message = await collect(model_for(fake_openai), signal=controller.signal)
    assert types_of(events) == ["error"] and message.stop_reason == "aborted"
    assert fake_openai.chat_requests == []


async def test_cancelling_the_reader_closes_the_request_and_leaves_no_task(fake_openai: FakeOpenAI) -> None:
    # A kernel interrupt cancels the task reading the stream.
    fake_openai.enqueue(Chunks(text_chunks("a b c d", parts=4), delay=0.3))
    started = asyncio.Event()

    async def read() -> None:
        stream = stream_openai_compatible(model_for(fake_openai), Context(None, [UserMessage("x")]), StreamOptions())
        async for event in stream:
            if event.type == "start":
                started.set()

    reader = asyncio.create_task(read())
    await asyncio.wait_for(started.wait(), 5)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert await fake_openai.wait_for_async(lambda server: server.client_disconnects == 1, timeout=2)


# --------------------------------------------------------------------------- request body


async def sent_body(server: FakeOpenAI, model: Model, **kwargs: Any) -> dict[str, Any]:
    server.enqueue(text_chunks("ok"))
    _, message = await collect(model, **kwargs)
    assert message.stop_reason == "stop", message.error_message
    body = server.last_body
    assert isinstance(body, dict)
    return body


def function_of(body: dict[str, Any], name: str) -> dict[str, Any]:
    return next(tool["function"] for tool in body["tools"] if tool["function"]["name"] == name)


async def test_tools_strict_key_on_openai(fake_openai: FakeOpenAI) -> None:
    body = await sent_body(
        fake_openai, model_for(fake_openai, "gpt-4o", provider="openai"), tools=[READ_TOOL, STRICT_TOOL]
    )
    plain, strict = function_of(body, "read"), function_of(body, "read_strict")
    assert body["tools"][0]["type"] == "function"
    assert plain == {
        "name": "read",
        "description": "Read a file",
        "parameters": READ_TOOL.json_schema(),
        "strict": False,
    }
    assert strict["strict"] is True
    assert strict["parameters"] == STRICT_TOOL.strict_json_schema()[0]
    assert strict["parameters"]["additionalProperties"] is False


async def test_tools_without_strict_where_strict_is_unsupported(fake_openai: FakeOpenAI) -> None:
    model = model_for(fake_openai, "deepseek-chat", provider="deepseek")
    body = await sent_body(fake_openai, model, tools=[STRICT_TOOL])
    function = function_of(body, "read_strict")
    assert "strict" not in function and function["parameters"] == STRICT_TOOL.json_schema()


async def test_the_documented_strict_override_sends_strict_true(fake_openai: FakeOpenAI) -> None:
    """docs/providers.md: ``compat={"supports_strict_mode": True}`` on a vLLM (or unknown) server turns strict
    mode on; without ``send_strict_field`` following it, the strict schema went out without ``strict: true``."""
    model = model_for(fake_openai, "my-model", provider="vllm", compat={"supports_strict_mode": True})
    body = await sent_body(fake_openai, model, tools=[STRICT_TOOL])
    function = function_of(body, "read_strict")
    assert function["parameters"] == STRICT_TOOL.strict_json_schema()[0]
    assert function.get("strict") is True, function
    explicit = Model("m", provider="vllm", compat={"supports_strict_mode": True, "send_strict_field": False})
    assert explicit.resolved_compat().send_strict_field is False  # an explicit override still wins


def test_strict_only_when_asked_supported_and_convertible() -> None:
    class Bag(BaseModel):
        counts: dict[str, int]  # open-ended keys: no strict form

    unconvertible = Tool("bag", "Counts.", Bag, constrained_sampling=True)
    tools = [READ_TOOL, STRICT_TOOL, unconvertible]
    converted = convert_tools(tools, Model("gpt-4o").resolved_compat())
    openai = {tool["function"]["name"]: tool["function"] for tool in converted}
    assert [openai[name]["strict"] for name in ("read", "read_strict", "bag")] == [False, True, False]
    assert openai["bag"]["parameters"] == unconvertible.json_schema()
    unsupported = convert_tools(tools, Compat(supports_strict_mode=False))
    assert all("strict" not in tool["function"] for tool in unsupported)  # as pi: not even strict: false
    assert all("strict" not in tool["function"] for tool in convert_tools(tools, Compat(send_strict_field=False)))


@pytest.mark.parametrize("provider", ["ollama", "vllm", "llamacpp"])
async def test_tools_without_strict_key_for_servers_that_reject_it(fake_openai: FakeOpenAI, provider: str) -> None:
    body = await sent_body(fake_openai, model_for(fake_openai, provider=provider), tools=[READ_TOOL, STRICT_TOOL])
    assert all("strict" not in tool["function"] for tool in body["tools"])


async def test_developer_role_for_reasoning_models_system_otherwise(fake_openai: FakeOpenAI) -> None:
    o3 = await sent_body(fake_openai, model_for(fake_openai, "o3", provider="openai"))
    gpt = await sent_body(fake_openai, model_for(fake_openai, "gpt-4o", provider="openai"))
    assert o3["messages"][0] == {"role": "developer", "content": "You are terse."}
    assert gpt["messages"][0] == {"role": "system", "content": "You are terse."}


async def test_max_tokens_field_per_provider(fake_openai: FakeOpenAI) -> None:
    openai_body = await sent_body(fake_openai, model_for(fake_openai, "gpt-4o", provider="openai"), max_tokens=99)
    deepseek_body = await sent_body(
        fake_openai, model_for(fake_openai, "deepseek-chat", provider="deepseek"), max_tokens=77
    )
    assert openai_body["max_completion_tokens"] == 99 and "max_tokens" not in openai_body
    assert deepseek_body["max_tokens"] == 77 and "max_completion_tokens" not in deepseek_body


@pytest.mark.parametrize(
    ("choice", "sent"),
    [("auto", "auto"), ("required", "required"), ("read", {"type": "function", "function": {"name": "read"}})],
)
async def test_tool_choice(fake_openai: FakeOpenAI, choice: str, sent: Any) -> None:
    body = await sent_body(fake_openai, model_for(fake_openai), tools=[READ_TOOL], tool_choice=choice)
    assert body["tool_choice"] == sent


async def test_no_tools_means_no_tools_and_no_tool_choice(fake_openai: FakeOpenAI) -> None:
    body = await sent_body(fake_openai, model_for(fake_openai), tool_choice="required")
    assert "tools" not in body and "tool_choice" not in body


async def test_reasoning_effort_for_openai_reasoning_models(fake_openai: FakeOpenAI) -> None:
    o3 = await sent_body(fake_openai, model_for(fake_openai, "o3", provider="openai"), reasoning_effort="high")
    gpt = await sent_body(fake_openai, model_for(fake_openai, "gpt-4o", provider="openai"), reasoning_effort="high")
    assert o3["reasoning_effort"] == "high"
    assert "reasoning_effort" not in gpt


@pytest.mark.parametrize(("effort", "thinking"), [("high", {"type": "enabled"}), ("none", {"type": "disabled"})])
async def test_deepseek_thinking_parameter(fake_openai: FakeOpenAI, effort: str, thinking: Any) -> None:
    model = model_for(fake_openai, "deepseek-chat", provider="deepseek")
    body = await sent_body(fake_openai, model, reasoning_effort=effort)
    assert body["thinking"] == thinking and "reasoning_effort" not in body
    assert "thinking" not in await sent_body(fake_openai, model)


async def test_temperature_extra_body_and_usage_option(fake_openai: FakeOpenAI) -> None:
    body = await sent_body(fake_openai, model_for(fake_openai), temperature=0.2, extra_body={"top_k": 5, "seed": 1})
    assert (body["temperature"], body["top_k"], body["seed"]) == (0.2, 5, 1)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    no_usage = model_for(fake_openai, compat={"supports_usage_in_streaming": False})
    assert "stream_options" not in await sent_body(fake_openai, no_usage)


# --------------------------------------------------------------------------- history replay


def assistant(*content: Any, stop_reason: Any = "tool_use", provider: str = "llamacpp") -> AssistantMessage:
    blocks = [TextContent(item) if isinstance(item, str) else item for item in content]
    return AssistantMessage(blocks, stop_reason=stop_reason, model="gpt-4o-mini", provider=provider)


def result(call_id: str, *content: Any, name: str = "read") -> ToolResultMessage:
    blocks = [TextContent(item) if isinstance(item, str) else item for item in content]
    return ToolResultMessage(call_id, name, blocks)


async def replayed(server: FakeOpenAI, model: Model, history: list[Message]) -> list[dict[str, Any]]:
    body = await sent_body(server, model, messages=history, system_prompt=None)
    return body["messages"]  # type: ignore[no-any-return]


async def test_replay_tool_calls_as_json_strings_and_results_as_tool_messages(fake_openai: FakeOpenAI) -> None:
    history: list[Message] = [
        UserMessage("Read two files"),
        assistant("Reading.", ToolCall("c1", "read", {"path": "a"}), ToolCall("c2", "read", {"path": "b", "limit": 2})),
        result("c1", "A text"),
        result("c2", "B text"),
        assistant("Done.", stop_reason="stop"),
        UserMessage("Thanks"),
    ]
    messages = await replayed(fake_openai, model_for(fake_openai), history)
    assert messages == [
        {"role": "user", "content": "Read two files"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}},
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "b", "limit": 2}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A text"},
        {"role": "tool", "tool_call_id": "c2", "content": "B text"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Thanks"},
    ]


async def test_replay_broken_raw_arguments_as_valid_json(fake_openai: FakeOpenAI) -> None:
    broken = ToolCall("c1", "read", {"path": "a"}, raw_arguments='{"path": "a",, ')
    messages = await replayed(
        fake_openai, model_for(fake_openai), [UserMessage("x"), assistant(broken), result("c1", "err")]
    )
    assert messages[1]["content"] == ""  # never null
    assert json.loads(messages[1]["tool_calls"][0]["function"]["arguments"]) == {"path": "a"}


async def test_deepseek_reasoner_replays_reasoning_content_on_every_assistant_message(fake_openai: FakeOpenAI) -> None:
    model = model_for(fake_openai, "deepseek-reasoner", provider="deepseek")
    history: list[Message] = [
        UserMessage("q1"),
        assistant(ThinkingContent("Think 1", "reasoning_content"), ToolCall("c1", "read", {}), provider="deepseek"),
        result("c1", "r1"),
        assistant("Plain answer", stop_reason="stop", provider="deepseek"),
        UserMessage("q2"),
    ]
    messages = await replayed(fake_openai, model, history)
    assert [message.get("reasoning_content") for message in messages if message["role"] == "assistant"] == [
        "Think 1",
        "",
    ]


async def test_thinking_replayed_only_under_the_same_providers_field(fake_openai: FakeOpenAI) -> None:
    model = model_for(fake_openai, provider="llamacpp")
    history: list[Message] = [
        UserMessage("q"),
        assistant(ThinkingContent("mine", "reasoning"), "A1", stop_reason="stop", provider="llamacpp"),
        UserMessage("q"),
        assistant(ThinkingContent("theirs", "reasoning_content"), "A2", stop_reason="stop", provider="deepseek"),
        UserMessage("q"),
    ]
    messages = await replayed(fake_openai, model, history)
    assert messages[1] == {"role": "assistant", "content": "A1", "reasoning": "mine"}
    assert messages[3] == {"role": "assistant", "content": "A2"}


async def test_orphan_tool_call_gets_no_result_provided_after_the_real_results(fake_openai: FakeOpenAI) -> None:
    history: list[Message] = [
        UserMessage("go"),
        assistant(ToolCall("c1", "read", {}), ToolCall("c2", "read", {})),
        result("c1", "one"),
        UserMessage("never mind"),
    ]
    messages = await replayed(fake_openai, model_for(fake_openai), history)
    assert [(message["role"], message.get("tool_call_id"), message["content"]) for message in messages[2:]] == [
        ("tool", "c1", "one"),
        ("tool", "c2", "No result provided"),
        ("user", None, "never mind"),
    ]


async def test_error_and_aborted_assistant_messages_are_not_replayed(fake_openai: FakeOpenAI) -> None:
    history: list[Message] = [
        UserMessage("first"),
        assistant("Half", ToolCall("c1", "read", {"pa": 1}), stop_reason="aborted"),
        UserMessage("second"),
        assistant("Oops", stop_reason="error"),
        result("c9", "stray result of a dropped call"),
        UserMessage("third"),
    ]
    messages = await replayed(fake_openai, model_for(fake_openai), history)
    assert messages == [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
        {"role": "user", "content": "third"},
    ]


async def test_images_in_tool_results_follow_as_one_user_message(fake_openai: FakeOpenAI) -> None:
    png, jpeg = ImageContent("iVBORw0KGgo=", "image/png"), ImageContent("/9j/4AAQ", "image/jpeg")
    history: list[Message] = [
        UserMessage([TextContent("Look:"), ImageContent("R0lGOD", "image/gif")]),
        assistant(ToolCall("c1", "shot", {}), ToolCall("c2", "shot", {})),
        result("c1", "Screenshot", png, name="shot"),
        result("c2", jpeg, name="shot"),
    ]
    messages = await replayed(fake_openai, model_for(fake_openai), history)
    assert messages[0]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "data:image/gif;base64,R0lGOD"}},
    ]
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "Screenshot"},
        {"role": "tool", "tool_call_id": "c2", "content": "(see attached image)"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
            ],
        },
    ]


async def test_smart_responder_answers_from_the_tool_result(fake_openai: FakeOpenAI) -> None:
    def responder(body: dict[str, Any]) -> Any:
        results = [message for message in body["messages"] if message["role"] == "tool"]
        if not results:
            return tool_call_chunks([("read", {"path": "secret.txt"})])
        return text_chunks(f"The file says: {results[-1]['content']}")

    fake_openai.responder = responder
    model = model_for(fake_openai)
    history: list[Message] = [UserMessage("What is in secret.txt?")]
    _, first = await collect(model, history, tools=[READ_TOOL])
    history += [first, result(first.tool_calls[0].id, "42")]
    _, second = await collect(model, history, tools=[READ_TOOL])
    assert first.tool_calls[0].arguments == {"path": "secret.txt"}
    assert second.text == "The file says: 42"
