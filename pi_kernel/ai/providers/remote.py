"""The two HTTP providers: any OpenAI-compatible chat-completions server (the ``openai`` SDK) and Anthropic's
Messages API (the ``anthropic`` SDK, the ``anthropic`` extra), with what they share: the key, the request
task, retries, abort and error texts. Their wire formats live in ``openai_format`` and ``anthropic_format``.

One request is read by a producer task (``RequestTask``) that puts each chunk or event on a queue; the
stream's generator turns them into events through the format's assembler. The split makes an abort prompt
wherever it lands: the signal's listener cancels the producer, which closes the HTTP response at once,
whether it was connecting, sleeping before a retry or waiting for the next chunk; the message then ends
``aborted`` with its partial content. The producer never outlives the generator.

Retries: the SDKs' own are off (``max_retries=0``): they cannot be aborted by our ``AbortSignal`` and would
retry after part of a stream had been shown. A request is retried only before its first chunk (for Anthropic,
its first event other than ``message_start``/``ping``), on statuses that mean "try again" (408, 409, 429,
5xx, Anthropic's 529 ``overloaded_error``), on an ``overloaded_error``/``rate_limit_error`` Anthropic sends
inside the stream before any content, and on connection failures; with exponential backoff and jitter,
honouring the server's ``Retry-After`` (capped: a server asking for an hour is not waited on).

Keys: explicit, else the model's variable; a placeholder for servers that need none; no request at all when
a hosted provider at its own URL has no key (it could only answer 401). Anthropic's URL: the model's, else
``ANTHROPIC_BASE_URL`` from the environment (a proxy; a ``.env`` cannot set it), else Anthropic's. Error
texts start with the HTTP status (and Anthropic's error type); the context-length errors keep the words
``overflow.is_context_overflow`` knows, so the agent compacts. The key is cut out of every error text.

``openai`` and ``anthropic`` are imported on the first request, not at kernel start.

Long: both HTTP providers share one request loop, its retries and its errors; only the SDK-specific parts differ.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import importlib
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pi_kernel.ai.models import (
    KNOWN_PROVIDERS,
    AbortSignal,
    AssistantMessageEvent,
    AssistantMessageStream,
    Context,
    Model,
    StreamOptions,
    error_message,
)
from pi_kernel.ai.providers.anthropic_format import AnthropicAssembler, build_anthropic_body
from pi_kernel.ai.providers.openai_format import ChunkAssembler, build_request_body
from pi_kernel.ai.secrets import MIN_SECRET_CHARS, mask, secret_values

KEYLESS_PLACEHOLDER = "not-needed"
"""Sent as the key to servers that need none (the clients insist on one)."""
ABORTED_TEXT = "Request was aborted"
HOSTED_PROVIDERS = frozenset({"openai", "deepseek", "openrouter", "gemini"})
ANTHROPIC_BASE_URL_ENV = "ANTHROPIC_BASE_URL"
ANTHROPIC_RETRYABLE_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})
"""Error types Anthropic also sends inside a started stream; worth another attempt."""
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
MISSING_SDK_TEXT = "The Anthropic provider needs the anthropic package: pip install 'pi-kernel[anthropic]'"
RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Besides every 5xx."""


def stream_openai_compatible(
    model: Model, context: Context, options: StreamOptions, *, retry_policy: RetryPolicy | None = None
) -> AssistantMessageStream:
    """Stream one assistant message from an OpenAI-compatible server; never raises (see
    ``AssistantMessageStream``)."""
    default_url = KNOWN_PROVIDERS.get(model.provider, (None, None))[0]
    request = _Request(
        "openai",
        model.resolved_base_url,
        model.provider in HOSTED_PROVIDERS and model.resolved_base_url == default_url,
        "an API key variable",
        lambda: ChunkAssembler(model, options.max_tokens),
        lambda: build_request_body(model, context, options, model.resolved_compat()),
    )
    return _stream(model, options, retry_policy, request)


def stream_anthropic(
    model: Model, context: Context, options: StreamOptions, *, retry_policy: RetryPolicy | None = None
) -> AssistantMessageStream:
    """Stream one assistant message from Anthropic's Messages API; never raises."""
    url = anthropic_base_url(model)
    request = _Request(
        "anthropic",
        url,
        url == KNOWN_PROVIDERS["anthropic"][0],
        "ANTHROPIC_API_KEY",
        lambda: AnthropicAssembler(model),
        lambda: build_anthropic_body(model, context, options),
    )
    return _stream(model, options, retry_policy, request)


