"""An in-process scripted model: a ``stream_fn`` for agent tests and benchmarks.

``ScriptedModel`` plays back assistant messages as the event sequence a real
provider streams (``start``, ``text_start/delta*/end``, ``thinking_*``,
``toolcall_start/delta*/end`` with the arguments growing as a JSON text, then
``done``, or ``error`` for a message whose ``stop_reason`` is ``error`` or
``aborted``). No HTTP, no serialization.

Usage::

    model = ScriptedModel([
        tool_call_message(tool_call("read", {"path": "a.txt"}, id="c1")),
        text_message("It says hello."),
    ])
    agent = Agent(model.model, stream_fn=model, tools=[...])
    await agent.prompt("What is in a.txt?")
    model.requests[1].messages   # what the second request saw (a copy)

Helpers for agent tests (bottom of the file): ``make_tool`` / ``echo_tool``
(an ``AgentTool`` echoing ``params.value``), ``run_loop`` (``run_agent_loop``
with the model; returns ``(events, messages)`` and checks that every tool call
got exactly one result), ``user``, ``event_types``, ``tool_results``,
``assert_one_result_per_call``, and for ``Agent`` tests ``gated_response``,
``roles`` and ``user_texts``.

A response is an ``AssistantMessage`` or a callable ``(context, options) ->
AssistantMessage`` (or an awaitable of one); the callable runs when the
request is made, so it can look at the context, count calls, or wait for a
test's event. Responses are used in order; ``add()`` appends more; a request
with none left ends in ``error`` ("no scripted response left").

Abort, as a provider does it: if ``options.signal`` is aborted before or while
the message streams (or while a callable response is awaited), the stream
ends with an ``aborted`` message (``error_message`` "Operation aborted") that
holds what was streamed so far.

Options: ``chunk_chars`` (text and argument delta size; ``None``: one delta
per block), ``delay`` (seconds to sleep before each event; with 0 the stream
never yields to the event loop by itself), ``record`` (keep a ``ScriptedRequest`` snapshot
of each request; turn off in benchmarks, where copying the history per turn
would be work a real provider does not do twice).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import BaseModel

from pi_kernel.agent import AgentLoopConfig, AgentTool, AgentToolResult, run_agent_loop
from pi_kernel.ai import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageStream,
    Context,
    Model,
    StopReason,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    parse_streaming_json,
)

ResponseFn: TypeAlias = Callable[[Context, StreamOptions], "AssistantMessage | Awaitable[AssistantMessage]"]
Response: TypeAlias = "AssistantMessage | ResponseFn"

SCRIPTED_MODEL = Model(id="scripted", provider="scripted")
_ids = itertools.count(1)


# --------------------------------------------------------------------------- message builders


def tool_call(name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
    """A tool-call block (``id`` defaults to ``call_<n>``)."""
    return ToolCall(id=id or f"call_{next(_ids)}", name=name, arguments=dict(arguments or {}))


def assistant_message(
    *content: Any, stop_reason: StopReason = "stop", error_message: str | None = None, usage: Usage | None = None
) -> AssistantMessage:
    """An assistant message from blocks (a str becomes a text block)."""
    blocks = [TextContent(item) if isinstance(item, str) else item for item in content]
    return AssistantMessage(
        content=blocks,
        stop_reason=stop_reason,
        usage=usage or Usage(),
        model=SCRIPTED_MODEL.id,
        provider=SCRIPTED_MODEL.provider,
        error_message=error_message,
    )


def text_message(text: str, stop_reason: StopReason = "stop") -> AssistantMessage:
    return assistant_message(text, stop_reason=stop_reason)


def tool_call_message(
    *calls: ToolCall, text: str | None = None, stop_reason: StopReason = "tool_use"
) -> AssistantMessage:
    """An assistant message asking for ``calls`` (after an optional text)."""
    return assistant_message(*([text] if text else []), *calls, stop_reason=stop_reason)


def error_response(text: str = "provider failed") -> AssistantMessage:
    return assistant_message(stop_reason="error", error_message=text)


# --------------------------------------------------------------------------- the model


@dataclass
class ScriptedRequest:
    """A snapshot of one request (lists copied when it was made)."""

    system_prompt: str | None
    messages: list[Any]
    tools: list[Tool]
    options: StreamOptions

    @property
    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]


@dataclass
class ScriptedModel:
    responses: list[Response] = field(default_factory=list)
    model: Model = SCRIPTED_MODEL
    """Pass this as the agent's model."""
    chunk_chars: int | None = 8
    delay: float = 0.0
    record: bool = True
    requests: list[ScriptedRequest] = field(default_factory=list)
    """One per request, when ``record`` is on."""
    call_count: int = 0
    """Requests made so far."""

    def __post_init__(self) -> None:
        self.responses = list(self.responses)
        self._next = 0

    def add(self, *responses: Response) -> ScriptedModel:
        self.responses.extend(responses)
        return self

    @property
    def remaining(self) -> int:
        return len(self.responses) - self._next

    def __call__(self, model: Model, context: Context, options: StreamOptions | None = None) -> AssistantMessageStream:
        options = options or StreamOptions()
        self.call_count += 1
        if self.record:
            self.requests.append(
                ScriptedRequest(context.system_prompt, list(context.messages), list(context.tools or ()), options)
            )
        response: Response | None = None
        if self._next < len(self.responses):
            response = self.responses[self._next]
            self._next += 1
        return AssistantMessageStream(
            self._events(response, context, options),
            lambda text: assistant_message(stop_reason="error", error_message=text),
        )

    async def _events(
        self, response: Response | None, context: Context, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        signal = options.signal
        partial = assistant_message()
        if response is None:
            final = error_response("ScriptedModel: no scripted response left")
        elif isinstance(response, AssistantMessage):
            final = response
        else:
            produced = response(context, options)
            if inspect.isawaitable(produced):
                produced = await _unless_aborted(produced, signal)
            final = produced if produced is not None else _aborted(partial)
        if signal is not None and signal.aborted:
            yield AssistantMessageEvent("error", _aborted(partial))
            return
        for event_type, index, delta in self._plan(final):
            if self.delay > 0:
                await asyncio.sleep(self.delay)
            if signal is not None and signal.aborted:
                yield AssistantMessageEvent("error", _aborted(partial))
                return
            yield _apply(partial, final, event_type, index, delta)
        partial.stop_reason = final.stop_reason
        partial.usage = final.usage
        partial.error_message = final.error_message
        yield AssistantMessageEvent("error" if final.stop_reason in ("error", "aborted") else "done", partial)

    def _plan(self, final: AssistantMessage) -> Iterable[tuple[str, int, str | None]]:
        yield "start", -1, None
        for index, block in enumerate(final.content):
            if isinstance(block, ToolCall):
                kind, text = "toolcall", json.dumps(block.arguments)
            elif isinstance(block, ThinkingContent):
                kind, text = "thinking", block.thinking
            else:
                kind, text = "text", getattr(block, "text", "")
            yield f"{kind}_start", index, None
            for piece in _pieces(text, self.chunk_chars):
                yield f"{kind}_delta", index, piece
            yield f"{kind}_end", index, None


def _pieces(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size is None or size <= 0:
        return [text]
    return [text[start : start + size] for start in range(0, len(text), size)]


def _apply(partial: AssistantMessage, final: AssistantMessage, event_type: str, index: int, delta: str | None) -> Any:
    """Grow ``partial`` by one event, as a provider assembles its message."""
    if event_type == "start":
        return AssistantMessageEvent("start", partial)
    source = final.content[index]
    if event_type.endswith("_start"):
        if isinstance(source, ToolCall):
            partial.content.append(ToolCall(source.id, source.name, {}))
        elif isinstance(source, ThinkingContent):
            partial.content.append(ThinkingContent("", source.signature))
        else:
            partial.content.append(TextContent(""))
        return AssistantMessageEvent(event_type, partial, content_index=index)  # type: ignore[arg-type]
    block = partial.content[index]
    if event_type.endswith("_delta"):
        if isinstance(block, ToolCall):
            block.raw_arguments = (block.raw_arguments or "") + (delta or "")
            block.arguments = parse_streaming_json(block.raw_arguments)
        elif isinstance(block, ThinkingContent):
            block.thinking += delta or ""
        else:
            block.text += delta or ""  # type: ignore[union-attr]
        return AssistantMessageEvent(event_type, partial, content_index=index, delta=delta)  # type: ignore[arg-type]
    # *_end: the block is final
    if isinstance(block, ToolCall):
        partial.content[index] = done = ToolCall(source.id, source.name, dict(source.arguments))  # type: ignore[union-attr]
        return AssistantMessageEvent("toolcall_end", partial, content_index=index, tool_call=done)
    partial.content[index] = source
    text = source.thinking if isinstance(source, ThinkingContent) else getattr(source, "text", "")
    return AssistantMessageEvent(event_type, partial, content_index=index, content=text)  # type: ignore[arg-type]


def _aborted(partial: AssistantMessage) -> AssistantMessage:
    return dataclasses.replace(partial, stop_reason="aborted", error_message="Operation aborted")


async def _unless_aborted(awaitable: Awaitable[Any], signal: AbortSignal | None) -> Any:
    """Await the response unless the signal fires first (then None)."""
    if signal is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
    return None if signal.aborted or task.cancelled() else task.result()


# --------------------------------------------------------------------------- agent test helpers


class EchoParams(BaseModel):
    value: Any
    """``Any`` so that tests can hand the tool anything (a hook may edit it)."""


def make_tool(
    name: str,
    execute: Callable[..., Any] | None = None,
    *,
    executed: list[Any] | None = None,
    terminate: bool = False,
    parameters: type[BaseModel] | dict[str, Any] = EchoParams,
    **options: Any,
) -> AgentTool:
    """An ``AgentTool`` named ``name``; by default it echoes ``params.value``.

    ``executed`` collects the ``value`` of every run; ``terminate`` sets it on
    the default result; ``options`` go to ``AgentTool`` (``execution_mode``,
    ``prepare_arguments``, ``label``).
    """

    def echo(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        value = getattr(params, "value", params)
        if executed is not None:
            executed.append(value)
        return AgentToolResult([TextContent(f"echoed: {value}")], details={"value": value}, terminate=terminate)

    return AgentTool(
        name=name, description=f"The {name} tool", parameters=parameters, execute=execute or echo, **options
    )


def echo_tool(**options: Any) -> AgentTool:
    """``make_tool("echo", ...)``."""
    return make_tool("echo", **options)


def user(text: str) -> UserMessage:
    return UserMessage(text)


async def run_loop(
    model: ScriptedModel,
    prompts: list[Any],
    *,
    tools: list[Any] | None = None,
    history: list[Any] | None = None,
    system_prompt: str = "",
    signal: AbortSignal | None = None,
    **config: Any,
) -> tuple[list[Any], list[Any]]:
    """Run ``run_agent_loop`` with ``model``: ``(events, messages the run added)``.

    ``config`` holds further ``AgentLoopConfig`` fields (hooks, ``tool_execution``...).
    """
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)

    context = Context(system_prompt, list(history or ()), list(tools or ()))
    loop_config = AgentLoopConfig(model=model.model, stream_fn=model, **config)
    messages = await run_agent_loop(prompts, context, loop_config, emit, signal)
    assert_one_result_per_call(messages)
    return events, messages


def event_types(events: list[Any], *, updates: bool = True) -> list[str]:
    return [event.type for event in events if updates or event.type != "message_update"]


def tool_results(messages: list[Any]) -> list[ToolResultMessage]:
    return [message for message in messages if getattr(message, "role", None) == "tool_result"]


def assert_one_result_per_call(messages: list[Any]) -> None:
    """Every tool call of a (not failed) assistant message has exactly one result, right after it."""
    expected: list[str] = []
    for message in [*messages, None]:
        role = getattr(message, "role", None)
        if role == "tool_result":
            assert expected and message.tool_call_id in expected, f"unexpected result {message.tool_call_id}"  # type: ignore[union-attr]
            expected.remove(message.tool_call_id)  # type: ignore[union-attr]
            continue
        assert not expected, f"tool calls without a result: {expected}"
        if role == "assistant" and message.stop_reason not in ("error", "aborted"):  # type: ignore[union-attr]
            expected = [call.id for call in message.tool_calls]  # type: ignore[union-attr]


def gated_response(started: asyncio.Event, release: asyncio.Event, text: str = "done") -> ResponseFn:
    """A response that waits for ``release`` (or the abort signal, which the model handles)."""

    async def respond(context: Context, options: StreamOptions) -> AssistantMessage:
        started.set()
        await release.wait()
        return text_message(text)

    return respond


def roles(agent: Any) -> list[str]:
    """The roles of an ``Agent``'s transcript."""
    return [message.role for message in agent.state.messages]


def user_texts(agent: Any) -> list[str]:
    """The text of each user message in an ``Agent``'s transcript."""
    out = []
    for message in agent.state.messages:
        if message.role == "user":
            content = message.content
            out.append(content if isinstance(content, str) else "".join(block.text for block in content))
    return out
