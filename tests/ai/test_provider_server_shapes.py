"""Shapes real servers send that pi accepts (issue 13, point 3), through the real ``openai`` client.

Each test talks HTTP + SSE to ``fake_openai`` and, where a recording fits,
replays a real stream (``tests/data/recorded-streams``) with only the field
under test changed, so the rest of the shape is what a live API sent.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fake_openai import Chunks, FakeOpenAI, ToolCallSpec, chunks_of_sse, recorded_stream, text_chunks, tool_call_chunks
from scripted_model import echo_tool

from pi_kernel.agent import AgentLoopConfig, ShouldStopAfterTurnContext, run_agent_loop
from pi_kernel.ai.messages import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, UserMessage
from pi_kernel.ai.models import AbortController, AbortSignal, Context, Model, StreamOptions
from pi_kernel.ai.providers.remote import stream_openai_compatible
from pi_kernel.ai.tool import Tool, validate_tool_arguments

WRITE_TOOL = Tool(
    "write",
    "Write a file.",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
)
STRICT_TOOL = Tool("write_strict", "Write a file.", WRITE_TOOL.parameters, constrained_sampling=True)


def model_for(server: FakeOpenAI, provider: str = "llamacpp", model_id: str = "fake-model") -> Model:
    return Model(model_id, provider=provider, base_url=server.base_url)


async def stream_with_previews(
    model: Model, messages: list[Message] | None = None, tools: list[Tool] | None = None
) -> tuple[list[dict[str, Any]], AssistantMessage]:
    """Stream one answer; a frozen copy of the tool call's arguments after every ``toolcall_delta``."""
    context = Context("You are terse.", messages or [UserMessage("go")], tools)
    stream = stream_openai_compatible(model, context, StreamOptions(api_key="sk-test"))
    previews = []
    async for event in stream:
        if event.type == "toolcall_delta":
            block = event.partial.content[event.content_index]
            assert isinstance(block, ToolCall)
            previews.append(copy.deepcopy(block.arguments))
    return previews, await stream.result()


def recorded(name: str) -> list[dict[str, Any]]:
    return chunks_of_sse(recorded_stream(name))


def only_call(message: AssistantMessage) -> ToolCall:
    (call,) = message.tool_calls
    return call


# ------------------------------------------------------------------ raw control characters, invalid escapes

# What a local model writes for write(path="C:\Users\x\data.txt", content="def f():\n\treturn 1\n"): a
# Windows path with unescaped backslashes (\U, \x and \d are no JSON escapes) and a raw newline and tab.
MODEL_TEXT = '{"path": "C:\\Users\\x\\data.txt", "content": "def f():\n\treturn 1\n"}'
MEANT = {"path": "C:\\Users\\x\\data.txt", "content": "def f():\n\treturn 1\n"}


@pytest.mark.parametrize("style", ["openai", "llamacpp", "ollama"])
async def test_raw_control_characters_and_invalid_escapes_are_kept_as_text(fake_openai: FakeOpenAI, style: str) -> None:
    fake_openai.enqueue(tool_call_chunks([ToolCallSpec("write", MODEL_TEXT)], style=style, parts=12))
    previews, message = await stream_with_previews(model_for(fake_openai), tools=[WRITE_TOOL])
    call = only_call(message)
    assert message.stop_reason == "tool_use" and message.error_message is None
    assert call.arguments == MEANT and call.raw_arguments is None
    assert validate_tool_arguments(WRITE_TOOL, call) == MEANT
    # The live preview goes on past the first raw newline and shows the whole value at the end.
    assert previews[-1] == MEANT
    assert any(preview.get("content", "").startswith("def f():\n\tre") for preview in previews)
    # The replayed history carries valid JSON (the provider would reject the next request otherwise).
    fake_openai.enqueue(text_chunks("Written."))
    await stream_with_previews(model_for(fake_openai), [UserMessage("go"), message], tools=[WRITE_TOOL])
    (assistant,) = [sent for sent in fake_openai.last_body["messages"] if sent["role"] == "assistant"]
    replayed = assistant["tool_calls"][0]["function"]["arguments"]
    assert replayed == '{"path": "C:\\\\Users\\\\x\\\\data.txt", "content": "def f():\\n\\treturn 1\\n"}'


