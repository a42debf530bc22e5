"""What a provider stream yields, and what it is given.

``AssistantMessageStream`` wraps a provider's async generator of events. It
never raises: a provider reports failure with an ``error`` event whose message
has ``stop_reason`` ``"error"`` or ``"aborted"``; anything that escapes the
generator anyway is turned into such an event here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pi_kernel.ai.abort import AbortSignal
from pi_kernel.ai.messages import AssistantMessage, Message, ToolCall
from pi_kernel.ai.tool import Tool

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
        try:
            async for event in self._events:
                if event.type in ("done", "error"):
                    self._result = event.partial
                yield event
                if self._result is not None:
                    return
        except Exception as error:  # noqa: BLE001 - a stream never raises; see module docstring
            message = self._fallback(f"{type(error).__name__}: {error}")
            self._result = message
            yield AssistantMessageEvent("error", message)
            return
        finally:
            # A reader that stops early must not leave the provider's generator
            # (and its HTTP response) open until garbage collection.
            close = getattr(self._events, "aclose", None)
            if close is not None:
                await close()
        if self._result is None:
            message = self._fallback("Stream ended without a done or error event")
            self._result = message
            yield AssistantMessageEvent("error", message)

    async def result(self) -> AssistantMessage:
        async for _ in self:
            pass
        assert self._result is not None
        return self._result
