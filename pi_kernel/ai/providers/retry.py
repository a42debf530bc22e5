"""When to retry a failed request, and how long to wait first.

The ``openai`` client's own retries are switched off (``max_retries=0``): they
cannot be aborted by our ``AbortSignal`` and they would also retry after part of
a stream had been shown. Here a request is retried only before any chunk
arrived, on statuses that mean "try again" (408, 409, 429, 5xx) or on a
connection failure, with exponential backoff and jitter, honouring the
server's ``Retry-After`` (capped: a server asking for an hour is not waited on).
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Any

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Besides every 5xx."""


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
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` is either a number of seconds or an HTTP date. Anything
    unparsable is ignored (``None``), never an error.
    """
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
    if when is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def backoff_delay(attempt: int, policy: RetryPolicy, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
    if retry_after is not None:
        return min(retry_after, policy.max_retry_after)
    delay = min(policy.base_delay * (2**attempt), policy.max_delay)
    return delay * (1.0 - policy.jitter * random.random())


def server_delay(headers: Any, policy: RetryPolicy) -> tuple[bool, float | None]:
    """``(give_up, retry_after)``: the server's ``Retry-After``, and whether it asks for longer than
    ``policy.max_retry_after`` (then the request is not retried)."""
    retry_after = parse_retry_after(headers)
    return retry_after is not None and retry_after > policy.max_retry_after, retry_after


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


def retry_delay(error: BaseException, attempt: int, max_retries: int, policy: RetryPolicy) -> float | None:
    """Seconds to wait before retrying after ``error``, or ``None`` to give up.

    Only ``openai`` errors are judged: HTTP status errors by status, connection
    errors and timeouts always retryable. ``attempt`` is the number of retries
    already made.
    """
    if attempt >= max_retries:
        return None
    import openai  # already imported by the caller; local so this module stays light

    if isinstance(error, openai.APIStatusError):
        headers = error.response.headers
        give_up, retry_after = server_delay(headers, policy)
        if give_up or not is_retryable_status(error.status_code, headers, error.body):
            return None
        return backoff_delay(attempt, policy, retry_after)
    if isinstance(error, openai.APIConnectionError):
        return backoff_delay(attempt, policy)
    return None
