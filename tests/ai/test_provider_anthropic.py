"""The native Anthropic provider through the real ``anthropic`` SDK against a scripted Messages SSE server.

The prompt-cache model of the scripted Anthropic server (``fake_anthropic.PromptCache``), which
``benchmarks/prompt_caching.py`` measures with: what the provider's breakpoints let a session read back.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest
from fake_anthropic import (
    Events,
    FakeAnthropic,
    HTTPError,
    PromptCache,
    error_event,
    message_events,
    redacted,
    thinking,
    tool_use,
)
from pydantic import BaseModel

from pi_kernel.ai.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_kernel.ai.models import AbortController, AssistantMessageEvent, Context, Model, StreamOptions, parse_model_spec
from pi_kernel.ai.overflow import is_context_overflow
from pi_kernel.ai.providers.anthropic_format import build_anthropic_body
from pi_kernel.ai.providers.remote import RetryPolicy, stream_anthropic
from pi_kernel.ai.stream import stream
from pi_kernel.ai.tool import Tool

FAST_RETRY = RetryPolicy(base_delay=0.01, max_delay=0.05)
KEY = "sk-ant-test-0123456789abcdef"


class ReadFile(BaseModel):
    path: str
    limit: int = 10


READ_TOOL = Tool("read", "Read a file", ReadFile)


def claude(server: FakeAnthropic, model_id: str = "claude-sonnet-4-5") -> Model:
    return Model(model_id, provider="anthropic", base_url=server.base_url)


async def collect(
    model: Model,
    messages: list[Message] | None = None,
    *,
    tools: list[Tool] | None = None,
    system_prompt: str | None = "You are terse.",
    **options: Any,
) -> tuple[list[AssistantMessageEvent], AssistantMessage]:
    options.setdefault("api_key", KEY)
    context = Context(system_prompt, messages if messages is not None else [UserMessage("hi")], tools)
    result = stream_anthropic(model, context, StreamOptions(**options), retry_policy=FAST_RETRY)
    events = [event async for event in result]
    return events, await result.result()


def sent_key(server: FakeAnthropic, number: int = 0) -> str:
    """The key as the SDK sent it (``x-api-key``, or a bearer token in newer SDKs)."""
    headers = server.requests[number].headers
    return headers.get("x-api-key") or headers.get("authorization", "")


def types_of(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events if not event.type.endswith("_delta")]


# --------------------------------------------------------------------------- streaming


async def test_text_streams_as_one_block_with_usage_and_cost(fake_anthropic: FakeAnthropic) -> None:
    usage = {"input_tokens": 100, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 300}
    fake_anthropic.enqueue(Events(message_events("Hello there, world", usage={**usage, "output_tokens": 7})))
    events, message = await collect(claude(fake_anthropic))
    assert types_of(events) == ["start", "text_start", "text_end", "done"]
    deltas = [event.delta for event in events if event.type == "text_delta"]
    assert len(deltas) == 3 and "".join(deltas) == "Hello there, world"
    assert message.text == "Hello there, world" and message.stop_reason == "stop"
    assert (message.usage.input, message.usage.output) == (100, 7)
    assert (message.usage.cache_read, message.usage.cache_write) == (2000, 300)
    assert message.usage.total_tokens == 2407
    # claude-sonnet-4-5: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million
    assert message.usage.cost == pytest.approx((100 * 3 + 7 * 15 + 2000 * 0.3 + 300 * 3.75) / 1e6)
    assert KEY in sent_key(fake_anthropic) and fake_anthropic.requests[0].path == "/v1/messages"


async def test_tool_input_json_streams_into_growing_arguments(fake_anthropic: FakeAnthropic) -> None:
    arguments = {"path": "notes/today.txt", "limit": 40}
    fake_anthropic.enqueue(Events(message_events("Reading.", tool_use("read", arguments, "toolu_9"), parts=8)))
    result = stream_anthropic(
        claude(fake_anthropic), Context(None, [UserMessage("go")], [READ_TOOL]), StreamOptions(api_key=KEY)
    )
    snapshots = []
    events = []
    async for event in result:
        events.append(event)
        if event.type == "toolcall_delta":
            call = event.partial.content[event.content_index or 0]
            assert isinstance(call, ToolCall)
            snapshots.append(copy.deepcopy(call.arguments))
    message = await result.result()
    assert types_of(events) == ["start", "text_start", "text_end", "toolcall_start", "toolcall_end", "done"]
    assert len(snapshots) == 8 and snapshots[-1] == arguments
    assert any(snapshot and snapshot != arguments for snapshot in snapshots)  # partial values shown live
    assert message.stop_reason == "tool_use"
    [call] = message.tool_calls
    assert (call.id, call.name, call.arguments, call.raw_arguments) == ("toolu_9", "read", arguments, None)
    end = next(event for event in events if event.type == "toolcall_end")
    assert end.tool_call is call and end.content_index == 1


async def test_tool_without_parameters_and_broken_json(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Events(message_events(tool_use("now", "", "toolu_a"), tool_use("read", '{"path": "x"', "toolu_b")))
    )
    _, message = await collect(claude(fake_anthropic), tools=[READ_TOOL])
    empty, broken = message.tool_calls
    assert empty.arguments == {} and empty.raw_arguments is None
    assert broken.raw_arguments == '{"path": "x"' and broken.arguments == {"path": "x"}


@pytest.mark.parametrize(
    ("api_reason", "stop_reason"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop"), ("pause_turn", "stop")],
)
async def test_stop_reasons_are_mapped(fake_anthropic: FakeAnthropic, api_reason: str, stop_reason: str) -> None:
    fake_anthropic.enqueue(Events(message_events("Cut", stop_reason=api_reason)))
    _, message = await collect(claude(fake_anthropic))
    assert message.stop_reason == stop_reason and message.error_message is None


async def test_refusal_ends_in_error_keeping_the_text(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Events(message_events("I can't", stop_reason="refusal")))
    _, message = await collect(claude(fake_anthropic))
    assert message.stop_reason == "error" and "refusal" in (message.error_message or "")
    assert message.text == "I can't"


# --------------------------------------------------------------------------- thinking


async def test_thinking_streams_with_its_signature_and_is_replayed_exactly(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        Events(message_events(thinking("Let me look at the file.", "sig-XYZ=="), tool_use("read", {"path": "a"})))
    )
    fake_anthropic.enqueue(Events(message_events("Done.")))
    model = claude(fake_anthropic)
    events, first = await collect(model, tools=[READ_TOOL], reasoning_effort="medium")
    assert types_of(events) == ["start", "thinking_start", "thinking_end", "toolcall_start", "toolcall_end", "done"]
    assert "".join(e.delta or "" for e in events if e.type == "thinking_delta") == "Let me look at the file."
    block = first.content[0]
    assert isinstance(block, ThinkingContent) and block.signature == "sig-XYZ==" and not block.redacted
    body = fake_anthropic.bodies[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert fake_anthropic.requests[0].headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert body["max_tokens"] == model.max_tokens + 8192

    result = ToolResultMessage("toolu_01", "read", [TextContent("contents")])
    await collect(model, [UserMessage("hi"), first, result], tools=[READ_TOOL], reasoning_effort="medium")
    replayed = fake_anthropic.bodies[1]["messages"]
    assert [message["role"] for message in replayed] == ["user", "assistant", "user"]
    assert replayed[1]["content"] == [
        {"type": "thinking", "thinking": "Let me look at the file.", "signature": "sig-XYZ=="},
        {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "a"}},
    ]
    tool_result = replayed[2]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "toolu_01"
    assert tool_result["content"][0] == {"type": "text", "text": "contents"}


async def test_redacted_thinking_goes_back_as_its_data(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Events(message_events(redacted("opaque=="), tool_use("read", {"path": "a"}))))
    fake_anthropic.enqueue(Events(message_events("ok")))
    model = claude(fake_anthropic)
    _, first = await collect(model, tools=[READ_TOOL], reasoning_effort="high")
    block = first.content[0]
    assert isinstance(block, ThinkingContent) and block.redacted and block.signature == "opaque=="
    result = ToolResultMessage("toolu_01", "read", [TextContent("x")])
    await collect(model, [UserMessage("hi"), first, result], tools=[READ_TOOL], reasoning_effort="high")
    assert fake_anthropic.bodies[1]["messages"][1]["content"][0] == {"type": "redacted_thinking", "data": "opaque=="}


async def test_thinking_of_other_providers_and_unsigned_thinking_is_not_replayed(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Events(message_events("ok")))
    deepseek = AssistantMessage(
        [ThinkingContent("hmm", "reasoning_content"), TextContent("Hi")], provider="deepseek", model="deepseek-chat"
    )
    unsigned = AssistantMessage([ThinkingContent("half"), TextContent("Yo")], provider="anthropic")
    await collect(claude(fake_anthropic), [UserMessage("a"), deepseek, UserMessage("b"), unsigned, UserMessage("c")])
    sent = fake_anthropic.bodies[0]["messages"]
    assert sent[1]["content"] == [{"type": "text", "text": "Hi"}]
    assert sent[3]["content"] == [{"type": "text", "text": "Yo"}]


@pytest.mark.parametrize("effort", [None, "off"])
async def test_thinking_off_sends_no_thinking_and_keeps_temperature(
    fake_anthropic: FakeAnthropic, effort: str | None
) -> None:
    fake_anthropic.enqueue(Events(message_events("ok")))
    await collect(claude(fake_anthropic), reasoning_effort=effort, temperature=0.0, max_tokens=100)
    body = fake_anthropic.bodies[0]
    assert "thinking" not in body and body["temperature"] == 0.0 and body["max_tokens"] == 100
    assert "anthropic-beta" not in fake_anthropic.requests[0].headers


async def test_thinking_drops_temperature_and_yields_to_a_forced_tool(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Events(message_events("ok")), Events(message_events(tool_use("read", {"path": "a"}))))
    await collect(claude(fake_anthropic), reasoning_effort="low", temperature=0.3, max_tokens=100)
    await collect(claude(fake_anthropic), tools=[READ_TOOL], reasoning_effort="low", tool_choice="read")
    thinking_on, forced = fake_anthropic.bodies
    assert thinking_on["thinking"]["budget_tokens"] == 2048 and "temperature" not in thinking_on
    assert thinking_on["max_tokens"] == 100 + 2048
    assert "thinking" not in forced and forced["tool_choice"] == {"type": "tool", "name": "read"}


@pytest.mark.parametrize(("provider", "steered"), [("anthropic", False), ("openai", False), ("anthropic", True)])
async def test_thinking_waits_for_a_tool_loop_that_started_without_it(
    fake_anthropic: FakeAnthropic, provider: str, steered: bool
) -> None:
    """``%%pi --tool X --thinking low``: the forced first call came without thinking (or from another model),
    so the API refuses thinking until that tool loop ends; the next user turn thinks again."""
    fake_anthropic.enqueue(Events(message_events("3")), Events(message_events("ok")))
    call = ToolCall("toolu_01", "read", {"path": "a"})
    forced = AssistantMessage([call], stop_reason="tool_use", provider=provider)
    loop: list[Message] = [UserMessage("add"), forced, ToolResultMessage("toolu_01", "read", [TextContent("3")])]
    if steered:  # a steering message typed while the tool ran follows the result
        loop.append(UserMessage("and say it in words"))
    model = claude(fake_anthropic)
    _, answer = await collect(model, loop, tools=[READ_TOOL], reasoning_effort="low")
    assert answer.stop_reason == "stop" and answer.text == "3", answer.error_message
    assert "thinking" not in fake_anthropic.bodies[0]
    _, later = await collect(model, [*loop, answer, UserMessage("again")], tools=[READ_TOOL], reasoning_effort="low")
    assert later.stop_reason == "stop", later.error_message
    assert fake_anthropic.bodies[1]["thinking"]["budget_tokens"] == 2048


async def test_the_fake_refuses_what_the_real_api_refuses(fake_anthropic: FakeAnthropic) -> None:
    """The scripted server holds the provider to the API's rules (so the tests above can fail)."""
    from fake_anthropic import api_rule_violation

    loop = [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
    ]
    thinking_on = {"type": "enabled", "budget_tokens": 1024}
    refused = api_rule_violation({"max_tokens": 2048, "thinking": thinking_on, "messages": loop})
    assert refused is not None and "Expected `thinking`" in refused.message
    assert api_rule_violation({"max_tokens": 1024, "thinking": thinking_on, "messages": loop[:1]}) is not None
    mark = {"type": "ephemeral"}
    five = [{"role": "user", "content": [{"type": "text", "text": str(n), "cache_control": mark}]} for n in range(5)]
    assert api_rule_violation({"max_tokens": 10, "messages": five}) is not None
    assert api_rule_violation({"max_tokens": 10, "messages": five[:4]}) is None