def anthropic_base_url(model: Model) -> str:
    """Where requests go: the model's URL, else ``ANTHROPIC_BASE_URL``, else Anthropic's."""
    default = KNOWN_PROVIDERS["anthropic"][0]
    assert default is not None
    return model.base_url or os.environ.get(ANTHROPIC_BASE_URL_ENV) or default


def abort_text(reason: Any) -> str:
    """The error text of an aborted stream: the abort's reason when it gave one."""
    return reason if isinstance(reason, str) and reason else ABORTED_TEXT


def masked_error(text: str, secret: str | None) -> str:
    """An error text entering the conversation: ``mask`` with this request's key too (it may come from a
    ``.env`` file rather than the environment, or be given to the call alone). Provider errors are masked
    here, where the streams are consumed, so a caller of ``stream`` gets them masked too; in an agent the
    message is masked again as it enters the transcript (``secrets.admit``)."""
    known = secret_values()
    if secret and secret != KEYLESS_PLACEHOLDER and len(secret) >= MIN_SECRET_CHARS:
        known = sorted({secret, *known}, key=len, reverse=True)
    return mask(text, known)


# ---------------------------------------------------------------------------- retries


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    base_delay: float = 0.5
    """Seconds before the first retry; doubled for each further one."""
    max_delay: float = 20.0
    """Cap of the computed backoff, in seconds."""
    max_retry_after: float = 60.0
    """The longest server-requested ``Retry-After`` waited for, in seconds; a longer one gives up at once
    (with the server's message) instead of retrying early into the same refusal."""
    jitter: float = 0.25
    """Fraction of the backoff randomised (0.25: between 75% and 100%)."""


