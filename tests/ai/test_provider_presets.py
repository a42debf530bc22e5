"""Gemini and OpenRouter over their OpenAI-compatible endpoints, and the thinking knob of each provider:
what the real ``openai`` client sends to the scripted server, and how usage is read back."""

from __future__ import annotations

from typing import Any

import pytest
from fake_openai import FakeOpenAI, HTTPError, ToolCallSpec, chunk, text_chunks, tool_call_chunks, usage_dict
from pydantic import BaseModel

from pi_kernel.ai.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from pi_kernel.ai.models import KNOWN_PROVIDERS, Context, Model, StreamOptions, parse_model_spec
from pi_kernel.ai.overflow import is_context_overflow
from pi_kernel.ai.providers.remote import RetryPolicy, stream_openai_compatible
from pi_kernel.ai.tool import Tool


class Query(BaseModel):
    sql: str


QUERY = Tool("query", "Run SQL", Query)


def at(server: FakeOpenAI, spec: str) -> Model:
    """A preset's model, sent to the scripted server instead of the provider's URL."""
    return parse_model_spec(spec).with_(base_url=server.base_url)


async def answer(server: FakeOpenAI, model: Model, *responses: Any, **options: Any) -> AssistantMessage:
    server.enqueue(*(responses or [text_chunks("ok")]))
    history: list[Any] = options.pop("history", [UserMessage("hi")])
    context = Context("sys", history, options.pop("tools", None))
    options.setdefault("api_key", "test-key-0123456789")
    stream = stream_openai_compatible(model, context, StreamOptions(**options), retry_policy=RetryPolicy(0.01, 0.05))
    return await stream.result()


def test_presets_name_their_endpoint_and_key() -> None:
    gemini, openrouter = parse_model_spec("gemini:gemini-2.5-flash"), parse_model_spec("openrouter:openai/gpt-4o")
    assert gemini.resolved_base_url == "https://generativelanguage.googleapis.com/v1beta/openai/"
    assert gemini.resolved_api_key_env == "GEMINI_API_KEY" and gemini.resolved_context_window == 1_048_576
    assert openrouter.resolved_base_url == KNOWN_PROVIDERS["openrouter"][0]
    assert openrouter.resolved_api_key_env == "OPENROUTER_API_KEY"
    assert openrouter.resolved_context_window == 128_000  # looked up as its maker's id
    assert parse_model_spec("openrouter:anthropic/claude-sonnet-4.5").resolved_context_window == 200_000
    assert parse_model_spec("openrouter:anthropic/claude-sonnet-4.5").resolved_cost is None  # OpenRouter reports it
    assert parse_model_spec("gemini-2.5-pro").provider == "gemini"
    assert parse_model_spec("claude-haiku-4-5").provider == "anthropic"


async def test_gemini_gets_no_strict_key_no_empty_tools_and_reasoning_effort(fake_openai: FakeOpenAI) -> None:
    model = at(fake_openai, "gemini:gemini-2.5-flash")
    await answer(fake_openai, model, tools=[QUERY], reasoning_effort="low")
    body = fake_openai.last_body
    assert "strict" not in body["tools"][0]["function"] and body["reasoning_effort"] == "low"
    history = [
        UserMessage("hi"),
        AssistantMessage([ToolCall("c1", "query", {"sql": "select 1"})], stop_reason="tool_use", provider="gemini"),
        ToolResultMessage("c1", "query"),
    ]
    await answer(fake_openai, model, history=history)  # no tools active, tool calls in the history
    assert "tools" not in fake_openai.last_body


async def test_gemini_output_counts_the_thinking_tokens_outside_completion(fake_openai: FakeOpenAI) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 420}  # 300 thinking tokens
    chunks = [*text_chunks("ok", usage=False), chunk(usage=usage, no_choices=True)]
    message = await answer(fake_openai, at(fake_openai, "gemini:gemini-2.5-flash"), chunks)
    assert (message.usage.input, message.usage.output) == (100, 320)
    assert message.usage.cost == pytest.approx((100 * 0.3 + 320 * 2.5) / 1e6)


async def test_openrouter_reasoning_knob_reasoning_field_and_reported_cost(fake_openai: FakeOpenAI) -> None:
    usage = {**usage_dict(50, 10), "cost": 0.00123}
    chunks = [*text_chunks("Fine.", reasoning="Thinking it over.", reasoning_field="reasoning", usage=False)]
    chunks.append(chunk(usage=usage, no_choices=True))
    message = await answer(fake_openai, at(fake_openai, "openrouter:vendor/new-model"), chunks, reasoning_effort="high")
    assert fake_openai.last_body["reasoning"] == {"effort": "high"} and "reasoning_effort" not in fake_openai.last_body
    thinking = message.content[0]
    assert getattr(thinking, "thinking", None) == "Thinking it over." and message.text == "Fine."
    assert message.usage.cost == pytest.approx(0.00123)  # no table price: OpenRouter's own figure


@pytest.mark.parametrize(
    ("spec", "field"),
    [("openai:o3", "reasoning_effort"), ("gemini:gemini-2.5-pro", "reasoning_effort"), ("openrouter:x/y", "reasoning")],
)
async def test_thinking_off_sends_no_knob_where_reasoning_cannot_be_switched_off(
    fake_openai: FakeOpenAI, spec: str, field: str
) -> None:
    await answer(fake_openai, at(fake_openai, spec), reasoning_effort="off")
    assert field not in fake_openai.last_body