# --------------------------------------------------------------------------- request body and caching


async def test_cache_breakpoints_on_tools_system_and_latest_user_turn(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Events(message_events("ok")))
    earlier = AssistantMessage([TextContent("Earlier answer")], provider="anthropic")
    other_tool = Tool("write", "Write a file", ReadFile)
    await collect(
        claude(fake_anthropic),
        [UserMessage("first"), earlier, UserMessage([TextContent("second"), TextContent("more")])],
        tools=[READ_TOOL, other_tool],
        tool_choice="required",
    )
    body = fake_anthropic.bodies[0]
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][0]["input_schema"]["properties"]["path"] == {"type": "string"}
    assert body["tool_choice"] == {"type": "any"}
    messages = body["messages"]
    assert "cache_control" not in messages[0]["content"][-1]
    assert messages[2]["content"] == [
        {"type": "text", "text": "second"},
        {"type": "text", "text": "more", "cache_control": {"type": "ephemeral"}},
    ]
    breakpoints = str(body).count("cache_control")
    assert breakpoints == 3  # the API allows four


async def test_tool_ids_of_other_providers_are_made_acceptable_on_call_and_result(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(Events(message_events("ok")))
    call = ToolCall("call:1/abc", "read", {"path": "a"})
    history: list[Message] = [
        UserMessage("go"),
        AssistantMessage([call], stop_reason="tool_use", provider="openai"),
        ToolResultMessage("call:1/abc", "read", [TextContent("boom")], is_error=True),
    ]
    await collect(claude(fake_anthropic), history, tools=[READ_TOOL])
    sent = fake_anthropic.bodies[0]["messages"]
    assert sent[1]["content"][0]["id"] == "call_1_abc"
    assert sent[2]["content"][0]["tool_use_id"] == "call_1_abc" and sent[2]["content"][0]["is_error"] is True


# --------------------------------------------------------------------------- errors and retries


async def test_overloaded_is_retried_then_answers(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(HTTPError(529, "overloaded_error", "Overloaded"), Events(message_events("Fine now")))
    _, message = await collect(claude(fake_anthropic))
    assert message.text == "Fine now" and len(fake_anthropic.bodies) == 2


async def test_rate_limit_waits_for_retry_after(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        HTTPError(429, "rate_limit_error", "Slow down", {"retry-after": "0.4"}), Events(message_events("ok"))
    )
    started = time.monotonic()
    _, message = await collect(claude(fake_anthropic))
    assert message.text == "ok" and time.monotonic() - started >= 0.35  # not the 0.01 s backoff


@pytest.mark.parametrize(
    ("status", "kind", "headers"),
    [
        (529, "overloaded_error", {"x-should-retry": "false"}),
        (429, "rate_limit_error", {"retry-after": "3600"}),
    ],
)
async def test_no_retry_when_the_server_says_not_to_or_asks_for_over_a_minute(
    fake_anthropic: FakeAnthropic, status: int, kind: str, headers: dict[str, str]
) -> None:
    fake_anthropic.enqueue(HTTPError(status, kind, "Come back later", headers), Events(message_events("ok")))
    _, message = await collect(claude(fake_anthropic), max_retries=3)
    assert message.stop_reason == "error" and message.error_message == f"{status} {kind}: Come back later"
    assert len(fake_anthropic.bodies) == 1


async def test_rate_limit_that_persists_is_reported_with_its_type(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(*[HTTPError(429, "rate_limit_error", "Slow down") for _ in range(4)])
    _, message = await collect(claude(fake_anthropic), max_retries=3)
    assert message.stop_reason == "error" and message.error_message == "429 rate_limit_error: Slow down"
    assert len(fake_anthropic.bodies) == 4


async def test_overloaded_error_inside_the_stream_before_content_is_retried(fake_anthropic: FakeAnthropic) -> None:
    first = [*message_events("never")[:2], error_event("overloaded_error", "Overloaded")]
    fake_anthropic.enqueue(Events(first), Events(message_events("second try")))
    events, message = await collect(claude(fake_anthropic))
    assert message.text == "second try" and types_of(events).count("start") == 1


async def test_error_inside_the_stream_after_content_keeps_the_partial_text(fake_anthropic: FakeAnthropic) -> None:
    events = message_events("Partial answer here")
    cut = [*events[:5], error_event("overloaded_error", "Overloaded")]  # start, ping, block start, 2 deltas
    fake_anthropic.enqueue(Events(cut))
    _, message = await collect(claude(fake_anthropic))
    assert message.stop_reason == "error" and message.error_message == "stream overloaded_error: Overloaded"
    assert message.text and "Partial answer here".startswith(message.text)
    assert len(fake_anthropic.bodies) == 1


async def test_context_length_error_is_recognised_as_overflow(fake_anthropic: FakeAnthropic) -> None:
    text = "prompt is too long: 208000 tokens > 200000 maximum"
    fake_anthropic.enqueue(HTTPError(400, "invalid_request_error", text))
    _, message = await collect(claude(fake_anthropic))
    assert message.error_message == f"400 invalid_request_error: {text}"
    assert is_context_overflow(message.error_message) and len(fake_anthropic.bodies) == 1
    assert is_context_overflow("input length and `max_tokens` exceed context limit: 195000 + 16384 > 200000")


async def test_auth_error_is_not_retried_and_the_key_is_masked(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(HTTPError(401, "authentication_error", f"invalid x-api-key {KEY}"))
    _, message = await collect(claude(fake_anthropic))
    assert message.stop_reason == "error" and KEY not in (message.error_message or "")
    assert (message.error_message or "").startswith("401 authentication_error") and len(fake_anthropic.bodies) == 1


async def test_connection_lost_after_the_stop_reason_still_finishes(fake_anthropic: FakeAnthropic) -> None:
    events = message_events("All of it")
    fake_anthropic.enqueue(Events(events, disconnect_after=len(events) - 1))  # no message_stop
    _, message = await collect(claude(fake_anthropic))
    assert message.stop_reason == "stop" and message.text == "All of it"


async def test_no_key_for_anthropic_itself_makes_no_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    result = stream(Model("claude-sonnet-4-5", provider="anthropic"), Context(None, [UserMessage("hi")]))
    message = await result.result()
    assert message.stop_reason == "error" and "ANTHROPIC_API_KEY" in (message.error_message or "")


async def test_key_and_proxy_url_come_from_the_environment(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    fake_anthropic.enqueue(Events(message_events("via proxy")))
    model = parse_model_spec("anthropic:claude-haiku-4-5")
    assert (model.provider, model.id, model.resolved_context_window) == ("anthropic", "claude-haiku-4-5", 200_000)
    message = await stream(model, Context(None, [UserMessage("hi")])).result()
    assert message.text == "via proxy" and KEY in sent_key(fake_anthropic)


async def test_abort_mid_stream_keeps_partial_content(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(Events(message_events("a b c d e f g h", parts=8), delay=0.1))
    controller = AbortController()
    result = stream_anthropic(
        claude(fake_anthropic),
        Context(None, [UserMessage("hi")]),
        StreamOptions(api_key=KEY, signal=controller.signal),
        retry_policy=FAST_RETRY,
    )
    async for event in result:
        if event.type == "text_delta":
            controller.abort()
    message = await asyncio.wait_for(result.result(), 5)
    assert message.stop_reason == "aborted" and message.text.startswith("a")


def test_a_thinking_budget_stays_within_the_models_output_cap() -> None:
    from pi_kernel.ai.providers.anthropic_format import build_anthropic_body

    context = Context(None, [UserMessage("hi")])
    opus = build_anthropic_body(
        Model("claude-opus-4-1", provider="anthropic"), context, StreamOptions(reasoning_effort="high")
    )
    assert opus["max_tokens"] == 32_000 and opus["thinking"]["budget_tokens"] == 16_384
    small = build_anthropic_body(
        Model("claude-opus-4-1-20250805", provider="anthropic"),
        context,
        StreamOptions(max_tokens=31_500, reasoning_effort="high"),
    )
    assert small["max_tokens"] == 32_000 and small["thinking"]["budget_tokens"] == 16_384
    sonnet = build_anthropic_body(
        Model("claude-sonnet-4-5", provider="anthropic"), context, StreamOptions(reasoning_effort="high")
    )
    assert sonnet["max_tokens"] == 16_384 + 16_384


def test_opus_4_5_is_not_capped_as_an_opus_4() -> None:
    from pi_kernel.ai.providers.anthropic_format import build_anthropic_body, max_output_tokens

    for model_id in ("claude-opus-4-5", "claude-opus-4-5-20251101"):
        assert max_output_tokens(Model(model_id, provider="anthropic")) == 64_000
    assert max_output_tokens(Model("claude-opus-4-20250514", provider="anthropic")) == 32_000
    body = build_anthropic_body(
        Model("claude-opus-4-5", provider="anthropic"),
        Context(None, [UserMessage("hi")]),
        StreamOptions(max_tokens=40_000, reasoning_effort="high"),
    )
    assert body["max_tokens"] == 40_000 + 16_384 and body["thinking"]["budget_tokens"] == 16_384


async def test_interleaved_thinking_between_tool_calls_is_kept_and_replayed_in_order(
    fake_anthropic: FakeAnthropic,
) -> None:
    first = thinking("First the file.", "sig-1")
    second = thinking("Now the other one.", "sig-2")
    fake_anthropic.enqueue(
        Events(
            message_events(
                first, tool_use("read", {"path": "a"}, "toolu_a"), second, tool_use("read", {"path": "b"}, "toolu_b")
            )
        ),
        Events(message_events("Both read.")),
    )
    model = claude(fake_anthropic)
    _, message = await collect(model, tools=[READ_TOOL], reasoning_effort="low")
    assert [type(block).__name__ for block in message.content] == ["ThinkingContent", "ToolCall"] * 2
    results = [ToolResultMessage(call.id, "read", [TextContent(call.id)]) for call in message.tool_calls]
    await collect(model, [UserMessage("hi"), message, *results], tools=[READ_TOOL], reasoning_effort="low")
    replayed = fake_anthropic.bodies[1]["messages"]
    assert [(block["type"], block.get("signature") or block.get("id")) for block in replayed[1]["content"]] == [
        ("thinking", "sig-1"),
        ("tool_use", "toolu_a"),
        ("thinking", "sig-2"),
        ("tool_use", "toolu_b"),
    ]
    assert [block["tool_use_id"] for block in replayed[2]["content"]] == ["toolu_a", "toolu_b"]


# --------------------------------------------------------------------------- prompt cache model


CLAUDE = Model("claude-sonnet-4-5", provider="anthropic")
SYSTEM = "You are a careful data assistant. " * 200  # about 1,700 tokens: over the 1,024 minimum


def body(messages: list[Message], system: str = SYSTEM, cache: bool = True) -> dict:
    return build_anthropic_body(CLAUDE, Context(system, messages), StreamOptions(), cache=cache)


def history(turns: int) -> list[Message]:
    messages: list[Message] = []
    for turn in range(turns):
        call = ToolCall(f"toolu_{turn}", "read", {"page": turn})
        messages += [
            UserMessage(f"Read page {turn}."),
            AssistantMessage([call], stop_reason="tool_use", provider="anthropic"),
            ToolResultMessage(call.id, "read", [TextContent(f"page {turn}: " + "log line " * 100)]),
            AssistantMessage([TextContent("Read.")], provider="anthropic"),
        ]
    return messages


def test_each_request_reads_what_the_previous_one_wrote() -> None:
    cache = PromptCache()
    first = cache.usage_for(body(history(1)))
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 1024
    assert 0 < first["input_tokens"] < 20  # only the answer after the latest user turn sits after the breakpoint
    second = cache.usage_for(body([*history(1), UserMessage("And the next one?")]))
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert 0 < second["cache_creation_input_tokens"] < 50


def test_a_changed_system_prompt_or_no_breakpoints_read_nothing() -> None:
    cache = PromptCache()
    cache.usage_for(body(history(2)))
    changed = cache.usage_for(body([*history(2), UserMessage("next")], system=SYSTEM + "Today is Monday."))
    assert changed["cache_read_input_tokens"] == 0
    uncached = PromptCache().usage_for(body(history(2), cache=False))
    assert uncached["cache_read_input_tokens"] == uncached["cache_creation_input_tokens"] == 0


def test_short_prompts_are_not_cached() -> None:
    cache = PromptCache()
    short = cache.usage_for(body([UserMessage("hi")], system="Be brief."))
    assert short["cache_creation_input_tokens"] == 0 and short["input_tokens"] > 0


def parallel_calls(count: int) -> tuple[list[Message], list[Message]]:
    """A long conversation ending in a user question, and the same after ``count`` parallel tool calls."""
    before: list[Message] = []
    for turn in range(10):
        before += [UserMessage(f"Question {turn}: " + "context " * 300), AssistantMessage([TextContent("ok " * 50)])]
    before.append(UserMessage("Read all the files."))
    calls = [ToolCall(f"toolu_{n}", "read", {"path": f"f{n}"}) for n in range(count)]
    after = [*before, AssistantMessage(calls, stop_reason="tool_use", provider="anthropic")]
    after += [ToolResultMessage(call.id, "read", [TextContent("x" * 40)]) for call in calls]
    return before, after


def test_many_parallel_tool_calls_still_read_the_previous_requests_prefix() -> None:
    """Ten or more parallel calls add over 20 blocks: beyond the API's lookback from the latest breakpoint."""
    for count in (5, 10, 15):
        cache = PromptCache()
        before, after = parallel_calls(count)
        written = cache.usage_for(body(before))["cache_creation_input_tokens"]
        then = body(after)
        assert str(then).count("cache_control") <= 4
        usage = cache.usage_for(then)
        assert usage["cache_read_input_tokens"] >= written, count


def test_the_cache_minimum_follows_the_model_and_entries_expire_after_the_ttl() -> None:
    opus = build_anthropic_body(
        Model("claude-opus-4-5", provider="anthropic"), Context(SYSTEM, history(1)), StreamOptions()
    )
    assert PromptCache().usage_for(opus)["cache_creation_input_tokens"] == 0  # ~1,900 tokens: under 4,096
    cache = PromptCache()
    cache.usage_for(body(history(1)))
    cache.clock += 299
    assert cache.usage_for(body([*history(1), UserMessage("next")]))["cache_read_input_tokens"] > 1024
    cache.clock += 301
    assert cache.usage_for(body([*history(1), UserMessage("next")]))["cache_read_input_tokens"] == 0
