"""``ToolRetry``: a tool saying "fix your arguments and call me again".

A tool raises ``ToolRetry("no city named 'Pariss'; did you mean 'Paris'?")``
when the arguments passed validation but are still wrong. The model receives
an error result with the message and a hint to fix the arguments and retry.
Each wrapped tool has a budget (``ToolDefinition.max_retries``, 3 by default):
once the tool has failed with ``ToolRetry`` more times in a row than that, the
error text tells the model to stop retrying it. A call that succeeds resets
the count. The count lives on the wrapped tool (one per registry or agent
session) and is shared by parallel calls, hence the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


class ToolRetry(Exception):
    """Raise from a tool: the arguments are wrong; the message says how to fix them."""


class ToolRetryError(ToolRetry):
    """What the wrapper raises in place of a ``ToolRetry``: its text is what the model reads.

    The agent loop turns an exception from ``execute`` into an error result
    carrying the exception's message, so the hint travels in the message.
    """

    def __init__(self, message: str, *, exhausted: bool) -> None:
        super().__init__(message)
        self.exhausted = exhausted
        """True when the retry budget is spent and the model is told to stop."""


def retry_hint(tool_name: str, message: str, attempt: int, max_retries: int) -> str:
    """The error text for the ``attempt``-th ``ToolRetry`` in a row."""
    if attempt <= max_retries:
        return f"{message}\n\nFix the arguments and call {tool_name} again (retry {attempt} of {max_retries})."
    return (
        f"{message}\n\nTool {tool_name} has failed {attempt} times in a row; the retry limit "
        f"({max_retries}) is reached. Stop retrying {tool_name}: tell the user what went wrong "
        "or take another approach."
    )


@dataclass(eq=False)
class RetryBudget:
    """Counts consecutive ``ToolRetry`` failures of one wrapped tool."""

    tool_name: str
    max_retries: int = 3
    failures: int = 0
    """``ToolRetry`` failures since the last success."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def succeeded(self) -> None:
        with self._lock:
            self.failures = 0

    def failed(self, retry: ToolRetry) -> ToolRetryError:
        """Count one failure; returns the error to raise in its place."""
        with self._lock:
            self.failures += 1
            attempt = self.failures
        text = retry_hint(self.tool_name, str(retry) or "Invalid arguments.", attempt, self.max_retries)
        return ToolRetryError(text, exhausted=attempt > self.max_retries)

    @contextmanager
    def attempt(self) -> Iterator[None]:
        """Wrap one execution: success resets, ``ToolRetry`` is counted and re-raised with the hint.

        Other exceptions pass through untouched and leave the count as it is.
        Works around a sync body and around an ``await`` alike.
        """
        try:
            yield
        except ToolRetryError:
            raise  # already counted by an inner budget (a wrapped tool calling another)
        except ToolRetry as retry:
            raise self.failed(retry) from retry
        self.succeeded()
