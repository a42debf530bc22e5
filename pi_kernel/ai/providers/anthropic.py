"""Streaming from Anthropic's Messages API through the official ``anthropic`` SDK (the ``anthropic`` extra).

Built like ``openai_compat``: a producer task (``request_task``) makes the
request and puts each stream event on a queue, the stream's generator turns
them into events (``anthropic_events``); an abort cancels the producer, and
the message ends ``aborted`` with its partial content. The request body
(``anthropic_convert``) carries prompt-cache breakpoints and, when asked, a
thinking budget.

Key and URL: ``ANTHROPIC_API_KEY`` (or the model's own variable), sent to the
model's base URL, else ``ANTHROPIC_BASE_URL`` from the environment (a proxy;
a ``.env`` cannot set it), else Anthropic's. The SDK's own retries are off;
here a request is retried only before its first event, on 408/409/429/5xx
(529 ``overloaded_error`` too), on an ``overloaded_error``/``rate_limit_error``
sent inside the stream before any content, and on connection failures,
honouring ``retry-after``. Error texts start with the status and the API's
error type; the context-length error keeps the API's words ("prompt is too
long"), which ``overflow.is_context_overflow`` knows, so the agent compacts.

``anthropic`` is imported on the first request, not at kernel start.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pi_kernel.ai.models import (
    KNOWN_PROVIDERS,
    AssistantMessageEvent,
    AssistantMessageStream,
    Context,
    Model,
    StreamOptions,
    error_message,
)
from pi_kernel.ai.providers.anthropic_convert import build_anthropic_body
from pi_kernel.ai.providers.anthropic_events import AnthropicAssembler
from pi_kernel.ai.providers.request_task import (
    KEYLESS_PLACEHOLDER,
    OPENED,
    Ended,
    RequestTask,
    abort_text,
    masked_error,
    relay,
    shared_ssl_context,
)
from pi_kernel.ai.providers.retry import (
    DEFAULT_RETRY_POLICY,
    RetryPolicy,
    backoff_delay,
    is_retryable_status,
    server_delay,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

BASE_URL_ENV = "ANTHROPIC_BASE_URL"
RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})
"""Error types the API also sends inside a started stream; worth another attempt."""
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
MISSING_SDK_TEXT = "The Anthropic provider needs the anthropic package: pip install 'pi-kernel[anthropic]'"


def stream_anthropic(
    model: Model, context: Context, options: StreamOptions, *, retry_policy: RetryPolicy | None = None
) -> AssistantMessageStream:
    """Stream one assistant message; never raises (see ``AssistantMessageStream``)."""
    events = _stream_events(model, context, options, retry_policy or DEFAULT_RETRY_POLICY)
    return AssistantMessageStream(events, lambda text: error_message(model, text))


def base_url(model: Model) -> str:
    """Where requests go: the model's URL, else ``ANTHROPIC_BASE_URL``, else Anthropic's."""
    default = KNOWN_PROVIDERS["anthropic"][0]
    assert default is not None
    return model.base_url or os.environ.get(BASE_URL_ENV) or default


def resolve_key(model: Model, options: StreamOptions) -> str | None:
    """The key to send; a placeholder for a proxy that needs none; ``None`` when Anthropic itself would be
    asked without one (the request could only fail with 401, so it is not made)."""
    if options.api_key:
        return options.api_key
    variable = model.resolved_api_key_env
    key = os.environ.get(variable) if variable else None
    if key:
        return key
    return KEYLESS_PLACEHOLDER if base_url(model) != KNOWN_PROVIDERS["anthropic"][0] else None


def describe_error(error: BaseException, secret: str | None) -> str:
    """One line: ``529 overloaded_error: Overloaded``; connection errors with their cause; keys masked."""
    import anthropic

    if isinstance(error, anthropic.APIStatusError):
        body = error.body
        inner = body.get("error") if isinstance(body, dict) else None
        detail = inner.get("message") if isinstance(inner, dict) else None
        kind = inner.get("type") if isinstance(inner, dict) else None
        if not isinstance(detail, str) or not detail:
            detail = body if isinstance(body, str) and body else error.response.reason_phrase or type(error).__name__
        status = error.status_code if error.status_code != 200 else "stream"
        text = f"{status} {kind}: {detail}" if kind else f"{status} {detail}"
    elif isinstance(error, anthropic.APIConnectionError):
        cause = error.__cause__
        text = f"{error.message} {type(cause).__name__}: {cause}" if cause else error.message
    else:
        text = f"{type(error).__name__}: {error}"
    return masked_error(text, secret)


def retry_delay(error: BaseException, attempt: int, max_retries: int, policy: RetryPolicy) -> float | None:
    """Seconds before retrying after ``error``, or ``None`` to give up (``attempt``: retries made so far)."""
    if attempt >= max_retries:
        return None
    import anthropic

    if isinstance(error, anthropic.APIStatusError):
        headers = error.response.headers
        kind = error.type if isinstance(getattr(error, "type", None), str) else None
        give_up, retry_after = server_delay(headers, policy)
        if give_up or headers.get("x-should-retry") == "false":
            return None  # the server's word outranks the error type
        if kind in RETRYABLE_ERROR_TYPES or (
            error.status_code != 200 and is_retryable_status(error.status_code, headers, error.body)
        ):
            return backoff_delay(attempt, policy, retry_after)
        return None
    if isinstance(error, anthropic.APIConnectionError):
        return backoff_delay(attempt, policy)
    return None


async def _stream_events(
    model: Model, context: Context, options: StreamOptions, policy: RetryPolicy
) -> AsyncIterator[AssistantMessageEvent]:
    assembler = AnthropicAssembler(model)
    signal = options.signal
    if signal is not None and signal.aborted:
        yield assembler.fail("aborted", abort_text(signal.reason))
        return
    api_key = resolve_key(model, options)
    if api_key is None:
        variable = model.resolved_api_key_env or "ANTHROPIC_API_KEY"
        yield assembler.fail("error", f"No API key for provider {model.provider}: set {variable}")
        return
    try:
        import anthropic  # noqa: F401 - checked here so a missing extra is a clear message
    except ImportError:
        yield assembler.fail("error", MISSING_SDK_TEXT)
        return
    try:
        body = build_anthropic_body(model, context, options)
    except Exception as error:  # noqa: BLE001 - a bad tool schema must end the stream, not raise
        yield assembler.fail("error", f"Could not build the request: {type(error).__name__}: {error}")
        return

    request = RequestTask(functools.partial(_request_events, model, api_key, body, options, policy), signal)
    final_events = functools.partial(_final_events, assembler, api_key=api_key)
    async with contextlib.aclosing(relay(request, assembler, signal, final_events, api_key)) as events:
        async for event in events:  # closed with this generator: the request never outlives it
            yield event


def _final_events(
    assembler: AnthropicAssembler, error: BaseException | None, api_key: str
) -> list[AssistantMessageEvent]:
    if error is None or (assembler.stop_reason is not None and _is_transport_error(error)):
        # A connection lost after the stop reason loses only ``message_stop``.
        return assembler.finish()
    return [assembler.fail("error", describe_error(error, api_key))]


def _is_transport_error(error: BaseException) -> bool:
    import anthropic

    return isinstance(error, anthropic.APIConnectionError)


async def _request_events(
    model: Model, api_key: str, body: dict[str, Any], options: StreamOptions, policy: RetryPolicy, queue: Any
) -> None:
    """Make the request (with retries) and put every event on ``queue``, then ``Ended``."""
    try:
        client = _client(model, api_key, options.timeout)
    except Exception as error:  # noqa: BLE001 - reported as the stream's error
        queue.put_nowait(Ended(error))
        return
    params = {key: body[key] for key in ("model", "max_tokens", "messages", "stream")}
    extra_body = {key: value for key, value in body.items() if key not in params}
    # Claude 4 models may think between tool calls too (as pi asks, by default) once thinking is on.
    interleaved = "thinking" in body and not model.id.startswith("claude-3")
    headers = {"anthropic-beta": INTERLEAVED_THINKING_BETA} if interleaved else None
    attempt = 0
    try:
        while True:
            received = False
            try:
                response = await client.messages.create(**params, extra_body=extra_body, extra_headers=headers)
                opened = False
                try:
                    async for event in response:
                        if not opened:  # the first event, not the status line: an overloaded
                            opened = True  # stream can still be retried before anything is shown
                            queue.put_nowait(OPENED)
                        if getattr(event, "type", None) not in ("message_start", "ping"):
                            received = True
                        queue.put_nowait(event)
                finally:
                    await response.close()
                queue.put_nowait(Ended())
                return
            except Exception as error:  # noqa: BLE001 - judged, then retried or reported
                delay = None if received else retry_delay(error, attempt, options.max_retries, policy)
                if delay is None:
                    queue.put_nowait(Ended(error))
                    return
                attempt += 1
                await asyncio.sleep(delay)
    finally:
        await client.close()


def _client(model: Model, api_key: str, timeout: float | None) -> AsyncAnthropic:
    """A client for one request, with the SDK's own retries off (as ``openai_compat._client``)."""
    import anthropic

    context = shared_ssl_context()
    http_client = anthropic.DefaultAsyncHttpxClient(verify=context) if context is not None else None
    return anthropic.AsyncAnthropic(
        api_key=api_key, base_url=base_url(model), max_retries=0, timeout=timeout, http_client=http_client
    )
