"""The public ``pi_kernel.ai`` surface, and ``stream()``'s promise never to raise."""

from __future__ import annotations

import asyncio
import typing
from collections.abc import AsyncIterator

import pytest
from fake_openai import FakeOpenAI, text_chunks

import pi_kernel.ai as ai
from pi_kernel.ai import (
    AbortController,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageStream,
    Context,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolArgumentsError,
    UserMessage,
    complete,
    parse_streaming_json,
    stream,
)
from pi_kernel.ai.tool import ToolSchemaError

CONTRACT_NAMES = [
    "TextContent",
    "ThinkingContent",
    "ImageContent",
    "ToolCall",
    "UserMessage",
    "AssistantMessage",
    "ToolResultMessage",
    "StopReason",
    "Usage",
    "Tool",
    "validate_tool_arguments",
    "ToolArgumentsError",
    "parse_streaming_json",
    "stream",
    "AssistantMessageStream",
    "AssistantMessageEvent",
    "Context",
    "Model",
]


def test_contract_names_are_exported() -> None:
    missing = [name for name in CONTRACT_NAMES if not hasattr(ai, name)]
    assert missing == []
    assert set(CONTRACT_NAMES) <= set(ai.__all__)
    assert typing.get_args(ai.StopReason) == ("stop", "length", "tool_use", "error", "aborted")
    assert issubclass(ToolArgumentsError, ValueError)


def test_parse_streaming_json_contract_examples() -> None:
    assert parse_streaming_json('{"a":"hel') == {"a": "hel"}
    assert parse_streaming_json("") == {}
    assert parse_streaming_json("garbage") == {}


def fake_model(server: FakeOpenAI) -> Model:
    return Model("fake-model", provider="openai-compatible", base_url=server.base_url)


async def test_stream_and_complete_reach_an_openai_compatible_server(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(text_chunks("Hello!"), text_chunks("Again."))
    context = Context("Be brief.", [UserMessage("hi")])
    events = [event async for event in stream(fake_model(fake_openai), context)]
    assert events[0].type == "start" and events[-1].type == "done"
    assert events[-1].partial.text == "Hello!"
    message = await complete(fake_model(fake_openai), context, StreamOptions(temperature=0))
    assert message.text == "Again." and message.stop_reason == "stop"
    assert fake_openai.last_body is not None and fake_openai.last_body["temperature"] == 0


async def test_stream_never_raises_on_a_tool_it_cannot_describe(fake_openai: FakeOpenAI) -> None:
    with pytest.raises(ToolSchemaError, match='Tool "broken": its parameters have no JSON schema'):
        Tool("broken", "Parameters that are neither a model nor a schema.", 42)  # type: ignore[arg-type]
    broken = Tool("broken", "Changed after its definition.", {"type": "object"})
    broken.parameters, broken._schema_cache = 42, None  # type: ignore[assignment]
    message = await stream(fake_model(fake_openai), Context(None, [UserMessage("x")], [broken])).result()
    assert message.stop_reason == "error"
    assert message.error_message is not None
    assert message.error_message.startswith("Could not build the request: TypeError: Tool parameters must be")
    assert fake_openai.chat_requests == []


async def test_stream_never_raises_when_the_server_is_gone() -> None:
    with FakeOpenAI() as server:
        model = fake_model(server)
    message = await stream(model, Context(None, [UserMessage("x")]), StreamOptions(max_retries=0)).result()
    assert message.stop_reason == "error" and message.error_message is not None


async def test_stream_with_an_aborted_signal_ends_aborted(fake_openai: FakeOpenAI) -> None:
    controller = AbortController()
    controller.abort("Stopped by the user")
    options = StreamOptions(signal=controller.signal)
    events = [event async for event in stream(fake_model(fake_openai), Context(None, [UserMessage("x")]), options)]
    assert [event.type for event in events] == ["error"]
    assert (events[0].partial.stop_reason, events[0].partial.error_message) == ("aborted", "Stopped by the user")


# ------------------------------------------------------------- AssistantMessageStream itself


def fallback(text: str) -> AssistantMessage:
    return AssistantMessage([], "error", model="m", provider="p", error_message=text)


async def test_an_exception_inside_a_provider_becomes_an_error_event() -> None:
    partial = AssistantMessage(model="m", provider="p")

    async def provider() -> AsyncIterator[AssistantMessageEvent]:
        yield AssistantMessageEvent("start", partial)
        raise RuntimeError("socket exploded")

    events = [event async for event in AssistantMessageStream(provider(), fallback)]
    assert [event.type for event in events] == ["start", "error"]
    assert events[-1].partial.stop_reason == "error"
    assert events[-1].partial.error_message == "RuntimeError: socket exploded"


async def test_a_provider_that_just_stops_ends_in_error() -> None:
    async def provider() -> AsyncIterator[AssistantMessageEvent]:
        yield AssistantMessageEvent("start", AssistantMessage())

    message = await AssistantMessageStream(provider(), fallback).result()
    assert message.stop_reason == "error"
    assert message.error_message == "Stream ended without a done or error event"


async def test_result_is_the_final_message_and_iteration_stops_there() -> None:
    final = AssistantMessage([TextContent("done")], "stop")
    after_done: list[str] = []

    async def provider() -> AsyncIterator[AssistantMessageEvent]:
        yield AssistantMessageEvent("done", final)
        after_done.append("a provider kept going")
        yield AssistantMessageEvent("text_delta", final, 0, delta="late")

    message_stream = AssistantMessageStream(provider(), fallback)
    assert [event.type async for event in message_stream] == ["done"]
    assert await message_stream.result() is final
    assert after_done == []


async def test_a_reader_that_stops_early_closes_the_provider() -> None:
    closed: list[bool] = []

    async def provider() -> AsyncIterator[AssistantMessageEvent]:
        try:
            for _ in range(10):
                yield AssistantMessageEvent("text_delta", AssistantMessage(), 0, delta="x")
        finally:
            closed.append(True)

    iterator = AssistantMessageStream(provider(), fallback).__aiter__()
    await iterator.__anext__()
    await iterator.aclose()  # type: ignore[attr-defined]
    assert closed == [True]


async def test_result_awaited_while_another_task_iterates() -> None:
    release = asyncio.Event()
    final = AssistantMessage([TextContent("done")], "stop")

    async def provider() -> AsyncIterator[AssistantMessageEvent]:
        yield AssistantMessageEvent("start", final)
        await release.wait()
        yield AssistantMessageEvent("done", final)

    message_stream = AssistantMessageStream(provider(), fallback)
    seen: list[str] = []

    async def read() -> None:
        async for event in message_stream:
            seen.append(event.type)

    reader = asyncio.create_task(read())
    await asyncio.sleep(0)  # the reader is now inside the provider
    waiter = asyncio.create_task(message_stream.result())
    await asyncio.sleep(0)
    assert not waiter.done()
    release.set()
    assert await asyncio.wait_for(waiter, 2) is final
    await reader
    assert seen == ["start", "done"]