DEFAULT_RETRY_POLICY = RetryPolicy()


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After`` (a number of seconds
    or an HTTP date). Anything unparsable is ignored (``None``), never an error."""
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(float(milliseconds) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def backoff_delay(attempt: int, policy: RetryPolicy, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
    if retry_after is not None:
        return min(retry_after, policy.max_retry_after)
    delay = min(policy.base_delay * (2**attempt), policy.max_delay)
    return delay * (1.0 - policy.jitter * random.random())


def is_retryable_status(status: int, headers: Any = None, body: Any = None) -> bool:
    """Whether an HTTP error status is worth another attempt."""
    should_retry = headers.get("x-should-retry") if headers is not None else None
    if should_retry == "true":
        return True
    if should_retry == "false":
        return False
    if status == 429 and isinstance(body, dict) and body.get("code") == "insufficient_quota":
        # Out of credit: waiting will not help, and the message says what to do.
        return False
    return status in RETRYABLE_STATUSES or status >= 500


def retry_delay(sdk: Any, error: BaseException, attempt: int, max_retries: int, policy: RetryPolicy) -> float | None:
    """Seconds to wait before retrying after ``error`` (an error of the SDK module ``sdk``), or ``None`` to
    give up. ``attempt`` is the number of retries already made."""
    if attempt >= max_retries:
        return None
    if isinstance(error, sdk.APIStatusError):
        headers = error.response.headers
        retry_after = parse_retry_after(headers)
        if retry_after is not None and retry_after > policy.max_retry_after:
            return None
        kind = getattr(error, "type", None) if sdk.__name__ == "anthropic" else None
        if kind in ANTHROPIC_RETRYABLE_TYPES:  # the server's word outranks the error type
            retryable = headers.get("x-should-retry") != "false"
        else:  # a status 200 is an error sent inside the stream
            retryable = error.status_code != 200 and is_retryable_status(error.status_code, headers, error.body)
        return backoff_delay(attempt, policy, retry_after) if retryable else None
    if isinstance(error, sdk.APIConnectionError):
        return backoff_delay(attempt, policy)
    return None


# ---------------------------------------------------------------------------- errors


def describe_error(sdk: Any, error: BaseException, secret: str | None) -> str:
    """A one-line error text, masked: HTTP errors start with their status code (Anthropic's with the error
    type too: ``529 overloaded_error: Overloaded``), connection errors carry their cause."""
    if isinstance(error, sdk.APIStatusError):
        text = _anthropic_status(error) if sdk.__name__ == "anthropic" else _openai_status(error)
    elif isinstance(error, sdk.APIConnectionError):
        cause = error.__cause__
        text = f"{error.message} {type(cause).__name__}: {cause}" if cause else error.message
    elif isinstance(error, sdk.APIError) and sdk.__name__ == "openai":
        text = error.message  # an error object sent inside the stream
    else:
        text = f"{type(error).__name__}: {error}"
    return masked_error(text, secret)


def _openai_status(error: Any) -> str:
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
    return text


def _anthropic_status(error: Any) -> str:
    body = error.body
    inner = body.get("error") if isinstance(body, dict) else None
    detail = inner.get("message") if isinstance(inner, dict) else None
    kind = inner.get("type") if isinstance(inner, dict) else None
    if not isinstance(detail, str) or not detail:
        detail = body if isinstance(body, str) and body else error.response.reason_phrase or type(error).__name__
    status = error.status_code if error.status_code != 200 else "stream"
    return f"{status} {kind}: {detail}" if kind else f"{status} {detail}"


# ---------------------------------------------------------------------------- the stream


_Assembler = ChunkAssembler | AnthropicAssembler


@dataclass(frozen=True, slots=True)
class _Request:
    """What differs between the two providers before the first byte is sent."""

    sdk_name: Literal["openai", "anthropic"]
    base_url: str | None
    hosted: bool
    """The provider's own service: without a key the request is not made."""
    key_variable: str
    """Named in the error when there is no key and the model names no variable."""
    assembler: Callable[[], _Assembler]
    build_body: Callable[[], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class _Ended:
    error: BaseException | None = None
    """Why the stream ended early, or ``None`` at its normal end."""


_OPENED = object()
"""Put on the queue when the response arrived: the message has started."""


def resolve_api_key(model: Model, options: StreamOptions, hosted: bool) -> str | None:
    """The key to send: explicit, from the model's variable, or a placeholder for servers that need none;
    ``None`` for a ``hosted`` provider without one."""
    variable = model.resolved_api_key_env
    key = options.api_key or (os.environ.get(variable) if variable else None)
    return key or (None if hosted else KEYLESS_PLACEHOLDER)


def _stream(
    model: Model, options: StreamOptions, policy: RetryPolicy | None, request: _Request
) -> AssistantMessageStream:
    events = _events(model, options, policy or DEFAULT_RETRY_POLICY, request)
    return AssistantMessageStream(events, lambda text: error_message(model, text))


async def _events(
    model: Model, options: StreamOptions, policy: RetryPolicy, request: _Request
) -> AsyncIterator[AssistantMessageEvent]:
    """The events of one request: ``start`` once the response arrived, each item's events, then the final
    ones. Never raises: a failure ends the stream with the partial content kept. The request is finished
    (its connection closed) before the final event goes out, not at GC time."""
    assembler = request.assembler()
    signal = options.signal
    if signal is not None and signal.aborted:
        yield assembler.fail("aborted", abort_text(signal.reason))
        return
    api_key = resolve_api_key(model, options, request.hosted)
    if api_key is None:
        variable = model.resolved_api_key_env or request.key_variable
        yield assembler.fail("error", f"No API key for provider {model.provider}: set {variable}")
        return
    try:
        sdk = importlib.import_module(request.sdk_name)
    except ImportError:  # only ``anthropic`` is an extra
        yield assembler.fail("error", MISSING_SDK_TEXT)
        return
    try:
        body = request.build_body()
    except Exception as error:  # noqa: BLE001 - a bad tool schema must end the stream, not raise
        yield assembler.fail("error", f"Could not build the request: {type(error).__name__}: {error}")
        return
    _mask_tools_and_system(body)

    task = RequestTask(lambda queue: _produce(sdk, request, api_key, body, options, policy, queue), signal)
    started = False
    try:
        try:
            while True:
                item = await task.queue.get()
                if signal is not None and signal.aborted:
                    final = [assembler.fail("aborted", abort_text(signal.reason))]
                    break
                if isinstance(item, _Ended):
                    lost = isinstance(item.error, sdk.APIConnectionError) and assembler.ending_known
                    if item.error is None or lost:  # a connection lost after the stop reason loses only usage
                        final = assembler.finish()
                    else:
                        final = [assembler.fail("error", describe_error(sdk, item.error, api_key))]
                    break
                if item is _OPENED:
                    if not started:
                        started = True
                        yield assembler.start()
                    continue
                for event in assembler.feed(item):
                    yield event
        except Exception as error:  # noqa: BLE001 - a stream never raises; partial content is kept
            final = [assembler.fail("error", masked_error(f"{type(error).__name__}: {error}", api_key))]
        await task.stop(cancel=final[-1].partial.stop_reason == "aborted")
        for event in final:
            yield event
    finally:
        await task.stop(cancel=True)


def _mask_tools_and_system(body: dict[str, Any]) -> None:
    """Keys in the tools' schemas and descriptions (a ``@tool`` parameter defaulting to ``os.environ[...]``, an
    MCP server's text) and in the system prompt are masked where they enter a request: they enter no transcript.
    A tool still runs with its real default (the model leaves the argument out)."""
    if body.get("tools"):
        body["tools"] = mask(body["tools"])
    if "system" in body:  # Anthropic
        body["system"] = mask(body["system"])
    messages = body.get("messages") or []
    if messages and isinstance(messages[0], dict) and messages[0].get("role") in ("system", "developer"):
        messages[0] = mask(messages[0])


async def _produce(
    sdk: Any,
    request: _Request,
    api_key: str,
    body: dict[str, Any],
    options: StreamOptions,
    policy: RetryPolicy,
    queue: asyncio.Queue[Any],
) -> None:
    """Make the request (with retries) and put every chunk or event on ``queue``, then ``_Ended``."""
    anthropic = request.sdk_name == "anthropic"
    try:
        # A client per request keeps no connection tied to an event loop that may be gone by the next turn;
        # the costly part, the TLS context, is built once.
        context = shared_ssl_context()
        client = (sdk.AsyncAnthropic if anthropic else sdk.AsyncOpenAI)(
            api_key=api_key,
            base_url=request.base_url,
            max_retries=0,
            timeout=options.timeout,
            http_client=sdk.DefaultAsyncHttpxClient(verify=context) if context is not None else None,
        )
    except Exception as error:  # noqa: BLE001 - reported as the stream's error
        queue.put_nowait(_Ended(error))
        return
    named = ("model", "max_tokens", "messages", "stream") if anthropic else ("model", "stream")
    params: dict[str, Any] = {key: body[key] for key in named}
    params["extra_body"] = {key: value for key, value in body.items() if key not in named}
    if not anthropic:
        # The messages ride in ``extra_body``, which the SDK sends as it is, merged over its typed parameters
        # (``{**typed, **extra_body}``: the placeholder's place in the JSON, the real value). As the typed
        # ``messages`` the SDK would walk every message against its TypedDicts on every request, an identity
        # on our plain JSON that was most of a long session's per-turn cost. The bytes sent are the same.
        params["messages"] = []
    if anthropic:
        # Claude 4 models may think between tool calls too (as pi asks, by default) once thinking is on.
        interleaved = "thinking" in body and not body["model"].startswith("claude-3")
        params["extra_headers"] = {"anthropic-beta": INTERLEAVED_THINKING_BETA} if interleaved else None
    create = client.messages.create if anthropic else client.chat.completions.create
    attempt = 0
    try:
        while True:
            received = opened = False
            try:
                response = await create(**params)
                if not anthropic:
                    opened = True
                    queue.put_nowait(_OPENED)
                try:
                    async for item in response:
                        if not opened:  # Anthropic: the first event, not the status line: an overloaded
                            opened = True  # stream can still be retried before anything is shown
                            queue.put_nowait(_OPENED)
                        received = received or not anthropic or getattr(item, "type", None) not in _PREAMBLE
                        queue.put_nowait(item)
                finally:
                    await response.close()
                queue.put_nowait(_Ended())
                return
            except Exception as error:  # noqa: BLE001 - judged, then retried or reported
                delay = None if received else retry_delay(sdk, error, attempt, options.max_retries, policy)
                if delay is None:
                    queue.put_nowait(_Ended(error))
                    return
                attempt += 1
                await asyncio.sleep(delay)
    finally:
        await client.close()


_PREAMBLE = frozenset({"message_start", "ping"})
"""Anthropic events that carry no content: a stream failing after them can still be retried."""


class RequestTask:
    """The producer task of one stream, its queue, and the abort listener that cancels it."""

    def __init__(self, produce: Callable[[asyncio.Queue[Any]], Any], signal: AbortSignal | None) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] = self._loop.create_task(produce(self.queue))
        self._cancel_requested = False
        self._remove_listener = signal.add_listener(self._on_abort) if signal is not None else None

    def _on_abort(self, _reason: Any) -> None:
        # Runs on the aborting thread (a kernel interrupt, a widget callback).
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing left to cancel
            self._loop.call_soon_threadsafe(self._abort_on_loop)

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


_SSL_CONTEXT: list[ssl.SSLContext | None] = []


def shared_ssl_context() -> ssl.SSLContext | None:
    """The HTTP library's own default TLS context (same trust store), built once. ``None`` lets the client
    decide."""
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
