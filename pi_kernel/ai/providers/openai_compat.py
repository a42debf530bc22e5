"""Streaming from any OpenAI-compatible chat-completions server.

One request, read by a producer task that puts chunks on a queue; the stream's
async generator turns them into events (``openai_chunks``). The split makes an
abort prompt wherever it lands: the signal's listener cancels the producer,
which closes the HTTP response at once, whether it was connecting, sleeping
before a retry or waiting for the next chunk, and the generator ends the
message with ``aborted``, partial content kept. The producer never outlives the
generator. Retries (``retry``) happen only before the first chunk.

``openai`` is imported on the first request, not at kernel start.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pi_kernel.ai.abort import AbortSignal
from pi_kernel.ai.models import KNOWN_PROVIDERS, Model, error_message
from pi_kernel.ai.providers.openai_chunks import ChunkAssembler
from pi_kernel.ai.providers.openai_convert import build_request_body
from pi_kernel.ai.providers.retry import DEFAULT_RETRY_POLICY, RetryPolicy, retry_delay
from pi_kernel.ai.secrets import MIN_SECRET_CHARS, mask, secret_values
from pi_kernel.ai.stream_types import AssistantMessageEvent, AssistantMessageStream, Context, StreamOptions

if TYPE_CHECKING:
    import ssl

    from openai import AsyncOpenAI

KEYLESS_PLACEHOLDER = "not-needed"
"""Sent as the key to local servers that need none (the client insists on one)."""
HOSTED_PROVIDERS = frozenset({"openai", "deepseek", "openrouter"})
_ABORTED_TEXT = "Request was aborted"


def stream_openai_compatible(
    model: Model, context: Context, options: StreamOptions, *, retry_policy: RetryPolicy | None = None
) -> AssistantMessageStream:
    """Stream one assistant message; never raises (see ``AssistantMessageStream``)."""
    events = _stream_events(model, context, options, retry_policy or DEFAULT_RETRY_POLICY)
    return AssistantMessageStream(events, lambda text: error_message(model, text))


def resolve_api_key(model: Model, options: StreamOptions) -> str | None:
    """The key to send: explicit, from the model's variable, or a placeholder for local servers.

    ``None`` when a hosted provider at its own URL has no key: the request
    could only fail with 401, so it is not made.
    """
    if options.api_key:
        return options.api_key
    variable = model.resolved_api_key_env
    key = os.environ.get(variable) if variable else None
    if key:
        return key
    default_url = KNOWN_PROVIDERS.get(model.provider, (None, None))[0]
    if model.provider in HOSTED_PROVIDERS and model.resolved_base_url == default_url:
        return None
    return KEYLESS_PLACEHOLDER


def describe_error(error: BaseException, secret: str | None) -> str:
    """A one-line error text: HTTP errors start with their status code.

    The API key is cut out wherever it appears: servers echo it back in 401
    texts, and this text ends up in notebooks and saved sessions.
    """
    import openai

    if isinstance(error, openai.APIStatusError):
        body = error.body
        detail = body.get("message") if isinstance(body, dict) else body
        if not isinstance(detail, str) or not detail:
            detail = error.response.reason_phrase or type(error).__name__
        text = f"{error.status_code} {detail}"
        code = body.get("code") if isinstance(body, dict) else None
        if code == "context_length_exceeded" and code not in text:
            text += f" ({code})"  # what ``is_context_overflow`` looks for, whatever the message says
    elif isinstance(error, openai.APIConnectionError):
        cause = error.__cause__
        text = f"{error.message} {type(cause).__name__}: {cause}" if cause else error.message
    elif isinstance(error, openai.APIError):
        text = error.message  # an error object sent inside the stream
    else:
        text = f"{type(error).__name__}: {error}"
    return _masked(text, secret)


def _masked(text: str, secret: str | None) -> str:
    """An error text entering the conversation: ``mask`` with this request's key too (it may come from a
    ``.env`` file rather than the environment)."""
    known = secret_values()
    if secret and secret != KEYLESS_PLACEHOLDER and len(secret) >= MIN_SECRET_CHARS:
        known = sorted({secret, *known}, key=len, reverse=True)
    return mask(text, known)


@dataclass(frozen=True, slots=True)
class _Opened:
    """The HTTP response arrived (status 200): the message has started."""


@dataclass(frozen=True, slots=True)
class _Ended:
    error: BaseException | None = None
    """Why the stream ended early, or ``None`` at its normal end."""


_OPENED = _Opened()


async def _stream_events(
    model: Model, context: Context, options: StreamOptions, policy: RetryPolicy
) -> AsyncIterator[AssistantMessageEvent]:
    assembler = ChunkAssembler(model, options.max_tokens)
    signal = options.signal
    if signal is not None and signal.aborted:
        yield assembler.fail("aborted", _abort_text(signal.reason))
        return
    api_key = resolve_api_key(model, options)
    if api_key is None:
        variable = model.resolved_api_key_env or "an API key variable"
        yield assembler.fail("error", f"No API key for provider {model.provider}: set {variable}")
        return
    try:
        body = build_request_body(model, context, options, model.resolved_compat())
    except Exception as error:  # noqa: BLE001 - a bad tool schema must end the stream, not raise
        yield assembler.fail("error", f"Could not build the request: {type(error).__name__}: {error}")
        return

    request = _Request(functools.partial(_request_chunks, model, api_key, body, options, policy), signal)
    started = False
    try:
        try:
            while True:
                item = await request.queue.get()
                if signal is not None and signal.aborted:
                    final = [assembler.fail("aborted", _abort_text(signal.reason))]
                    break
                if isinstance(item, _Ended):
                    final = _final_events(assembler, item.error, api_key)
                    break
                if item is _OPENED:
                    if not started:
                        started = True
                        yield assembler.start()
                    continue
                for event in assembler.feed(item):
                    yield event
        except Exception as error:  # noqa: BLE001 - a stream never raises; partial content is kept
            final = [assembler.fail("error", _masked(f"{type(error).__name__}: {error}", api_key))]
        # The reader stops at the final event, so the request is finished
        # (its connection closed) before that event goes out, not at GC time.
        await request.stop(cancel=final[-1].partial.stop_reason == "aborted")
        for event in final:
            yield event
    finally:
        await request.stop(cancel=True)


def _final_events(assembler: ChunkAssembler, error: BaseException | None, api_key: str) -> list[AssistantMessageEvent]:
    if error is None or (assembler.finish_reason is not None and _is_transport_error(error)):
        # A connection lost after the finish_reason loses only the usage chunk.
        return assembler.finish()
    return [assembler.fail("error", describe_error(error, api_key))]


def _abort_text(reason: Any) -> str:
    return reason if isinstance(reason, str) and reason else _ABORTED_TEXT


class _Request:
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
        self.queue.put_nowait(_Ended())  # wake the reader

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


def _is_transport_error(error: BaseException) -> bool:
    import openai

    return isinstance(error, openai.APIConnectionError)


async def _request_chunks(
    model: Model, api_key: str, body: dict[str, Any], options: StreamOptions, policy: RetryPolicy, queue: Any
) -> None:
    """Make the request (with retries) and put every chunk on ``queue``, then ``_Ended``."""
    try:
        client = _client(model, api_key, options.timeout)
    except Exception as error:  # noqa: BLE001 - reported as the stream's error
        queue.put_nowait(_Ended(error))
        return
    params = {key: body[key] for key in ("model", "messages", "stream")}
    extra_body = {key: value for key, value in body.items() if key not in params}
    attempt = 0
    try:
        while True:
            received = False
            try:
                response = await client.chat.completions.create(**params, extra_body=extra_body)
                queue.put_nowait(_OPENED)
                try:
                    async for chunk in response:
                        received = True
                        queue.put_nowait(chunk)
                finally:
                    await response.close()
                queue.put_nowait(_Ended())
                return
            except Exception as error:  # noqa: BLE001 - judged, then retried or reported
                delay = None if received else retry_delay(error, attempt, options.max_retries, policy)
                if delay is None:
                    queue.put_nowait(_Ended(error))
                    return
                attempt += 1
                await asyncio.sleep(delay)
    finally:
        await client.close()


_SSL_CONTEXT: ssl.SSLContext | None = None


def _client(model: Model, api_key: str, timeout: float | None) -> AsyncOpenAI:
    """A client for one request, with the client's own retries off.

    A client per request keeps no connection tied to an event loop that may
    be gone by the next turn; the costly part, the TLS context, is built once.
    """
    import openai

    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = _default_ssl_context()
    http_client = openai.DefaultAsyncHttpxClient(verify=_SSL_CONTEXT) if _SSL_CONTEXT is not None else None
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=model.resolved_base_url,
        max_retries=0,
        timeout=timeout,
        http_client=http_client,
    )


def _default_ssl_context() -> ssl.SSLContext | None:
    """The HTTP library's own default context (same trust store), or ``None`` to let it decide."""
    for module_name in ("httpx2", "httpx"):
        try:
            module = __import__(module_name)
            return module.create_ssl_context()
        except (ImportError, AttributeError, TypeError):
            continue
    return None