async def test_deepseek_thinking_off_disables_the_reasoner(fake_openai: FakeOpenAI) -> None:
    await answer(fake_openai, at(fake_openai, "deepseek:deepseek-chat"), reasoning_effort="off")
    assert fake_openai.last_body["thinking"] == {"type": "disabled"}


async def test_openrouter_tool_calls_stream_as_elsewhere(fake_openai: FakeOpenAI) -> None:
    chunks = tool_call_chunks([ToolCallSpec("query", {"sql": "select 2"}, "call_or")])
    message = await answer(
        fake_openai, at(fake_openai, "openrouter:anthropic/claude-sonnet-4.5"), chunks, tools=[QUERY]
    )
    assert message.stop_reason == "tool_use" and message.tool_calls[0].arguments == {"sql": "select 2"}
    assert "strict" in fake_openai.last_body["tools"][0]["function"]  # OpenRouter takes the key


GEMINI_OVERFLOW = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."


async def test_gemini_error_lists_keep_their_message_and_its_overflow_is_recognised(fake_openai: FakeOpenAI) -> None:
    """Gemini answers errors as a JSON list; its overflow text must trigger compaction like the others."""
    model = at(fake_openai, "gemini:gemini-2.5-flash")
    error = {"error": {"code": 400, "message": GEMINI_OVERFLOW, "status": "INVALID_ARGUMENT"}}
    message = await answer(fake_openai, model, HTTPError(400, body=[error]))
    assert message.stop_reason == "error" and message.error_message == f"400 {GEMINI_OVERFLOW}"
    assert is_context_overflow(message.error_message)


async def test_a_retry_after_over_a_minute_gives_up_with_the_servers_message(fake_openai: FakeOpenAI) -> None:
    model = at(fake_openai, "openrouter:openai/gpt-4o")
    refusal = HTTPError(429, headers={"Retry-After": "3600"}, message="Daily limit reached")
    message = await answer(fake_openai, model, refusal, text_chunks("ok"), max_retries=3)
    assert message.stop_reason == "error" and message.error_message == "429 Daily limit reached"
    assert len(fake_openai.requests) == 1


SIGNATURE = {"google": {"thought_signature": "CiQBVKhc7sig=="}}


def gemini_refuses_unsigned_history(body: dict[str, Any]) -> Any:
    """Gemini 3's rule: every assistant tool call of the history carries the thought signature it was given."""
    for message in body["messages"]:
        for call in message.get("tool_calls") or []:
            if call.get("extra_content") != SIGNATURE:
                error = {"code": 400, "message": "Function call is missing a thought_signature", "status": "INVALID"}
                return HTTPError(400, body=[{"error": error}])
    return text_chunks("done")


async def test_gemini_thought_signatures_go_back_with_their_tool_calls(fake_openai: FakeOpenAI) -> None:
    from pi_kernel.ai.messages import TextContent, message_from_dict, to_dict

    model = at(fake_openai, "gemini:gemini-3-pro-preview")
    chunks = tool_call_chunks([ToolCallSpec("query", {"sql": "select 1"}, "call_g")])
    first_call = next(item for item in chunks if item["choices"] and item["choices"][0]["delta"].get("tool_calls"))
    first_call["choices"][0]["delta"]["tool_calls"][0]["extra_content"] = SIGNATURE
    call_message = await answer(fake_openai, model, chunks, tools=[QUERY])
    [call] = call_message.tool_calls
    assert call.extra_content == SIGNATURE and call.arguments == {"sql": "select 1"}
    saved = message_from_dict(to_dict(call_message))  # %pi save / load keeps it
    assert isinstance(saved, AssistantMessage) and saved.tool_calls[0].extra_content == SIGNATURE
    fake_openai.responder = gemini_refuses_unsigned_history
    history = [UserMessage("hi"), saved, ToolResultMessage("call_g", "query", [TextContent("1")])]
    context = Context("sys", history, [QUERY])
    options = StreamOptions(api_key="test-key-0123456789")
    answered = await stream_openai_compatible(model, context, options, retry_policy=RetryPolicy(0.01, 0.05)).result()
    assert answered.stop_reason == "stop", answered.error_message
    assert fake_openai.last_body["messages"][2]["tool_calls"][0]["extra_content"] == SIGNATURE
    other = AssistantMessage([ToolCall("call_g", "query", {"sql": "1"}, extra_content=SIGNATURE)], provider="gemini")
    await answer(fake_openai, at(fake_openai, "openai:gpt-4o"), history=[UserMessage("hi"), other], tools=[QUERY])
    assert "extra_content" not in fake_openai.last_body["messages"][2]["tool_calls"][0]  # only to its own provider


@pytest.mark.parametrize(
    ("spec", "effort", "sent"),
    [
        ("gemini:gemini-2.5-flash", "off", "none"),  # Flash and Flash-Lite can stop thinking
        ("gemini:gemini-2.5-flash-lite", "off", "none"),
        ("gemini:gemini-3-pro-preview", "off", None),  # cannot: its default stays
        ("gemini:gemini-2.0-flash", "high", None),  # does not think, refuses the knob
        ("gemini:gemini-3-pro-preview", "high", "high"),
    ],
)
async def test_gemini_thinking_knob_follows_the_model(
    fake_openai: FakeOpenAI, spec: str, effort: str, sent: str | None
) -> None:
    await answer(fake_openai, at(fake_openai, spec), reasoning_effort=effort)
    assert fake_openai.last_body.get("reasoning_effort") == sent
