"""Streaming from any OpenAI-compatible chat-completions server.

One request, read by a producer task that puts chunks on a queue
(``request_task``); the stream's async generator turns them into events
(``openai_chunks``). An abort cancels the producer and the generator ends the
message with ``aborted``, partial content kept. The producer never outlives the
generator. Retries (``retry``) happen only before the first chunk.

``openai`` is imported on the first request, not at kernel start.
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
from pi_kernel.ai.providers.openai_chunks import ChunkAssembler
from pi_kernel.ai.providers.openai_convert import build_request_body
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
from pi_kernel.ai.providers.retry import DEFAULT_RETRY_POLICY, RetryPolicy, retry_delay

if TYPE_CHECKING:
    from openai import AsyncOpenAI

HOSTED_PROVIDERS = frozenset({"openai", "deepseek", "openrouter", "gemini"})


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
        if isinstance(body, list) and body and isinstance(body[0], dict):
            # Gemini's OpenAI-compatible endpoint answers ``[{"error": {"message": ...}}]``
            body = body[0].get("error", body[0])
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
    return masked_error(text, secret)


async def _stream_events(
    model: Model, context: Context, options: StreamOptions, policy: RetryPolicy
) -> AsyncIterator[AssistantMessageEvent]:
    assembler = ChunkAssembler(model, options.max_tokens)
    signal = options.signal
    if signal is not None and signal.aborted:
        yield assembler.fail("aborted", abort_text(signal.reason))
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

    request = RequestTask(functools.partial(_request_chunks, model, api_key, body, options, policy), signal)
    final_events = functools.partial(_final_events, assembler, api_key=api_key)
    async with contextlib.aclosing(relay(request, assembler, signal, final_events, api_key)) as events:
        async for event in events:  # closed with this generator: the request never outlives it
            yield event


def _final_events(assembler: ChunkAssembler, error: BaseException | None, api_key: str) -> list[AssistantMessageEvent]:
    if error is None or (assembler.finish_reason is not None and _is_transport_error(error)):
        # A connection lost after the finish_reason loses only the usage chunk.
        return assembler.finish()
    return [assembler.fail("error", describe_error(error, api_key))]


def _is_transport_error(error: BaseException) -> bool:
    import openai

    return isinstance(error, openai.APIConnectionError)


async def _request_chunks(
    model: Model, api_key: str, body: dict[str, Any], options: StreamOptions, policy: RetryPolicy, queue: Any
) -> None:
    """Make the request (with retries) and put every chunk on ``queue``, then ``Ended``."""
    try:
        client = _client(model, api_key, options.timeout)
    except Exception as error:  # noqa: BLE001 - reported as the stream's error
        queue.put_nowait(Ended(error))
        return
    params = {key: body[key] for key in ("model", "messages", "stream")}
    extra_body = {key: value for key, value in body.items() if key not in params}
    attempt = 0
    try:
        while True:
            received = False
            try:
                response = await client.chat.completions.create(**params, extra_body=extra_body)
                queue.put_nowait(OPENED)
                try:
                    async for chunk in response:
                        received = True
                        queue.put_nowait(chunk)
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


def _client(model: Model, api_key: str, timeout: float | None) -> AsyncOpenAI:
    """A client for one request, with the client's own retries off.

    A client per request keeps no connection tied to an event loop that may
    be gone by the next turn; the costly part, the TLS context, is built once.
    """
    import openai

    context = shared_ssl_context()
    http_client = openai.DefaultAsyncHttpxClient(verify=context) if context is not None else None
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=model.resolved_base_url,
        max_retries=0,
        timeout=timeout,
        http_client=http_client,
    )
