"""What a provider is asked with and what it answers: the ``Model``, one request's ``Context`` and
``StreamOptions``, the ``AssistantMessageStream`` of events it yields, and the ``AbortSignal`` that stops it.

**Models.** Every OpenAI-compatible server speaks the same chat-completions protocol with
small differences (which field carries reasoning, whether ``strict`` is
accepted, ...). ``Compat`` names each difference once; ``detect_compat`` fills
it from the provider name and base URL; a model can override any flag.

**Streams.** ``AssistantMessageStream`` wraps a provider's async generator of events. It
never raises: a provider reports failure with an ``error`` event whose message
has ``stop_reason`` ``"error"`` or ``"aborted"``; anything that escapes the
generator anyway is turned into such an event here.

**Cancellation.** ``AbortController`` / ``AbortSignal`` cross threads, modelled on the web platform's pair,
as pi uses it. A signal is read from the event loop (``await signal.wait()``), from worker threads running
sync tools (``signal.aborted``), and set from anywhere: a kernel interrupt handler, a widget callback on a
subshell thread. So listeners run on the aborting thread, and ``wait`` gets the reason through a
``concurrent.futures.Future`` (``asyncio.wrap_future``). ``put_threadsafe`` is the one way a thread's result
(a decoded piece, a tool's update) enters a loop's ``asyncio.Queue``.

Long: the model, the request and the stream types and cancellation are what every provider is written against,
kept together.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pi_kernel.ai.messages import AssistantMessage, Message, ToolCall, Usage

if TYPE_CHECKING:
    from pi_kernel.ai.tool import Tool

ThinkingFormat = Literal["openai", "deepseek", "openrouter"]


@dataclass(frozen=True, slots=True)
class Compat:
    send_strict_field: bool = True
    """Whether a tool's ``function`` may carry a ``strict`` key at all; some
    servers (Ollama and similar) reject unknown keys."""
    supports_strict_mode: bool = False
    """Whether ``strict: true`` constrains decoding to the schema. Without it
    no ``strict`` key is sent (not even ``false``, as pi)."""
    empty_tools_with_tool_history: bool = True
    """Send ``tools: []`` when the history holds tool calls but no tool is
    active (as pi: LiteLLM and other proxies in front of Anthropic need it).
    Off where the server answers 400 to an empty array (OpenAI, DeepSeek, vLLM)."""
    supports_developer_role: bool = False
    """Send the system prompt as ``developer`` (OpenAI reasoning models)."""
    supports_usage_in_streaming: bool = True
    """Send ``stream_options: {include_usage: true}``."""
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_tokens"
    thinking_format: ThinkingFormat | None = None
    """``openai``: ``reasoning_effort``; ``deepseek``: ``thinking: {type}``; ``openrouter``: ``reasoning: {effort}``."""
    requires_reasoning_content_on_assistant_messages: bool = False
    """DeepSeek reasoning models: every replayed assistant message carries
    ``reasoning_content`` (``""`` when it had none), or the API answers 400."""
    supports_tool_choice: bool = True
    reasoning_tokens_outside_completion: bool = False
    """Gemini: ``completion_tokens`` leaves the thinking tokens out (``total_tokens`` has them), so the
    output is read as ``total_tokens - prompt_tokens`` when that is larger."""
    usage_cost_field: bool = False
    """OpenRouter: the usage chunk carries the request's ``cost`` in US dollars (used when the model
    table has no price for the model)."""
    reasoning_effort_off: str | None = None
    """The ``reasoning_effort`` that turns thinking off where the model accepts one (``none``: Gemini 2.5
    Flash and Flash-Lite); ``None``: thinking off sends no knob (the model's default stays)."""


@dataclass(frozen=True, slots=True)
class ModelCost:
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    def of(self, usage: Usage) -> float:
        """Each kind of token at its own price (``usage.input`` excludes cache reads and writes, as in pi)."""
        return (
            usage.input * self.input
            + usage.output * self.output
            + usage.cache_read * self.cache_read
            + usage.cache_write * self.cache_write
        ) / 1_000_000


KNOWN_PROVIDERS: dict[str, tuple[str | None, str | None]] = {
    # provider: (default base URL, environment variable holding the key)
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "deepseek": ("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY"),
    "anthropic": ("https://api.anthropic.com", "ANTHROPIC_API_KEY"),
    "ollama": ("http://127.0.0.1:11434/v1", None),
    "vllm": ("http://127.0.0.1:8000/v1", None),
    "llamacpp": ("http://127.0.0.1:8080/v1", None),
    "openai-compatible": (None, "OPENAI_API_KEY"),
    "local": (None, None),
}

MODEL_DATA = json.loads((Path(__file__).parent / "model_data.json").read_text(encoding="utf-8"))
"""``model_data.json``: published prices and context windows of well-known models (data, not code)."""

KNOWN_COSTS: dict[str, ModelCost] = {name: ModelCost(*prices) for name, prices in MODEL_DATA["prices"].items()}
"""Model id → prices; used to show cost and check budgets. ``%pi price`` adds to it."""


DEFAULT_CONTEXT_WINDOW = 128_000
"""Tokens assumed when neither the user, the table below nor the server says."""

KNOWN_CONTEXT_WINDOWS: dict[str, int] = dict(MODEL_DATA["context_windows"])
"""Model id → context window (tokens); a prefix match covers dated variants (``gpt-4o-2024-08-06``).
``Model(context_window=...)`` or the user's setting wins."""


def _known(table: dict[str, Any], model_id: str) -> Any:
    """``table``'s entry for ``model_id``: exact, else the longest known id it starts with (a dated variant
    such as ``gpt-4o-mini-2024-07-18`` has its family's price and window)."""
    if model_id in table:
        return table[model_id]
    prefixes = [known for known in table if model_id.startswith(known + "-")]
    return table[max(prefixes, key=len)] if prefixes else None


def known_cost(model_id: str) -> ModelCost | None:
    cost: ModelCost | None = _known(KNOWN_COSTS, model_id)
    return cost


@dataclass(frozen=True, slots=True)
class Model:
    id: str
    """The model name the API expects (``gpt-4o-mini``, ``deepseek-chat``)."""
    provider: str = "openai"
    base_url: str | None = None
    """``None``: the provider's default URL."""
    api_key_env: str | None = None
    """Environment variable with the key; ``None``: the provider's default."""
    name: str | None = None
    reasoning: bool | None = None
    """Whether it is a reasoning model; ``None``: guessed from the id."""
    context_window: int | None = None
    """Tokens the model reads at most; ``None``: ``KNOWN_CONTEXT_WINDOWS``, else ``DEFAULT_CONTEXT_WINDOW``
    (see ``resolved_context_window``)."""
    max_tokens: int = 16_384
    cost: ModelCost | None = None
    compat: dict[str, object] = field(default_factory=dict)
    """Overrides of ``Compat`` flags by name."""

    def __post_init__(self) -> None:
        # A misspelt flag would otherwise surface only as a failed request.
        unknown = sorted(set(self.compat) - set(Compat.__dataclass_fields__))
        if unknown:
            known = ", ".join(Compat.__dataclass_fields__)
            listed = ", ".join(unknown)
            raise ValueError(f"Unknown compat flag(s) for model {self.id!r}: {listed}; known flags: {known}")

    @property
    def resolved_base_url(self) -> str | None:
        return self.base_url or KNOWN_PROVIDERS.get(self.provider, (None, None))[0]

    @property
    def resolved_api_key_env(self) -> str | None:
        return self.api_key_env or KNOWN_PROVIDERS.get(self.provider, (None, None))[1]

    @property
    def is_reasoning(self) -> bool:
        if self.reasoning is not None:
            return self.reasoning
        model_id = self.id.lower()
        if self.provider == "anthropic":
            return not model_id.startswith(("claude-3-5", "claude-3-haiku", "claude-3-opus", "claude-3-sonnet"))
        if self.provider == "gemini" or model_id.startswith("gemini-"):  # 2.0 and 1.5 do not think
            return model_id.startswith(GEMINI_THINKING_PREFIXES) or "thinking" in model_id
        return model_id.startswith(("o1", "o3", "o4", "gpt-5")) or "reasoner" in model_id or "-r1" in model_id

    @property
    def resolved_cost(self) -> ModelCost | None:
        return self.cost or known_cost(self.id)

    @property
    def resolved_context_window(self) -> int:
        return self.context_window or self._known_window() or DEFAULT_CONTEXT_WINDOW

    @property
    def context_window_source(self) -> str:
        """Where ``resolved_context_window`` comes from: ``set``, ``known`` or ``default``."""
        if self.context_window:
            return "set"
        return "known" if self._known_window() else "default"

    def _known_window(self) -> int | None:
        """The table's window; an OpenRouter id (``anthropic/claude-sonnet-4.5``) is looked up as its maker's
        (``claude-sonnet-4-5``). Its price is not: OpenRouter reports what each request cost."""
        window: int | None = _known(KNOWN_CONTEXT_WINDOWS, self.id)
        if window is None and self.provider == "openrouter" and "/" in self.id:
            name = self.id.split("/", 1)[1]
            window = _known(KNOWN_CONTEXT_WINDOWS, name) or _known(KNOWN_CONTEXT_WINDOWS, name.replace(".", "-"))
        return window

    def resolved_compat(self) -> Compat:
        detected = detect_compat(self.provider, self.resolved_base_url, self.id, self.is_reasoning)
        overrides: dict[str, Any] = dict(self.compat)  # set by the user: dataclasses.replace takes any value
        if overrides.get("supports_strict_mode") is True:
            # A server said to support strict mode takes the ``strict`` key (unless told otherwise).
            overrides.setdefault("send_strict_field", True)
        return dataclasses.replace(detected, **overrides)

    def with_(self, **changes: Any) -> Model:
        return dataclasses.replace(self, **changes)


def detect_provider(base_url: str | None) -> str:
    """Guess the provider from a base URL (``openai-compatible`` if unknown)."""
    url = (base_url or "").lower()
    for needle, provider in (
        ("api.openai.com", "openai"),
        ("deepseek.com", "deepseek"),
        ("openrouter.ai", "openrouter"),
        ("generativelanguage.googleapis.com", "gemini"),
        (":11434", "ollama"),
        ("ollama", "ollama"),
        (":8000", "vllm"),
        ("vllm", "vllm"),
        (":8080", "llamacpp"),
        ("llama", "llamacpp"),
    ):
        if needle in url:
            return provider
    return "openai-compatible"


GEMINI_THINKING_PREFIXES = ("gemini-2.5", "gemini-3")
"""Gemini models that think: they take ``reasoning_effort``; older ones (2.0, 1.5) refuse it."""


def detect_compat(provider: str, base_url: str | None, model_id: str, reasoning: bool) -> Compat:
    """The flags of ``provider``, or of the server its base URL names.

    The URL decides for ``openai-compatible``, and also for ``openai`` when it
    clearly names another server (``Model``'s default provider is ``openai``,
    so ``Model("qwen3", base_url="http://localhost:11434/v1")`` is Ollama).
    """
    if base_url and provider in ("openai", "openai-compatible"):
        from_url = detect_provider(base_url)
        if provider == "openai-compatible" or from_url != "openai-compatible":
            provider = from_url
    if provider == "openai":
        return Compat(
            empty_tools_with_tool_history=False,
            supports_strict_mode=True,
            supports_developer_role=reasoning,
            max_tokens_field="max_completion_tokens",
            thinking_format="openai" if reasoning else None,
        )
    if provider == "openrouter":
        # Reasoning arrives as ``delta.reasoning``; the knob is ``reasoning: {effort}``, which OpenRouter
        # passes on to whichever upstream model thinks (and drops for the others).
        return Compat(supports_strict_mode=True, thinking_format="openrouter", usage_cost_field=True)
    if provider == "gemini":
        # Gemini's OpenAI-compatible endpoint refuses ``tools: []`` and unknown tool keys such as ``strict``;
        # its thinking is set with ``reasoning_effort`` (thinking models only) and billed outside
        # ``completion_tokens``; only 2.5 Flash and Flash-Lite can stop thinking (``reasoning_effort: none``).
        return Compat(
            send_strict_field=False,
            empty_tools_with_tool_history=False,
            thinking_format="openai" if reasoning else None,
            reasoning_tokens_outside_completion=True,
            reasoning_effort_off="none" if model_id.lower().startswith("gemini-2.5-flash") else None,
        )
    if provider == "deepseek":
        return Compat(
            empty_tools_with_tool_history=False,
            thinking_format="deepseek",
            requires_reasoning_content_on_assistant_messages=reasoning,
        )
    if provider == "vllm":
        return Compat(send_strict_field=False, empty_tools_with_tool_history=False)
    return Compat(send_strict_field=False)  # Ollama, llama.cpp, the local model and any other server


def parse_model_spec(spec: str, provider: str | None = None) -> Model:
    """``"gpt-4o-mini"``, ``"deepseek:deepseek-chat"``, ``"anthropic:claude-sonnet-4-5"`` or ``"ollama:qwen3"``
    → Model (a bare ``claude-…`` or ``gemini-…`` id names its maker)."""
    if ":" in spec and spec.split(":", 1)[0] in KNOWN_PROVIDERS:
        provider, spec = spec.split(":", 1)
    if provider is None:
        by_prefix = {"deepseek": "deepseek", "claude": "anthropic", "gemini": "gemini"}
        provider = next((name for prefix, name in by_prefix.items() if spec.startswith(prefix)), "openai")
    return Model(id=spec, provider=provider)


def error_message(model: Model, text: str, stop_reason: str = "error") -> AssistantMessage:
    """An empty assistant message that ended in error (or abort)."""
    return AssistantMessage(
        content=[],
        stop_reason="aborted" if stop_reason == "aborted" else "error",
        model=model.id,
        provider=model.provider,
        error_message=text,
    )


# --- Streams: what a provider yields and is given

AssistantEventType = Literal[
    "start",
    "text_start",
    "text_delta",
    "text_end",
    "thinking_start",
    "thinking_delta",
    "thinking_end",
    "toolcall_start",
    "toolcall_delta",
    "toolcall_end",
    "done",
    "error",
]


@dataclass(slots=True)
class AssistantMessageEvent:
    type: AssistantEventType
    partial: AssistantMessage
    """The message as assembled so far (the final message on ``done``/``error``).
    It is the same object throughout one stream: readers must not keep it for
    later comparison."""
    content_index: int | None = None
    """Index of the content block the event is about (block events only)."""
    delta: str | None = None
    """New text for ``*_delta`` events (for ``toolcall_delta``: the raw JSON fragment)."""
    content: str | None = None
    """The whole text of the block on ``text_end`` / ``thinking_end``."""
    tool_call: ToolCall | None = None
    """The finished call on ``toolcall_end``."""

    @property
    def message(self) -> AssistantMessage:
        return self.partial


@dataclass(slots=True)
class Context:
    system_prompt: str | None = None
    messages: list[Message] = field(default_factory=list)
    tools: list[Tool] | None = None


ToolChoice = Literal["auto", "none", "required"] | str
"""``auto``, ``none``, ``required``, or the name of one tool."""


@dataclass(slots=True)
class StreamOptions:
    signal: AbortSignal | None = None
    api_key: str | None = None
    """Overrides the key read from the model's ``api_key_env``."""
    temperature: float | None = None
    max_tokens: int | None = None
    tool_choice: ToolChoice | None = None
    reasoning_effort: str | None = None
    """``low`` / ``medium`` / ``high`` for reasoning models that take it."""
    max_retries: int = 3
    """Retries for 408/409/429/5xx, with backoff honouring Retry-After."""
    timeout: float | None = 600.0
    extra_body: dict[str, Any] | None = None
    """Merged into the request body (provider-specific knobs)."""


class AssistantMessageStream:
    """Async-iterate the events; ``await result()`` for the final message."""

    def __init__(self, events: AsyncIterator[AssistantMessageEvent], fallback: Callable[[str], AssistantMessage]):
        self._events = events
        self._fallback = fallback
        self._result: AssistantMessage | None = None
        self._reader_done: asyncio.Event | None = None
        """Set while one reader drives the provider (``result()`` beside an ``async for``)."""

    def __aiter__(self) -> AsyncIterator[AssistantMessageEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[AssistantMessageEvent]:
        # One reader at a time drives the provider's generator; a second one
        # (typically ``result()`` awaited while another task iterates) waits for
        # it instead of re-entering the running generator, which would raise.
        while self._reader_done is not None:
            await self._reader_done.wait()
        if self._result is not None:
            return
        self._reader_done = asyncio.Event()
        reader = self._read()
        try:
            async for event in reader:
                yield event
        finally:
            try:
                await reader.aclose()  # closes the provider too when this reader stopped early
            finally:
                done, self._reader_done = self._reader_done, None
                done.set()

    async def _read(self) -> AsyncGenerator[AssistantMessageEvent, None]:
        failure = "Stream ended without a done or error event"
        try:
            async for event in self._events:
                if event.type in ("done", "error"):
                    self._result = event.partial
                yield event
                if self._result is not None:
                    return
        except Exception as error:  # noqa: BLE001 - a stream never raises; see module docstring
            failure = f"{type(error).__name__}: {error}"
        finally:
            # A reader that stops early must not leave the provider's generator
            # (and its HTTP response) open until garbage collection.
            close = getattr(self._events, "aclose", None)
            if close is not None:
                await close()
        self._result = self._fallback(failure)
        yield AssistantMessageEvent("error", self._result)

    async def result(self) -> AssistantMessage:
        async for _ in self:
            pass
        assert self._result is not None
        return self._result


# --- Cancellation that crosses threads


class AbortSignal:
    def __init__(self) -> None:
        self._aborted = False
        self._reason: Any = None
        self._listeners: list[Callable[[Any], object]] = []
        self._lock = threading.Lock()

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def add_listener(self, listener: Callable[[Any], object]) -> Callable[[], None]:
        """Call ``listener(reason)`` on abort (at once if already aborted).

        Returns a function that removes the listener.
        """
        with self._lock:
            if not self._aborted:
                self._listeners.append(listener)
                return lambda: self._remove(listener)
        listener(self._reason)
        return lambda: None

    def _remove(self, listener: Callable[[Any], object]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    async def wait(self) -> Any:
        """Wait until aborted; returns the reason."""
        if self._aborted:
            return self._reason
        aborted: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def settle(reason: Any) -> None:
            if aborted.set_running_or_notify_cancel():  # False once the waiter was cancelled
                aborted.set_result(reason)

        remove = self.add_listener(settle)
        try:
            return await asyncio.wrap_future(aborted)
        finally:
            remove()

    def throw_if_aborted(self) -> None:
        if self._aborted:
            raise asyncio.CancelledError(str(self._reason or "Operation aborted"))

    def _abort(self, reason: Any) -> None:
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
            self._reason = reason
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            try:
                listener(reason)
            except Exception:  # noqa: BLE001 - one broken listener must not stop the others
                pass


T = TypeVar("T")


def put_threadsafe(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[T], item: T) -> bool:
    """Put ``item`` in ``queue`` (read on ``loop``) from any thread, in call order; False once the loop is
    closed (nobody reads any more)."""
    try:
        loop.call_soon_threadsafe(queue.put_nowait, item)
    except RuntimeError:
        return False
    return True


class AbortController:
    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        """Abort the signal; idempotent and safe from any thread."""
        self.signal._abort("Operation aborted" if reason is None else reason)