async def test_a_recorded_openai_call_with_a_raw_tab_and_a_backslash_in_its_arguments(
    fake_openai: FakeOpenAI,
) -> None:
    """The real gpt-4o-mini stream of ``get_capital {"country": "UK"}`` (five argument fragments), with
    the ``UK`` fragment replaced by text holding a raw tab and an invalid escape."""
    chunks = recorded("openai_tool_call_get_capital")
    fragments = [c for c in chunks if c["choices"] and (c["choices"][0]["delta"].get("tool_calls") or [{}])[0]]
    (uk,) = [c for c in fragments if c["choices"][0]["delta"]["tool_calls"][0]["function"].get("arguments") == "UK"]
    uk["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = "U\tK \\x"
    fake_openai.enqueue(Chunks(chunks))
    previews, message = await stream_with_previews(model_for(fake_openai, "openai", "gpt-4o-mini"))
    assert only_call(message).arguments == {"country": "U\tK \\x"} and only_call(message).raw_arguments is None
    assert previews[-1] == {"country": "U\tK \\x"} and message.usage.total_tokens == 68


# ------------------------------------------------------------------ finish reasons


async def test_finish_reason_end_is_a_normal_stop_in_a_recorded_deepseek_stream(fake_openai: FakeOpenAI) -> None:
    """The real deepseek-reasoner stream (reasoning, then text, ``stop`` with the usage) ending in ``end``."""
    chunks = recorded("deepseek_reasoner_thinking_text")
    finishing = [c for c in chunks if c["choices"] and c["choices"][0].get("finish_reason")]
    assert [c["choices"][0]["finish_reason"] for c in finishing] == ["stop"]
    finishing[0]["choices"][0]["finish_reason"] = "end"
    fake_openai.enqueue(Chunks(chunks))
    _, message = await stream_with_previews(model_for(fake_openai, "deepseek", "deepseek-reasoner"))
    assert (message.stop_reason, message.error_message) == ("stop", None)
    assert message.text == "Hello there! 😊 How can I help you today?" and message.usage.total_tokens == 218


@pytest.mark.parametrize(
    ("finish_reason", "expected"),
    [("end", "stop"), ("END", "stop"), ("eos_token", "stop"), ("stop_sequence", "stop"), ("model_length", "length")],
)
async def test_other_names_of_a_normal_stop_or_of_the_length_limit(
    fake_openai: FakeOpenAI, finish_reason: str, expected: str
) -> None:
    fake_openai.enqueue(text_chunks("Done.", finish_reason=finish_reason))
    _, message = await stream_with_previews(model_for(fake_openai))
    assert (message.stop_reason, message.error_message, message.text) == (expected, None, "Done.")


async def test_finish_reason_end_after_tool_calls_runs_them(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(tool_call_chunks([("write", MEANT)], finish_reason="end"))
    _, message = await stream_with_previews(model_for(fake_openai), tools=[WRITE_TOOL])
    assert message.stop_reason == "tool_use" and only_call(message).arguments == MEANT


# ------------------------------------------------------------------ strict


@pytest.mark.parametrize(
    ("provider", "model_id"),
    [("deepseek", "deepseek-chat"), ("openai-compatible", "qwen3"), ("ollama", "qwen3"), ("vllm", "qwen3")],
)
async def test_no_strict_key_for_providers_without_strict_mode(
    fake_openai: FakeOpenAI, provider: str, model_id: str
) -> None:
    fake_openai.enqueue(text_chunks("Hi."))
    await stream_with_previews(model_for(fake_openai, provider, model_id), tools=[WRITE_TOOL, STRICT_TOOL])
    functions = [tool["function"] for tool in fake_openai.last_body["tools"]]
    assert [function["name"] for function in functions] == ["write", "write_strict"]
    assert all("strict" not in function for function in functions)
    assert functions[1]["parameters"] == STRICT_TOOL.json_schema()  # not the strict form either


async def test_strict_stays_where_it_is_supported(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(text_chunks("Hi."))
    await stream_with_previews(model_for(fake_openai, "openai", "gpt-4o"), tools=[WRITE_TOOL, STRICT_TOOL])
    assert [tool["function"]["strict"] for tool in fake_openai.last_body["tools"]] == [False, True]


# ------------------------------------------------------------------ tools: [] with tool history


async def history_from_a_recorded_tool_call(server: FakeOpenAI, model: Model) -> list[Message]:
    """user → the real get_capital call (replayed) → its result → a new question."""
    server.enqueue(recorded_stream("openai_tool_call_get_capital"))
    get_capital = Tool("get_capital", "The capital of a country.", {"type": "object", "properties": {}})
    _, called = await stream_with_previews(model, [UserMessage("Capital of the UK?")], [get_capital])
    call = only_call(called)
    result = ToolResultMessage(call.id, call.name, [TextContent("London")])
    return [UserMessage("Capital of the UK?"), called, result, UserMessage("Now without tools: thanks!")]


@pytest.mark.parametrize("tools", [None, []])
@pytest.mark.parametrize("provider", ["openai-compatible", "ollama", "llamacpp", "openrouter"])
async def test_tools_empty_list_when_the_history_has_tool_calls_but_no_tool_is_active(
    fake_openai: FakeOpenAI, provider: str, tools: list[Tool] | None
) -> None:
    model = model_for(fake_openai, provider)
    history = await history_from_a_recorded_tool_call(fake_openai, model)
    fake_openai.enqueue(text_chunks("You are welcome."))
    await stream_with_previews(model, history, tools)
    body = fake_openai.last_body
    assert body["tools"] == [] and "tool_choice" not in body
    assert [message["role"] for message in body["messages"]] == ["system", "user", "assistant", "tool", "user"]


async def test_no_tools_key_without_tool_history(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(text_chunks("Hi."))
    await stream_with_previews(model_for(fake_openai, "openai-compatible"), [UserMessage("hi")], [])
    assert "tools" not in fake_openai.last_body


@pytest.mark.parametrize(
    ("provider", "model_id"), [("openai", "gpt-4o-mini"), ("deepseek", "deepseek-chat"), ("vllm", "q")]
)
async def test_no_empty_tools_for_servers_that_reject_an_empty_array(
    fake_openai: FakeOpenAI, provider: str, model_id: str
) -> None:
    """OpenAI answers 400 ``empty_array`` to ``tools: []``, and so do DeepSeek and vLLM."""
    model = model_for(fake_openai, provider, model_id)
    history = await history_from_a_recorded_tool_call(fake_openai, model)
    fake_openai.enqueue(text_chunks("You are welcome."))
    await stream_with_previews(model, history, None)
    assert "tools" not in fake_openai.last_body


# ------------------------------------------------------------------ should_stop_after_turn


async def test_should_stop_after_turn_gets_the_context_so_far_and_the_run_signal(fake_openai: FakeOpenAI) -> None:
    seen: list[tuple[list[str], list[str], bool]] = []
    signals: list[AbortSignal] = []

    def stop(ctx: ShouldStopAfterTurnContext, signal: AbortSignal) -> bool:
        assert isinstance(ctx, ShouldStopAfterTurnContext)
        roles = [message.role for message in ctx.context.messages]
        seen.append((roles, [message.role for message in ctx.new_messages], ctx.tool_results[0].is_error))
        signals.append(signal)
        return ctx.tool_results[0].tool_call_id == "call_0"

    fake_openai.enqueue(tool_call_chunks([("echo", {"value": "hi"})]), text_chunks("never asked"))
    controller = AbortController()
    history: list[Message] = [UserMessage("earlier"), AssistantMessage([TextContent("earlier answer")])]
    config = AgentLoopConfig(
        model_for(fake_openai), should_stop_after_turn=stop, stream_options=StreamOptions(api_key="k")
    )
    added = await run_agent_loop(
        [UserMessage("echo hi")], Context("", history, [echo_tool()]), config, lambda event: None, controller.signal
    )
    assert seen == [
        (["user", "assistant", "user", "assistant", "tool_result"], ["user", "assistant", "tool_result"], False)
    ]
    assert signals == [controller.signal]
    assert [message.role for message in added] == ["user", "assistant", "tool_result"]
    assert len(fake_openai.chat_requests) == 1  # stopped: the second answer was never requested


def test_the_local_server_repairs_replayed_tool_call_arguments_the_same_way() -> None:
    """``serve-local`` reads a client's history: a call whose arguments hold a raw newline is kept, not lost."""
    from pi_kernel.ai.providers.local_server import context_from_request

    call = {"id": "c1", "type": "function", "function": {"name": "write", "arguments": MODEL_TEXT}}
    body = {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": [call]}]}
    (_, assistant) = context_from_request(body).messages
    assert isinstance(assistant, AssistantMessage)
    assert only_call(assistant).arguments == MEANT and only_call(assistant).raw_arguments is None
