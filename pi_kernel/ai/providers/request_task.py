"""The producer task of one HTTP provider stream: its queue, its abort listener, and the texts it ends with.

Both HTTP providers (``openai_compat``, ``anthropic``) read their response the
same way: a producer task makes the request (with retries) and puts each
chunk or event on a queue, the stream's generator reads the queue. The split
makes an abort prompt wherever it lands: the signal's listener cancels the
producer, which closes the HTTP response at once, whether it was connecting,
sleeping before a retry or waiting for the next chunk.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pi_kernel.ai.models import AbortSignal
from pi_kernel.ai.secrets import MIN_SECRET_CHARS, mask, secret_values

if TYPE_CHECKING:
    from pi_kernel.ai.models import AssistantMessageEvent

KEYLESS_PLACEHOLDER = "not-needed"
"""Sent as the key to local servers that need none (the clients insist on one)."""
ABORTED_TEXT = "Request was aborted"


@dataclass(frozen=True, slots=True)
class Opened:
    """The HTTP response arrived (status 200): the message has started."""


@dataclass(frozen=True, slots=True)
class Ended:
    error: BaseException | None = None
    """Why the stream ended early, or ``None`` at its normal end."""


OPENED = Opened()


def abort_text(reason: Any) -> str:
    """The error text of an aborted stream: the abort's reason when it gave one."""
    return reason if isinstance(reason, str) and reason else ABORTED_TEXT


def masked_error(text: str, secret: str | None) -> str:
    """An error text entering the conversation: ``mask`` with this request's key too (it may come from a
    ``.env`` file rather than the environment). The one place provider errors are masked, where the streams
    are consumed; the agent's own run failures and the local engine's warnings pass through it too."""
    known = secret_values()
    if secret and secret != KEYLESS_PLACEHOLDER and len(secret) >= MIN_SECRET_CHARS:
        known = sorted({secret, *known}, key=len, reverse=True)
    return mask(text, known)


class RequestTask:
    """The producer task of one stream, its queue, and the abort listener that cancels it."""

    def __init__(
        self, produce: Callable[[asyncio.Queue[Any]], Coroutine[Any, Any, None]], signal: AbortSignal | None
    ) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] = self._loop.create_task(produce(self.queue))
        self._cancel_requested = False
        self._remove_listener = signal.add_listener(self._on_abort) if signal is not None else None

    def _on_abort(self, _reason: Any) -> None:
        # Runs on the aborting thread (a kernel interrupt, a widget callback).
        try:
            self._loop.call_soon_threadsafe(self._abort_on_loop)
        except RuntimeError:
            pass  # the loop is closed: nothing left to cancel

    def _abort_on_loop(self) -> None:
        self._cancel()
        self.queue.put_nowait(Ended())  # wake the reader

    def _cancel(self) -> None:
        # Only once: a second cancel would interrupt the task's cleanup (closing
        # the response) and leave the connection open.
        if not self._cancel_requested and not self._task.done():
            self._cancel_requested = True
            self._task.cancel()

    async def stop(self, cancel: bool) -> None:
        """Wait for the task to end (cancelling it first if asked); idempotent."""
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        if cancel:
            self._cancel()
        await asyncio.gather(self._task, return_exceptions=True)


_SSL_CONTEXT: list[ssl.SSLContext | None] = []


def shared_ssl_context() -> ssl.SSLContext | None:
    """The HTTP library's own default TLS context (same trust store), built once: a client per request keeps
    no connection tied to an event loop that may be gone by the next turn, and the context is the costly
    part. ``None`` lets the client decide."""
    if not _SSL_CONTEXT:
        _SSL_CONTEXT.append(_default_ssl_context())
    return _SSL_CONTEXT[0]


def _default_ssl_context() -> ssl.SSLContext | None:
    for module_name in ("httpx2", "httpx"):
        try:
            module = __import__(module_name)
            return module.create_ssl_context()
        except (ImportError, AttributeError, TypeError):
            continue
    return None


class Assembler(Protocol):
    """What turns one provider's items into pi's events (``ChunkAssembler``, ``AnthropicAssembler``)."""

    def start(self) -> AssistantMessageEvent: ...

    def feed(self, item: Any) -> list[AssistantMessageEvent]: ...

    def fail(self, stop_reason: Literal["error", "aborted"], error_message: str) -> AssistantMessageEvent: ...


async def relay(
    request: RequestTask,
    assembler: Assembler,
    signal: AbortSignal | None,
    final_events: Callable[[BaseException | None], list[AssistantMessageEvent]],
    api_key: str | None,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """The events of one request: ``start`` once the response arrived, each item's events, then the final
    ones (``final_events`` of how it ended; ``aborted`` when the signal fired). Never raises: a failure ends
    the stream with the partial content kept. The request is finished (its connection closed) before the
    final event goes out, not at GC time."""
    started = False
    try:
        try:
            while True:
                item = await request.queue.get()
                if signal is not None and signal.aborted:
                    final = [assembler.fail("aborted", abort_text(signal.reason))]
                    break
                if isinstance(item, Ended):
                    final = final_events(item.error)
                    break
                if item is OPENED:
                    if not started:
                        started = True
                        yield assembler.start()
                    continue
                for event in assembler.feed(item):
                    yield event
        except Exception as error:  # noqa: BLE001 - a stream never raises; partial content is kept
            final = [assembler.fail("error", masked_error(f"{type(error).__name__}: {error}", api_key))]
        await request.stop(cancel=final[-1].partial.stop_reason == "aborted")
        for event in final:
            yield event
    finally:
        await request.stop(cancel=True)
