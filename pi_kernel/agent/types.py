"""The agent layer's vocabulary: tools that execute and the hook contracts, the loop's
configuration, the event union, and the agent's state with the reducer that keeps it in step.

Each hook's contract is written beside its type, as pi does. Hooks and tools
may be sync or async; a sync tool runs in a worker thread. Events are a tagged
union on ``type``, as pi emits them, in the order ``loop``'s docstring draws
(the tool events' order: ``tool_execution``'s).

Long: the layer's one vocabulary (the event union among it) in one place, so no module of the layer needs
another's types.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pi_kernel.ai import (
    AbortSignal,
    AssistantMessage,
    AssistantMessageEvent,
    AssistantMessageStream,
    Context,
    ImageContent,
    Message,
    Model,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_kernel.ai.models import ToolChoice
from pi_kernel.ai.secrets import admit

ToolExecutionMode = Literal["parallel", "sequential"]

DEFAULT_TOOL_RESULT_CHARS = 64_000
"""The default bound on a tool result message's text (``tool_execution.bound_content``): above the
built-ins' own limit (50 KB plus their notice), so their results pass unchanged."""


@dataclass
class CompactionSettings:
    """When and how the loop compacts the history (``compaction``)."""

    enabled: bool = True
    """Compact before a request that would not fit, and retry once on a context-length error."""
    reserve_tokens: int | None = None
    """Room left for the answer; ``None``: a quarter of the window, at most 16,384 tokens."""
    keep_recent_tokens: int | None = None
    """Newest messages kept verbatim; ``None``: a quarter of the window."""
    summary_max_tokens: int = 2_048
    """Longest summary asked for."""


@dataclass(slots=True)
class AgentToolResult:
    content: list[TextContent | ImageContent] = field(default_factory=list)
    """What the model receives."""
    details: Any = None
    """Structured data for the UI (a diff, rich outputs); never sent to the model."""
    usage: Usage | None = None
    """Tokens the tool itself spent."""
    terminate: bool = False
    """Ask the loop to stop after this batch; honoured only when every result
    of the batch asks for it."""


ToolUpdateCallback = Callable[[AgentToolResult], None]
"""``on_update(partial_result)``: streams a partial result to the UI as a
``tool_execution_update`` event. Calls after the tool finished are ignored."""


@dataclass(eq=False)
class AgentTool(Tool):
    """A ``Tool`` that can run.

    Give ``execute=`` a function, or subclass and define ``execute``:
    ``execute(tool_call_id, params, signal, on_update) -> AgentToolResult``,
    sync or async. ``params`` is the validated value (a model instance when
    ``parameters`` is a model, else a dict).
    """

    label: str = ""
    """Name shown in the UI."""
    prepare_arguments: Callable[[Any], Any] | None = None
    """Rewrites raw arguments of an older shape into the current schema's shape
    before validation. Returning ``None`` (or the same object) keeps them."""
    execution_mode: ToolExecutionMode = "parallel"
    """``sequential``: a batch holding this tool runs one call at a time."""
    execute: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.label:
            self.label = self.name
        if self.execute is None:
            del self.execute  # let a subclass's ``execute`` method show through
            if type(self).execute is None:
                raise TypeError(f'AgentTool "{self.name}" needs an execute function')


@dataclass(slots=True)
class BeforeToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    """The validated arguments."""
    context: Context


@dataclass(slots=True)
class BeforeToolCallResult:
    """What ``before_tool_call`` returns (``None`` lets the call run).

    ``block=True``: the tool does not run; the model receives ``reason`` (or
    ``Tool execution was blocked``) as an error result.
    ``args``: replacement arguments (re-validated before the call runs), for
    approvals that edit the call.
    """

    block: bool = False
    reason: str | None = None
    terminate: bool = False
    """With ``block=True`` only (as in pi): the blocked call's result asks the loop to stop after this
    batch. Without a block it is ignored; to stop after an approved call, ``after_tool_call`` returns
    ``AfterToolCallResult(terminate=True)``."""
    args: Any = None


@dataclass(slots=True)
class AfterToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: AgentToolResult
    is_error: bool
    context: Context


@dataclass(slots=True)
class AfterToolCallResult:
    """A patch returned by ``after_tool_call`` (``None`` keeps everything).

    Each field that is not ``None`` replaces the result's field whole; there is
    no deep merge of ``content`` or ``details``.
    """

    content: list[TextContent | ImageContent] | None = None
    details: Any = None
    is_error: bool | None = None
    usage: Usage | None = None
    terminate: bool | None = None


