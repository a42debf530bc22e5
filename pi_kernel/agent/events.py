"""Agent events: a tagged union on ``type``, as pi emits them.

Order within one run::

    agent_start
      turn_start
        message_start/end            (each prompt, steering or follow-up message)
        message_start, message_update*, message_end   (the assistant's answer)
        tool_execution_start*        (every call, in source order, at preflight)
        tool_execution_update*
        tool_execution_end*          (in completion order)
        message_start/end*           (tool results, in source order)
      turn_end
      ...
    agent_end

``compaction`` comes before a model request whose history was summarised (see ``compaction``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AssistantMessage, AssistantMessageEvent, Message, ToolResultMessage, Usage, UserMessage


@dataclass(slots=True)
class AgentStartEvent:
    type: Literal["agent_start"] = "agent_start"


@dataclass(slots=True)
class AgentEndEvent:
    messages: list[Message] = field(default_factory=list)
    """Every message this run added."""
    type: Literal["agent_end"] = "agent_end"


@dataclass(slots=True)
class TurnStartEvent:
    type: Literal["turn_start"] = "turn_start"


@dataclass(slots=True)
class TurnEndEvent:
    message: AssistantMessage
    tool_results: list[ToolResultMessage] = field(default_factory=list)
    type: Literal["turn_end"] = "turn_end"


@dataclass(slots=True)
class MessageStartEvent:
    message: Message
    type: Literal["message_start"] = "message_start"


@dataclass(slots=True)
class MessageUpdateEvent:
    message: AssistantMessage
    assistant_message_event: AssistantMessageEvent
    type: Literal["message_update"] = "message_update"


@dataclass(slots=True)
class MessageEndEvent:
    message: Message
    type: Literal["message_end"] = "message_end"


@dataclass(slots=True)
class ToolExecutionStartEvent:
    tool_call_id: str
    tool_name: str
    args: Any
    type: Literal["tool_execution_start"] = "tool_execution_start"


@dataclass(slots=True)
class ToolExecutionUpdateEvent:
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: AgentToolResult
    type: Literal["tool_execution_update"] = "tool_execution_update"


@dataclass(slots=True)
class ToolExecutionEndEvent:
    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool
    type: Literal["tool_execution_end"] = "tool_execution_end"


@dataclass(slots=True)
class CompactionEvent:
    """Older turns were replaced by a summary (``compaction``); ``messages`` is the whole new conversation."""

    messages: list[Any]
    summary: UserMessage
    """The ``[compacted N turns]`` user message (first of ``messages``)."""
    compacted_turns: int
    compacted_messages: int
    tokens_before: int
    reason: str
    """``threshold`` (it would not fit), ``overflow`` (the provider said so) or ``manual``."""
    usage: Usage | None = None
    """The summary request's ``Usage``."""
    model: str = ""
    provider: str = ""
    error: str | None = None
    """Why the model's own summary could not be used (a plain list stands in)."""
    type: Literal["compaction"] = "compaction"


AgentEvent = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
    | CompactionEvent
)
