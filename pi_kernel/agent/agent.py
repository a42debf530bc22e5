"""``Agent``: the loop with a transcript, listeners, queues and abort (pi's ``agent.ts``), the events
that close a cancelled run, and the usage ledger and budget the agent keeps.

One run at a time: ``prompt()`` and ``continue_()`` start a run and return when it is over and
every listener has handled ``agent_end``; their keywords override the agent's own for that run (the
agent's attributes are never swapped). While a run is active, ``steer()`` queues a message for the
next turn and ``follow_up()`` one for when the agent would stop; ``abort()`` (any thread) ends it.
The queues belong to the run: what is still queued when a run ends (an abort, an error, the turn
limit, a stop hook, or a message that came after the last poll) is dropped, never carried into the
next, unrelated run; ``take_unsent()`` returns those messages so the person can be told. Messages
queued while idle wait for the next run (``prompt`` / ``continue_`` take them at its start).

Listeners (``subscribe``) may be sync or async. Each event is applied to ``state`` first, then
handed to every listener in subscription order; the loop waits for all of them before it goes on.
A listener that raises is logged and does not disturb the run.

Long sessions: ``compaction`` is on by default. ``UsageLedger`` adds up the ``Usage`` of every
assistant message and summary request, so the totals survive compaction. ``Budget`` (US dollars
and/or tokens) is checked before each model request (``budget_stop``): a request whose estimated
cost (cache reads and writes at their own prices) would take the session past it is not sent, and
the run ends with a message saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pi_kernel.agent.compaction import CHARS_PER_TOKEN, compact_context, estimate_context_tokens
from pi_kernel.agent.loop import run_agent_loop
from pi_kernel.agent.tool_execution import (
    OPERATION_ABORTED,
    FinalizedToolCall,
    call_hook,
    create_tool_result_message,
    failed_call,
)
from pi_kernel.agent.types import (
    DEFAULT_TOOL_RESULT_CHARS,
    AfterToolCallHook,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentState,
    BeforeToolCallHook,
    CompactionEvent,
    CompactionSettings,
    ConvertToLlm,
    MessageEndEvent,
    MessageStartEvent,
    PrepareNextTurn,
    ShouldStopAfterTurn,
    StreamFn,
    ToolExecutionEndEvent,
    ToolExecutionMode,
    TransformContext,
    TurnEndEvent,
    TurnStartEvent,
    admit,
    reduce_agent_state,
)
from pi_kernel.ai import (
    AbortController,
    AbortSignal,
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_kernel.ai.models import ToolChoice, error_message

logger = logging.getLogger("pi_kernel.agent")

QueueMode = Literal["one-at-a-time", "all"]

Listener = Callable[[AgentEvent], Any]
PromptInput = str | Message | list[Message] | tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class RunOverrides:
    """What one run uses in place of the agent's own (``None``: the agent's)."""

    model: Model | None = None
    max_turns: int | None = None
    before_tool_call: BeforeToolCallHook | None = None
    prepare_next_turn: PrepareNextTurn | None = None
    stream_options: StreamOptions | None = None
    first_tool_choice: ToolChoice | None = None


@dataclass(slots=True)
class _ActiveRun:
    controller: AbortController
    model: Model | None = None
    """The model this run was given (``RunOverrides.model``); ``None``: ``state.model``."""
    done: asyncio.Event = field(default_factory=asyncio.Event)
    ended_calls: dict[str, ToolExecutionEndEvent] = field(default_factory=dict)
    """This turn's ``tool_execution_end`` events: if the run is cancelled before
    their result messages, those calls keep their real results."""


class Agent:
    def __init__(
        self,
        model: Model | None = None,
        *,
        system_prompt: str = "",
        tools: Iterable[Tool] = (),
        messages: Iterable[Message] = (),
        stream_fn: StreamFn | None = None,
        before_tool_call: BeforeToolCallHook | None = None,
        after_tool_call: AfterToolCallHook | None = None,
        tool_execution: ToolExecutionMode = "parallel",
        convert_to_llm: ConvertToLlm | None = None,
        transform_context: TransformContext | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        stream_options: StreamOptions | None = None,
        prepare_next_turn: PrepareNextTurn | None = None,
        should_stop_after_turn: ShouldStopAfterTurn | None = None,
        max_turns: int | None = None,
        max_tool_result_chars: int | None = DEFAULT_TOOL_RESULT_CHARS,
        compaction: CompactionSettings | None = None,
        budget: Budget | None = None,
    ) -> None:
        self._state = AgentState(model, system_prompt, tools, messages)
        # The loop's configuration; read when a run starts (hooks: at each use).
        self.stream_fn = stream_fn
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.tool_execution: ToolExecutionMode = tool_execution
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.stream_options = stream_options
        self.prepare_next_turn = prepare_next_turn
        self.should_stop_after_turn = should_stop_after_turn
        self.max_turns = max_turns
        self.first_tool_choice: ToolChoice | None = None
        """The ``tool_choice`` of each run's first model request only (``%%pi --tool``): ``required``
        or a tool's name makes the model call a tool first, then it chooses freely."""
        self.max_tool_result_chars = max_tool_result_chars
        self.compaction = compaction if compaction is not None else CompactionSettings()
        """Compaction settings (on by default; ``enabled=False`` turns it off)."""
        self.budget = budget if budget is not None else Budget()
        """Checked before every model request (``budget_stop``)."""
        self.usage = UsageLedger()
        """What the agent spent, per model (survives compaction; ``reset`` starts it over)."""
        self.steering_mode: QueueMode = steering_mode
        """``one-at-a-time``: each turn takes the oldest steering message; ``all``: every queued one."""
        self.follow_up_mode: QueueMode = follow_up_mode
        self._steering: deque[Message] = deque()  # filled from any thread: deque appends are atomic
        self._follow_ups: deque[Message] = deque()
        self._unsent: list[Message] = []  # dropped from the queues when a run ended (``take_unsent``)
        self._listeners: tuple[Listener, ...] = ()
        self._active: _ActiveRun | None = None

    # ------------------------------------------------------------ state and listeners

    @property
    def state(self) -> AgentState:
        return self._state

    def replace_messages(self, messages: Iterable[Message]) -> None:
        self._state.messages = messages

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns a function that unsubscribes."""
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            self._listeners = tuple(item for item in self._listeners if item is not listener)

        return unsubscribe

    @property
    def signal(self) -> AbortSignal | None:
        """The active run's abort signal (None when idle)."""
        return self._active.controller.signal if self._active else None

    @property
    def is_running(self) -> bool:
        return self._active is not None

    # ------------------------------------------------------------ queues

    def steer(self, message: Message | str) -> None:
        """Queue a message for the next turn (after the current tool batch); any thread."""
        self._steering.extend(_prompt_messages(message, None))

    def follow_up(self, message: Message | str) -> None:
        """Queue a message for when the agent would stop; any thread."""
        self._follow_ups.extend(_prompt_messages(message, None))

    def clear_steering_queue(self) -> None:
        self._steering.clear()

    def clear_follow_up_queue(self) -> None:
        self._follow_ups.clear()

    def clear_all_queues(self) -> list[Message]:
        """Empty both queues; returns what they held (steering first, then follow-ups), oldest first."""
        return _drain(self._steering, "all") + _drain(self._follow_ups, "all")

    def take_unsent(self) -> list[Message]:
        """The messages still queued when the runs since the last call ended, never sent (each returned once)."""
        unsent, self._unsent = self._unsent, []
        return unsent

    def has_queued_messages(self) -> bool:
        return bool(self._steering or self._follow_ups)

    # ------------------------------------------------------------ control

    def abort(self) -> None:
        """Abort the active run (no-op when idle); safe from any thread."""
        active = self._active
        if active is not None:
            active.controller.abort()

    async def wait_for_idle(self) -> None:
        """Return when the active run and its listeners are done (at once when idle)."""
        active = self._active
        if active is not None:
            await active.done.wait()

    def _check_idle(self, doing: str) -> None:
        if self._active is not None:
            raise RuntimeError(f"Agent is already processing. Wait for completion before {doing}.")

    def reset(self) -> None:
        """Clear the transcript, run-time state and queues."""
        self._check_idle("resetting")
        self._state.messages = []
        self._state.error_message = None
        self.usage.by_model.clear()
        self.clear_all_queues()
        self._unsent = []

    async def prompt(
        self,
        prompt: PromptInput,
        images: Sequence[ImageContent] | None = None,
        *,
        model: Model | None = None,
        max_turns: int | None = None,
        before_tool_call: BeforeToolCallHook | None = None,
        prepare_next_turn: PrepareNextTurn | None = None,
        stream_options: StreamOptions | None = None,
        first_tool_choice: ToolChoice | None = None,
    ) -> None:
        """Run the agent on a text (optionally with images), a message, or a list of messages.

        The keyword arguments replace the agent's own for this run only (``None``: the agent's).
        """
        if self._active is not None:
            raise RuntimeError(
                "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
                "or wait for completion."
            )
        overrides = RunOverrides(
            model, max_turns, before_tool_call, prepare_next_turn, stream_options, first_tool_choice
        )
        await self._run(_prompt_messages(prompt, images), overrides)

    async def continue_(
        self,
        *,
        model: Model | None = None,
        max_turns: int | None = None,
        before_tool_call: BeforeToolCallHook | None = None,
        prepare_next_turn: PrepareNextTurn | None = None,
        stream_options: StreamOptions | None = None,
        first_tool_choice: ToolChoice | None = None,
    ) -> None:
        """Continue from the transcript (after an error, an abort, ``max_turns``, a terminate).

        When the transcript ends with an assistant message, queued steering
        (else follow-up) messages start the run instead. The keyword arguments are as ``prompt``'s.
        """
        overrides = RunOverrides(
            model, max_turns, before_tool_call, prepare_next_turn, stream_options, first_tool_choice
        )
        self._check_idle("continuing")
        messages = self._state.messages
        if not messages:
            raise ValueError("No messages to continue from")
        if getattr(messages[-1], "role", None) != "assistant":
            await self._run([], overrides)  # from the transcript as it is
        elif steering := _drain(self._steering, self.steering_mode):
            await self._run(steering, overrides, skip_initial_steering_poll=True)
        elif follow_ups := _drain(self._follow_ups, self.follow_up_mode):
            await self._run(follow_ups, overrides)
        else:
            raise ValueError("Cannot continue from message role: assistant")

    # ------------------------------------------------------------ the run

    async def _run(
        self, prompts: list[Message], overrides: RunOverrides, skip_initial_steering_poll: bool = False
    ) -> None:
        model = overrides.model or self._state.model
        if model is None:
            raise ValueError("No model configured")
        state = self._state
        with self._busy(overrides.model) as active:
            state.is_streaming = True
            state.streaming_message = None
            state.error_message = None
            signal = active.controller.signal
            try:
                context = Context(state.system_prompt, list(state.messages), list(state.tools))
                config = self._loop_config(model, overrides, skip_initial_steering_poll)
                await run_agent_loop(prompts, context, config, self._process_event, signal)
            except asyncio.CancelledError:
                # Cancelled from outside (a kernel interrupt cancels the cell's task):
                # tools see the abort, and every tool call keeps exactly one result.
                active.controller.abort()
                await self._close_cancelled_run(active.ended_calls)
                raise
            except Exception as error:  # noqa: BLE001 - reported as a failed assistant message, as pi does
                await self._report_failure(error, model, signal.aborted)
            finally:
                state.is_streaming = False
                state.streaming_message = None
                state.pending_tool_calls = set()
                # The run is over: what it did not take is not for the next one (pi: clearAllQueues).
                self._unsent += self.clear_all_queues()

    @contextlib.contextmanager
    def _busy(self, model: Model | None = None) -> Iterator[_ActiveRun]:
        """The agent is busy while the block runs (set before any await: a second ``prompt()`` sees it)."""
        active = _ActiveRun(AbortController(), model)
        self._active = active
        try:
            yield active
        finally:
            self._active = None
            active.done.set()

    def _loop_config(self, model: Model, overrides: RunOverrides, skip_initial_steering_poll: bool) -> AgentLoopConfig:
        skip = skip_initial_steering_poll

        def get_steering_messages() -> list[Message]:
            nonlocal skip
            if skip:
                skip = False
                return []
            return _drain(self._steering, self.steering_mode)

        hook = overrides.prepare_next_turn or self.prepare_next_turn

        def prepare_next_turn(context: Context) -> Any:
            """Before each request: the current system prompt and tools (so ``state.system_prompt`` and
            ``state.tools`` set during a run apply from the next request on), then the run's hook."""
            context.system_prompt = self._state.system_prompt
            context.tools = list(self._state.tools)
            return hook(context) if hook is not None else None

        return AgentLoopConfig(
            model=model,
            stream_fn=self.stream_fn,
            convert_to_llm=self.convert_to_llm,
            transform_context=self.transform_context,
            before_tool_call=overrides.before_tool_call or self.before_tool_call,
            after_tool_call=self.after_tool_call,
            tool_execution=self.tool_execution,
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=lambda: _drain(self._follow_ups, self.follow_up_mode),
            should_stop_after_turn=self.should_stop_after_turn,
            prepare_next_turn=prepare_next_turn,
            stream_options=overrides.stream_options or self.stream_options,
            max_turns=overrides.max_turns if overrides.max_turns is not None else self.max_turns,
            first_tool_choice=overrides.first_tool_choice or self.first_tool_choice,
            max_tool_result_chars=self.tool_result_limit(),
            compaction=self.compaction,
            before_request=self._check_budget,
        )

    def tool_result_limit(self) -> int | None:
        """The characters of a tool result the model gets: ``max_tool_result_chars``, and, with compaction on,
        at most half the model's window (``CHARS_PER_TOKEN``), so one result never fills the window alone;
        ``None``: no bound. During a run, the run's model's window."""
        limit = self.max_tool_result_chars
        model = self._model()
        if limit is None or model is None or not self.compaction.enabled:
            return limit
        return min(limit, max(model.resolved_context_window // 2 * CHARS_PER_TOKEN, 1_000))

    def _model(self) -> Model | None:
        """The active run's model, else ``state.model``."""
        active = self._active
        return active.model if active is not None and active.model is not None else self._state.model

    def _check_budget(self, context: Context) -> str | None:
        model = self._model()
        if model is None or (self.budget.usd is None and self.budget.tokens is None):
            return None
        return budget_stop(self.usage, self.budget, model, context)

    async def compact(self) -> CompactionEvent | None:
        """Compact the transcript now (``%pi compact``): everything before the last prompt becomes the
        summary; ``None`` when there is nothing to compact.

        Listeners get the ``compaction`` event. Raises while a run is active. The compaction is a run of
        its own: ``prompt()`` meanwhile raises, ``abort()`` stops the summary request (nothing changes), and
        the result applies only to the conversation it summarised.
        """
        self._check_idle("compacting")
        model = self._state.model
        if model is None:
            raise ValueError("No model configured")
        # The summary request is paid too: the budget is asked first, as before every request.
        stop = self._check_budget(Context(self._state.system_prompt, list(self._state.messages), []))
        if stop:
            raise BudgetExceeded(stop)
        state = self._state
        snapshot = list(state.messages)
        context = Context(state.system_prompt, list(snapshot), list(state.tools))
        compaction = dataclasses.replace(self.compaction, keep_recent_tokens=0)
        config = AgentLoopConfig(
            model, stream_fn=self.stream_fn, stream_options=self.stream_options, compaction=compaction
        )
        with self._busy() as active:
            return await compact_context(
                context,
                config,
                "manual",
                self._process_event,
                active.controller.signal,
                still_current=lambda: state.messages == snapshot,
            )

    async def _process_event(self, event: AgentEvent) -> None:
        reduce_agent_state(self._state, event)
        active = self._active
        match event:
            case MessageEndEvent(message=AssistantMessage() as message):
                self.usage.add(f"{message.provider}:{message.model}", message.usage)
            case CompactionEvent(usage=usage) if usage is not None:
                self.usage.add(f"{event.provider}:{event.model}", usage)
            case ToolExecutionEndEvent() if active is not None:
                active.ended_calls[event.tool_call_id] = event
            case TurnStartEvent() if active is not None:
                active.ended_calls.clear()
        await self._notify(event)

    async def _notify(self, event: AgentEvent) -> None:
        for listener in self._listeners:
            try:
                await call_hook(listener, event)
            except Exception:  # a broken listener must not break the run
                logger.exception("Agent listener %r failed on a %s event", listener, event.type)

    async def _close_cancelled_run(self, ended_calls: dict[str, ToolExecutionEndEvent]) -> None:
        """Answer the calls a cancelled run left open: the state at once, then the listeners, as far as a
        further cancellation lets them."""
        events = closing_events_for_cancelled_run(self._state, ended_calls, OPERATION_ABORTED, self.tool_result_limit())
        for event in events:
            reduce_agent_state(self._state, event)
        for event in events:
            await self._notify(event)

    async def _report_failure(self, error: Exception, model: Model, aborted: bool) -> None:
        """A run that raised ends with a failed assistant message and the closing events."""
        text = str(error) or type(error).__name__
        message = admit(error_message(model, text, "aborted" if aborted else "error"))
        for event in (
            MessageStartEvent(message),
            MessageEndEvent(message),
            TurnEndEvent(message, []),
            AgentEndEvent([message]),
        ):
            await self._process_event(event)


def _prompt_messages(prompt: PromptInput, images: Sequence[ImageContent] | None) -> list[Message]:
    if isinstance(prompt, str):
        return [UserMessage([TextContent(prompt), *(images or ())])]
    if isinstance(prompt, (list, tuple)):
        return list(prompt)
    return [prompt]


# ---------------------------------------------------------------- a cancelled run


def unanswered_tool_calls(messages: list[Any]) -> list[ToolCall]:
    """The last assistant message's tool calls that have no result message (none after an error or abort)."""
    answered: set[str] = set()
    for message in reversed(messages):
        role = getattr(message, "role", None)
        if role == "tool_result":
            answered.add(message.tool_call_id)
        elif role == "assistant" and message.stop_reason not in ("error", "aborted"):
            return [call for call in message.tool_calls if call.id not in answered]
        else:
            return []
    return []


def closing_events_for_cancelled_run(
    state: AgentState, ended_calls: dict[str, ToolExecutionEndEvent], text: str, max_chars: int | None = None
) -> list[AgentEvent]:
    """The events that close a run cancelled from outside (the task awaiting ``prompt()`` was cancelled),
    so the transcript still gives every tool call one result.

    A message cut off while streaming ends as ``aborted`` with what had streamed, closing its turn.
    Every unanswered call of the last assistant message gets a result message (masked and bounded as
    any): a call that had finished (in ``ended_calls``) keeps its real result, since its side effects
    happened; the others get ``text`` as an error (and a ``tool_execution_end`` if pending). Then ``agent_end``.
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
    results: list[ToolResultMessage] = []
    for call in unanswered_tool_calls(messages):
        ended = ended_calls.get(call.id)
        if ended is not None:
            finalized = FinalizedToolCall(call, ended.result, ended.is_error)
        else:
            finalized = failed_call(call, text)
            if call.id in state.pending_tool_calls:
                events.append(ToolExecutionEndEvent(call.id, call.name, finalized.result, True))
        results.append(create_tool_result_message(finalized, max_chars))
        events += [MessageStartEvent(results[-1]), MessageEndEvent(results[-1])]
    events.append(AgentEndEvent(list(results)))
    return events


# ---------------------------------------------------------------- queues


def _drain(queue: deque[Message], mode: QueueMode) -> list[Message]:
    """``all``: every queued message; ``one-at-a-time``: the oldest one."""
    taken: list[Message] = []
    with contextlib.suppress(IndexError):  # cleared from another thread meanwhile
        for _ in range(len(queue) if mode == "all" else min(len(queue), 1)):
            taken.append(queue.popleft())
    return taken


# ---------------------------------------------------------------- usage and budget


@dataclass
class ModelTotals:
    requests: int = 0
    input: int = 0
    """Prompt tokens, cached ones included."""
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    """Prompt tokens written to the provider's cache (Anthropic bills them apart)."""
    cost: float = 0.0
    priced: bool = False
    """At least one request had a known price."""
    last_prompt_tokens: int = 0
    """The prompt size of the latest request (for the context meter)."""


@dataclass
class UsageLedger:
    by_model: dict[str, ModelTotals] = field(default_factory=dict)
    """``provider:model`` → totals."""

    def add(self, model: str, usage: Usage) -> None:
        totals = self.by_model.setdefault(model, ModelTotals())
        totals.requests += 1
        totals.input += usage.prompt_tokens
        totals.output += usage.output
        totals.cache_read += usage.cache_read
        totals.cache_write += usage.cache_write
        if usage.cost is not None:
            totals.cost += usage.cost
            totals.priced = True
        if usage.prompt_tokens:
            totals.last_prompt_tokens = usage.prompt_tokens

    @property
    def cost(self) -> float:
        return sum(totals.cost for totals in self.by_model.values())

    @property
    def tokens(self) -> int:
        return sum(totals.input + totals.output for totals in self.by_model.values())


class BudgetExceeded(RuntimeError):
    """A request (``Agent.compact``'s summary) was not sent: it would cross the budget; ``str()`` says why."""


@dataclass
class Budget:
    usd: float | None = None
    """US dollars the session may spend; ``None``: no limit."""
    tokens: int | None = None
    """Tokens (in + out) the session may spend; ``None``: no limit."""


def usd(amount: float) -> str:
    """``$5.00``, or four decimals under ten cents (``$0.0010``), so a small budget never reads ``$0.00``."""
    return f"${amount:.2f}" if amount >= 0.1 or amount == 0 else f"${amount:.4f}"


def budget_stop(ledger: UsageLedger, budget: Budget, model: Model, context: Context) -> str | None:
    """Why the next request must not be sent (its estimated prompt would cross the budget), or ``None``."""
    prompt = estimate_context_tokens(context)
    if budget.tokens is not None and ledger.tokens + prompt > budget.tokens:
        return (
            f"Token budget reached: {ledger.tokens:,} of {budget.tokens:,} tokens spent, and the next request "
            f"needs about {prompt:,} more. Nothing was sent. Raise it with %pi budget --tokens N "
            "(or PI_TOKEN_BUDGET)."
        )
    if budget.usd is not None:
        price: ModelCost | None = model.resolved_cost
        totals = ledger.by_model.get(f"{model.provider}:{model.id}")
        estimate = request_estimate(prompt, totals.last_prompt_tokens if totals else 0, price)
        if ledger.cost + estimate > budget.usd or ledger.cost >= budget.usd:
            return (
                f"Budget reached: ${ledger.cost:.4f} of {usd(budget.usd)} spent, and the next request would "
                f"cost about ${estimate:.4f} more. Nothing was sent. Raise it with %pi budget USD (or PI_BUDGET)."
            )
    return None


def request_estimate(prompt: int, last_prompt: int, price: ModelCost | None) -> float:
    """US dollars a ``prompt``-token request will cost at least: where the model has a cache price, the
    part the previous request sent (``last_prompt``) is read from the cache and the rest is written to it
    (or sent at the input price when writes are not billed apart); elsewhere all of it at the input price."""
    if price is None:
        return 0.0
    if not price.cache_read:
        return prompt * price.input / 1_000_000
    cached = min(last_prompt, prompt)
    return (cached * price.cache_read + (prompt - cached) * (price.cache_write or price.input)) / 1_000_000