BeforeToolCallHook = Callable[[BeforeToolCallContext, AbortSignal | None], Any]
"""Runs after validation, before ``execute``; may block. Sync or async. If it
raises, the call becomes an error result with the exception's message."""
AfterToolCallHook = Callable[[AfterToolCallContext, AbortSignal | None], Any]
"""Runs after ``execute`` (also when it raised, with ``is_error=True``); may
patch the result. Sync or async. If it raises, the call becomes an error result."""

StreamFn = Callable[[Model, Context, StreamOptions], AssistantMessageStream]
"""Makes one model request; ``pi_kernel.ai.stream`` by default."""
ConvertToLlm = Callable[[list[Any]], "Sequence[Message] | Awaitable[Sequence[Message]]"]
"""Turns the agent's messages (which may hold app-only kinds) into LLM messages."""
TransformContext = Callable[[list[Any], AbortSignal | None], Any]
"""Rewrites the message list before ``convert_to_llm`` (pruning, injecting)."""
MessageSource = Callable[[], Any]
"""Returns (or awaits to) a list of messages to inject; ``[]`` for none."""


@dataclass(slots=True)
class ShouldStopAfterTurnContext:
    """What ``should_stop_after_turn`` gets after each turn (pi's ``shouldStopAfterTurn`` context)."""

    message: AssistantMessage
    """The turn's assistant message."""
    tool_results: list[ToolResultMessage]
    """The results of its tool calls (``[]`` for none)."""
    context: Context
    """The loop's context: ``context.messages`` is every message so far, this turn's results
    last. Read it; do not edit it (stop the run, or steer, instead)."""
    new_messages: list[Message]
    """The messages this run has added so far, its prompts first."""


ShouldStopAfterTurn = Callable[..., Any]
"""Called as ``hook(ctx: ShouldStopAfterTurnContext, signal: AbortSignal)`` after each turn's
``turn_end``; returning True ends the run there. Sync or async. A hook that takes a single
parameter (the older form) gets only ``ctx``, which still has ``message`` and ``tool_results``."""
PrepareNextTurn = Callable[[Context], Any]
"""Called before each model request with the loop's context; may set
``system_prompt`` and ``tools`` on it (the tool registry rebuilds both
channels here every turn). To change the history, assign a new list to
``messages`` (or return a new ``Context``) rather than editing it in place:
the default ``convert_to_llm`` re-checks only what was appended to a list it
has seen."""


BeforeRequest = Callable[[Context], Any]
"""Called before each model request with the context about to be sent; returning a text (a budget
that would be crossed, say) stops the run there: nothing is sent and the turn ends with an error
message carrying that text. ``None`` lets the request go."""


@dataclass
class AgentLoopConfig:
    model: Model
    stream_fn: StreamFn | None = None
    convert_to_llm: ConvertToLlm | None = None
    transform_context: TransformContext | None = None
    before_tool_call: BeforeToolCallHook | None = None
    after_tool_call: AfterToolCallHook | None = None
    tool_execution: ToolExecutionMode = "parallel"
    get_steering_messages: MessageSource | None = None
    """Checked after each tool batch (and after a turn with no tools): messages
    the user typed while the agent worked, injected before the next request."""
    get_follow_up_messages: MessageSource | None = None
    """Checked when the agent would stop: more work to continue with."""
    should_stop_after_turn: ShouldStopAfterTurn | None = None
    prepare_next_turn: PrepareNextTurn | None = None
    stream_options: StreamOptions | None = None
    """Options for every request; the loop sets ``signal`` on a copy."""
    first_tool_choice: ToolChoice | None = None
    """The ``tool_choice`` of the run's first model request only (``%%pi --tool``); later requests use
    ``stream_options``' own. A forced choice on every request never lets the model answer."""
    max_turns: int | None = None
    """Stop after this many model requests (``None``: no limit)."""
    compaction: CompactionSettings | None = None
    """Compact the history when a request would not fit the model's window, and retry once on a
    context-length error (``compaction``); ``None``: never (``Agent`` turns it on by default)."""
    before_request: BeforeRequest | None = None
    max_tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS
    """Text of each tool result message cut to this many characters, with a note (``tool_execution.bound_content``);
    ``None``: no bound."""


# ---------------------------------------------------------------- events


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


# ---------------------------------------------------------------- the agent's state


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
        self._messages: list[Any] = [admit(message) for message in messages]
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
        # transcript too (``admit``); the ones already in it entered once, and are not walked again.
        entered = {id(message) for message in self._messages}
        self._messages = [message if id(message) in entered else admit(message) for message in messages]

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
            # Entered (``admit``) from here on (the loop admits its messages too; this covers the ones the
            # agent makes itself: a cancelled run's results, a failed run's message).
            state.messages.append(admit(message))
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
