"""The agent loop: model request, tool calls, results, again, until done; the request phase (with
its ``before_request`` gate and compaction), the default ``convert_to_llm``, and the async-iterator form.

A port of pi's ``agent-loop.ts``. The turn structure::

    agent_start
    turn_start, message_start/end for each prompt
    ┌ (steering or follow-up messages: message_start/end each)
    │ prepare_next_turn(context)              before every model request
    │ before_request (a budget), compaction (when the request would not fit; see ``compaction``)
    │ transform_context → convert_to_llm → stream_fn
    │ message_start, message_update*, message_end   the assistant's answer
    │ tool calls (see ``tool_execution``)
    │ turn_end(message, tool_results)
    └ next turn_start while there are tool calls or steering messages;
      when the agent would stop, follow-up messages start more turns
    agent_end(messages this run added)

How a run ends: the assistant message ended in ``error`` or ``aborted`` (its tool calls are not
run and get no results; providers drop such messages when they replay the history); every result
of a tool batch asks to ``terminate`` (a blocking ``before_tool_call`` may ask too);
``should_stop_after_turn`` returns True; ``max_turns`` requests were made (the last message's tool
calls have run, so ``agent_loop_continue`` / ``Agent.continue_()`` resumes); or the signal was
aborted. An abort during streaming ends the message as ``aborted``; during tools every call still
gets one result (``tool_execution``); between turns it is seen before the next request, which is
not sent (the turn gets an empty ``aborted`` assistant message). A message cut off by the output
token limit (``length``) runs none of its tool calls: each gets the truncation error, and the model
is asked again.

The assistant message joins the context once it is complete (pi inserts the
partial one at ``start``; the provider may still be reading the message list
during the request).

Cost per turn: nothing proportional to the history except what the provider
needs to build its request. The default ``convert_to_llm`` (``DefaultLlmMessages``)
checks only the messages added since the last request and hands the loop's own
list to ``stream_fn`` (no copy): a stream function must read ``context.messages``
during the request and copy it if it keeps it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

from pi_kernel.agent.compaction import compact_context, needs_compaction
from pi_kernel.agent.tool_execution import (
    OPERATION_ABORTED,
    Emit,
    call_hook,
    execute_tool_calls,
)
from pi_kernel.agent.types import (
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ShouldStopAfterTurn,
    ShouldStopAfterTurnContext,
    TurnEndEvent,
    TurnStartEvent,
    admit,
)
from pi_kernel.ai import AbortSignal, AssistantMessage, Context, Message, StreamOptions, ToolResultMessage, stream
from pi_kernel.ai.models import error_message
from pi_kernel.ai.overflow import is_context_overflow


async def _poll(source: Callable[[], Any] | None) -> list[Any]:
    if source is None:
        return []
    return list(await call_hook(source) or ())


def _as_async_emit(emit: Callable[[AgentEvent], Any]) -> Emit:
    """``emit`` awaited; a message enters the transcript (``types.admit``: sendable, keys masked) as it ends."""

    async def admit_and_emit(event: AgentEvent) -> None:
        if isinstance(event, MessageEndEvent):
            admit(event.message)
        await call_hook(emit, event)

    return admit_and_emit


# ---------------------------------------------------------------- the default convert_to_llm


LLM_ROLES = frozenset(("user", "assistant", "tool_result"))
STREAM_ENDED_EARLY = "Stream ended without a done or error event"


class DefaultLlmMessages:
    """The default ``convert_to_llm``: keep user, assistant and tool-result messages.

    As pi's filter, but incremental: when every message is an LLM message (the usual case) it returns
    the given list itself and next time looks only at the messages appended since (a different or
    shorter list is checked from the start). A ``transform_context`` may edit the list in place: with
    ``incremental=False`` every call checks the whole list.
    """

    __slots__ = ("_checked", "_incremental", "_source")

    def __init__(self, incremental: bool = True) -> None:
        self._source: list[Any] | None = None
        self._checked = 0
        self._incremental = incremental

    def __call__(self, messages: list[Any]) -> list[Any]:
        if not self._incremental or messages is not self._source or len(messages) < self._checked:
            self._source, self._checked = messages, 0
        checked = self._checked
        count = len(messages)
        while checked < count and getattr(messages[checked], "role", None) in LLM_ROLES:
            checked += 1
        self._checked = checked
        if checked == count:
            return messages
        return [message for message in messages if getattr(message, "role", None) in LLM_ROLES]


# ---------------------------------------------------------------- runs with an emit sink


async def run_agent_loop(
    prompts: Sequence[Message],
    context: Context,
    config: AgentLoopConfig,
    emit: Callable[[AgentEvent], Any],
    signal: AbortSignal | None = None,
) -> list[Message]:
    """Run the loop with new prompt messages; events go to ``emit`` (awaited). Returns the messages this
    run added, its prompts first. ``context`` is not changed (the loop works on a copy of its message
    list). Without a ``signal`` the run gets one that never fires: tools and hooks always get one."""
    emit = _as_async_emit(emit)
    new_messages: list[Message] = list(prompts)
    current = Context(context.system_prompt, [*context.messages, *prompts], context.tools)
    await emit(AgentStartEvent())
    await emit(TurnStartEvent())
    for prompt in prompts:
        admit(prompt)  # entered before anyone sees it start (a key typed in a prompt is masked)
        await emit(MessageStartEvent(prompt))
        await emit(MessageEndEvent(prompt))
    await _run_turns(current, new_messages, config, signal or AbortSignal(), emit)
    return new_messages


def check_can_continue(context: Context) -> None:
    if not context.messages:
        raise ValueError("Cannot continue: no messages in context")
    if getattr(context.messages[-1], "role", None) == "assistant":
        raise ValueError("Cannot continue from message role: assistant")


async def run_agent_loop_continue(
    context: Context,
    config: AgentLoopConfig,
    emit: Callable[[AgentEvent], Any],
    signal: AbortSignal | None = None,
) -> list[Message]:
    """Continue from ``context`` as it is (its last message must not be an assistant's)."""
    check_can_continue(context)
    return await run_agent_loop([], context, config, emit, signal)


async def _run_turns(
    context: Context, new_messages: list[Message], config: AgentLoopConfig, signal: AbortSignal, emit: Emit
) -> None:
    options = dataclasses.replace(config.stream_options or StreamOptions(), signal=signal)
    config = dataclasses.replace(
        config,
        # The default filter is incremental unless a ``transform_context`` may edit the list in place.
        convert_to_llm=config.convert_to_llm or DefaultLlmMessages(incremental=config.transform_context is None),
        stream_options=options,
    )
    first = config  # the run's first request alone gets ``first_tool_choice``
    if config.first_tool_choice is not None:
        first = dataclasses.replace(
            config, stream_options=dataclasses.replace(options, tool_choice=config.first_tool_choice)
        )
    requests = 0
    pending: list[Any] = await _poll(config.get_steering_messages)
    while True:
        if requests:
            await emit(TurnStartEvent())
        for message in pending:
            await emit(MessageStartEvent(message))
            await emit(MessageEndEvent(message))
            context.messages.append(message)
            new_messages.append(message)
        if config.prepare_next_turn is not None:
            replacement = await call_hook(config.prepare_next_turn, context)
            if isinstance(replacement, Context):
                context = replacement
        message = await _request_with_room(context, config if requests else first, signal, emit)
        requests += 1
        new_messages.append(message)
        if message.stop_reason in ("error", "aborted"):
            # As in pi: the message's tool calls (perhaps half written) never run and get no
            # result; providers leave the whole message out of the replayed history.
            await emit(TurnEndEvent(message, []))
            break
        tool_results: list[ToolResultMessage] = []
        terminate = True  # no tool call: nothing asks for another request
        if message.tool_calls:
            tool_results, terminate = await execute_tool_calls(context, message, config, signal, emit)
            context.messages.extend(tool_results)
            new_messages.extend(tool_results)
        await emit(TurnEndEvent(message, tool_results))
        turn = ShouldStopAfterTurnContext(message, list(tool_results), context, new_messages)
        if (
            signal.aborted
            or (config.max_turns is not None and requests >= config.max_turns)
            or await _should_stop_after_turn(config.should_stop_after_turn, turn, signal)
        ):
            break
        pending = await _poll(config.get_steering_messages)
        if terminate and not pending:  # the agent would stop here
            pending = await _poll(config.get_follow_up_messages)
            if not pending:
                break
    await emit(AgentEndEvent(new_messages))


async def _should_stop_after_turn(
    hook: ShouldStopAfterTurn | None, turn: ShouldStopAfterTurnContext, signal: AbortSignal
) -> bool:
    if hook is None:
        return False
    try:
        inspect.signature(hook).bind(turn, signal)
    except TypeError:  # the one-parameter form
        return bool(await call_hook(hook, turn))
    except ValueError:  # no signature to read (some builtins): the documented form
        pass
    return bool(await call_hook(hook, turn, signal))


async def _request_with_room(
    context: Context, config: AgentLoopConfig, signal: AbortSignal, emit: Emit
) -> AssistantMessage:
    """One model request that fits. ``before_request`` is asked before every request it sends (the first,
    a summary request, the request after a compaction) and may stop it (a budget): the turn then ends
    with its text as an error. With ``compaction``, the history is compacted first when the request would
    not fit the window, and once more, with one retry, when the provider answers with a context-length error."""

    async def refused() -> AssistantMessage | None:
        if config.before_request is None or signal.aborted:
            return None
        stop = await call_hook(config.before_request, context)
        return await _refuse_request(context, config, emit, str(stop)) if stop else None

    settings = config.compaction if config.compaction is not None and config.compaction.enabled else None
    if refusal := await refused():  # first: a summary request costs too
        return refusal
    if settings is not None and not signal.aborted and needs_compaction(context, config.model, settings):
        compacted = await compact_context(context, config, "threshold", emit, signal)
        if compacted is not None and (refusal := await refused()):  # the summary request was paid
            return refusal
    message = await stream_assistant_response(context, config, signal, emit, retry_on_overflow=settings is not None)
    if message is None:  # the provider said the request was too long; nothing was emitted
        if refusal := await refused():
            return refusal
        await compact_context(context, config, "overflow", emit, signal)
        if refusal := await refused():
            return refusal
        message = await stream_assistant_response(context, config, signal, emit)
    assert message is not None
    return message


async def stream_assistant_response(
    context: Context, config: AgentLoopConfig, signal: AbortSignal, emit: Emit, retry_on_overflow: bool = False
) -> AssistantMessage | None:
    """One model request; streams ``message_*`` events and appends the final message to the context. With
    ``retry_on_overflow``, a context-length error before the message started returns ``None``, nothing
    emitted or appended (the caller compacts and asks again)."""
    if signal.aborted:
        return await _refuse_request(context, config, emit, OPERATION_ABORTED, aborted=True)
    messages: list[Any] = context.messages
    if config.transform_context is not None:
        messages = await call_hook(config.transform_context, messages, signal)
    to_llm = config.convert_to_llm or DefaultLlmMessages(incremental=False)  # ``_run_turns`` sets its own
    request = Context(context.system_prompt, await call_hook(to_llm, messages), context.tools)
    response = await call_hook(config.stream_fn or stream, config.model, request, config.stream_options)

    final: AssistantMessage | None = None
    started = False
    async for event in response:
        kind = event.type
        if kind == "done" or kind == "error":
            final = event.partial
        elif kind == "start":
            started = True
            await emit(MessageStartEvent(event.partial))
        elif started:
            await emit(MessageUpdateEvent(event.partial, event))
    if final is None:
        result = getattr(response, "result", None)
        final = await result() if result is not None else error_message(config.model, STREAM_ENDED_EARLY)
    if not started:
        if retry_on_overflow and final.stop_reason == "error" and is_context_overflow(final.error_message):
            return None
        await emit(MessageStartEvent(final))
    context.messages.append(final)
    await emit(MessageEndEvent(final))
    return final


async def _refuse_request(
    context: Context, config: AgentLoopConfig, emit: Emit, text: str, aborted: bool = False
) -> AssistantMessage:
    """Send nothing; record the reason as a failed turn (``before_request`` stopped the request) or an
    aborted one (the run was aborted before it)."""
    message = error_message(config.model, text, "aborted" if aborted else "error")
    await emit(MessageStartEvent(message))
    context.messages.append(message)
    await emit(MessageEndEvent(message))
    return message


# ---------------------------------------------------------------- the async-iterator form


class AgentEventStream:
    """``async for event in agent_loop(...)``; ``await stream.result()`` for the messages added.

    The run starts on first iteration (or ``result()``) as a task of its own,
    and waits after each event until the consumer asks for the next one, so an
    abort issued while handling an event takes effect before the loop goes on.
    Leaving the ``async for`` early cancels the run. An exception inside the
    run (a failing ``transform_context``, say) is raised from the iteration.
    """

    def __init__(self, run: Callable[[Emit], Awaitable[list[Message]]]) -> None:
        self._run = run
        self._messages: list[Message] | None = None
        self._started = False

    async def __aiter__(self) -> AsyncGenerator[AgentEvent, None]:
        if self._started:
            raise RuntimeError("An agent event stream can be iterated only once")
        self._started = True
        loop = asyncio.get_running_loop()
        handed: asyncio.Queue[tuple[AgentEvent, asyncio.Future[None]] | None] = asyncio.Queue()

        async def emit(event: AgentEvent) -> None:
            taken: asyncio.Future[None] = loop.create_future()
            handed.put_nowait((event, taken))
            await taken

        async def produce() -> list[Message]:
            try:
                return await self._run(emit)
            finally:
                handed.put_nowait(None)

        producer = loop.create_task(produce())
        try:
            while (item := await handed.get()) is not None:
                event, taken = item
                yield event
                if not taken.done():
                    taken.set_result(None)
            self._messages = await producer
        finally:
            if not producer.done():
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)

    async def result(self) -> list[Message]:
        """Run to the end if nobody iterates; the messages the run added."""
        if not self._started:
            async for _ in self:
                pass
        if self._messages is None:
            raise RuntimeError("The agent run did not finish")
        return self._messages


def agent_loop(
    prompts: Sequence[Message], context: Context, config: AgentLoopConfig, signal: AbortSignal | None = None
) -> AgentEventStream:
    """Start a run with new prompt messages: an async iterator of ``AgentEvent``s."""
    return AgentEventStream(lambda emit: run_agent_loop(prompts, context, config, emit, signal))


def agent_loop_continue(
    context: Context, config: AgentLoopConfig, signal: AbortSignal | None = None
) -> AgentEventStream:
    """Continue from ``context`` without a new message (retries, resumed runs). Raises ``ValueError`` at once
    when the context is empty or ends with an assistant message (the provider would reject the request)."""
    check_can_continue(context)
    return AgentEventStream(lambda emit: run_agent_loop([], context, config, emit, signal))
