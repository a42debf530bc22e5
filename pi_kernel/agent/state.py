"""The ``Agent``'s state, the reducer that keeps it in step with loop events, the events
that close a cancelled run, and the steering and follow-up queues."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from typing import Any, Literal

from pi_kernel.agent.events import (
    AgentEndEvent,
    AgentEvent,
    CompactionEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
)
from pi_kernel.agent.result_limit import bound_content
from pi_kernel.agent.tool_execution import masked_content
from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AssistantMessage, Message, Model, TextContent, Tool, ToolResultMessage
from pi_kernel.ai.messages import clean_message

QueueMode = Literal["one-at-a-time", "all"]


class AgentState:
    """What the agent knows now. Read it freely; set ``system_prompt``,
    ``model``, ``tools`` and ``messages`` between runs (``tools`` and
    ``messages`` copy the list they are given).

    The run-time fields are kept by the agent from its events:
    ``is_streaming`` (a run is active), ``streaming_message`` (the message
    being streamed, between ``message_start`` and ``message_end``),
    ``pending_tool_calls`` (ids of calls between ``tool_execution_start`` and
    ``_end``; a new set on each change, so a kept reference is a snapshot) and
    ``error_message`` (of the last assistant message that ended in error).
    """

    __slots__ = (
        "_messages",
        "_tools",
        "error_message",
        "is_streaming",
        "model",
        "pending_tool_calls",
        "streaming_message",
        "system_prompt",
    )

    def __init__(
        self,
        model: Model | None = None,
        system_prompt: str = "",
        tools: Iterable[Tool] = (),
        messages: Iterable[Message] = (),
    ) -> None:
        self.system_prompt = system_prompt
        self.model = model
        self._tools: list[Tool] = list(tools)
        self._messages: list[Any] = [clean_message(message) for message in messages]
        self.is_streaming = False
        self.streaming_message: Message | None = None
        self.pending_tool_calls: set[str] = set()
        self.error_message: str | None = None

    @property
    def tools(self) -> list[Tool]:
        return self._tools

    @tools.setter
    def tools(self, tools: Iterable[Tool]) -> None:
        self._tools = list(tools)

    @property
    def messages(self) -> list[Any]:
        return self._messages

    @messages.setter
    def messages(self, messages: Iterable[Any]) -> None:
        # Messages set from outside (a restored conversation, ``Agent(messages=...)``) enter the
        # transcript too: made sendable and storable (``clean_message``, in place, cheap when clean).
        self._messages = [clean_message(message) for message in messages]

    def __repr__(self) -> str:
        model = self.model.id if self.model else None
        return (
            f"AgentState(model={model!r}, messages={len(self._messages)}, tools={[t.name for t in self._tools]}, "
            f"is_streaming={self.is_streaming}, pending_tool_calls={sorted(self.pending_tool_calls)}, "
            f"error_message={self.error_message!r})"
        )


def reduce_agent_state(state: AgentState, event: AgentEvent) -> None:
    """Apply one loop event to ``state`` (in place; O(1) except the pending-call set)."""
    match event:
        case MessageStartEvent(message=message) | MessageUpdateEvent(message=message):
            state.streaming_message = message
        case MessageEndEvent(message=message):
            state.streaming_message = None
            # Sendable and storable from here on (the loop cleans its messages too; this covers the
            # ones the agent makes itself: a cancelled run's results, a failed run's message).
            state.messages.append(clean_message(message))
        case ToolExecutionStartEvent(tool_call_id=call_id):
            state.pending_tool_calls = state.pending_tool_calls | {call_id}
        case ToolExecutionEndEvent(tool_call_id=call_id):
            state.pending_tool_calls = state.pending_tool_calls - {call_id}
        case TurnEndEvent(message=AssistantMessage(error_message=error)) if error:
            state.error_message = error
        case AgentEndEvent():
            state.streaming_message = None
        case CompactionEvent(messages=messages):
            state.messages = messages


def results_for_unanswered_tool_calls(messages: list[Any], text: str) -> list[ToolResultMessage]:
    """Error results for the last assistant message's tool calls that have none.

    Used when a run is cancelled from outside (the task awaiting ``prompt()``
    was cancelled) so the transcript still gives every tool call one result.
    """
    answered: set[str] = set()
    for message in reversed(messages):
        role = getattr(message, "role", None)
        if role == "tool_result":
            answered.add(message.tool_call_id)
        elif role == "assistant":
            if message.stop_reason in ("error", "aborted"):
                return []
            return [
                ToolResultMessage(call.id, call.name, [TextContent(text)], is_error=True)
                for call in message.tool_calls
                if call.id not in answered
            ]
        else:
            return []
    return []


def closing_events_for_cancelled_run(
    state: AgentState, ended_calls: dict[str, ToolExecutionEndEvent], text: str, max_chars: int | None = None
) -> list[AgentEvent]:
    """The events that close a run cancelled from outside, for the state and the listeners.

    An assistant message cut off while streaming ends as ``aborted`` with what
    had streamed (as when the signal aborts a stream), closing its turn.
    Every tool call of the last assistant message that has no result message
    gets one: a call that had finished (its ``tool_execution_end`` in
    ``ended_calls``) keeps its real result, since its side effects happened;
    the others get ``text`` as an error, and a ``tool_execution_end`` when they
    were still pending. Then ``agent_end``. A real result is masked and bounded to ``max_chars`` as every
    tool result message is (``tool_execution.create_tool_result_message``).
    """
    events: list[AgentEvent] = []
    streaming = state.streaming_message
    if isinstance(streaming, AssistantMessage):
        cut_off = dataclasses.replace(
            streaming, content=list(streaming.content), stop_reason="aborted", error_message=text
        )
        events += [MessageEndEvent(cut_off), TurnEndEvent(cut_off, [])]
        messages = [*state.messages, cut_off]
    else:
        messages = state.messages
    results = results_for_unanswered_tool_calls(messages, text)
    for index, result in enumerate(results):
        ended = ended_calls.get(result.tool_call_id)
        if ended is not None:
            results[index] = result = ToolResultMessage(
                tool_call_id=ended.tool_call_id,
                tool_name=ended.tool_name,
                content=bound_content(masked_content(ended.result.content or []), max_chars)[0],
                details=ended.result.details,
                is_error=ended.is_error,
                usage=ended.result.usage,
            )
        elif result.tool_call_id in state.pending_tool_calls:
            aborted = AgentToolResult(result.content)
            events.append(ToolExecutionEndEvent(result.tool_call_id, result.tool_name, aborted, True))
        events += [MessageStartEvent(result), MessageEndEvent(result)]
    events.append(AgentEndEvent(list(results)))
    return events


class MessageQueue:
    """Steering or follow-up messages waiting for the loop; safe to fill from any thread."""

    def __init__(self, mode: QueueMode = "one-at-a-time") -> None:
        self.mode: QueueMode = mode
        self._items: list[Any] = []
        self._lock = threading.Lock()

    def enqueue(self, message: Any) -> None:
        with self._lock:
            self._items.append(message)

    def drain(self) -> list[Any]:
        """``all``: every queued message; ``one-at-a-time``: the oldest one."""
        with self._lock:
            if not self._items:
                return []
            if self.mode == "all":
                drained, self._items = self._items, []
                return drained
            return [self._items.pop(0)]

    def clear(self) -> None:
        with self._lock:
            self._items = []

    def __len__(self) -> int:
        return len(self._items)
