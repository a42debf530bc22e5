"""``wrap_tool_definition``: a ``ToolDefinition`` adapted to the agent's ``AgentTool``.

The agent sees name, description, parameters, label, ``prepare_arguments``,
``execution_mode`` and ``execute``. Prompt metadata (snippet, guidelines) stays
on the definition: it reaches the model only through the system prompt, never
through the API ``tools`` array. The wrapped tool keeps its definition
(``DefinedTool.definition``) so the UI and the approval hook can find
``render_call``, ``render_result`` and ``approval`` by tool name.

A sync definition gives a sync ``execute`` (the loop runs it in a worker
thread); an async one gives an async ``execute``. Around either, the retry
budget handles ``ToolRetry`` and the return value is normalised by
``to_agent_tool_result``.

**The retry budget** (``ToolRetry``: a tool saying "fix your arguments and call me again").
A tool raises ``ToolRetry("no city named 'Pariss'; did you mean 'Paris'?")``
when the arguments passed validation but are still wrong. The model receives
an error result with the message and a hint to fix the arguments and retry.
Each wrapped tool has a budget (``ToolDefinition.max_retries``, 3 by default):
once the tool has failed with ``ToolRetry`` more times in a row than that, the
error text tells the model to stop retrying it. A call that succeeds resets
the count. The count lives on the wrapped tool (one per registry or agent
session) and is shared by parallel calls, hence the lock.

The budget belongs to one agent run (one user prompt): failures in an earlier
prompt must not make an unrelated later prompt's first failure say "stop
retrying". A run is recognised by its abort signal, which the agent creates
afresh for every run and hands to every ``execute`` of that run: a call whose
signal is not the one of the last counted call starts a fresh count. This
needs no hook from the agent or the kernel, so it holds for any ``Agent``
the tool is given to. Calls without a signal (a tool called directly in a
cell) share one count.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pi_kernel.agent.tool_execution import is_async_callable
from pi_kernel.agent.types import AgentTool, AgentToolResult
from pi_kernel.ai import AbortSignal
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.results import to_agent_tool_result


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
    """``ToolRetry`` failures since the last success in this run."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _run: weakref.ref[AbortSignal] | None = field(default=None, repr=False)
    """The signal of the run being counted; weak, so a finished run is not kept alive."""

    def enter_run(self, signal: AbortSignal | None) -> None:
        """Start a fresh count if ``signal`` is another run's than the last counted call's.

        ``None`` (no run) keeps the count as it is.
        """
        if signal is None:
            return
        with self._lock:
            if self._run is None or self._run() is not signal:
                self._run = weakref.ref(signal)
                self.failures = 0

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
    def attempt(self, signal: AbortSignal | None = None) -> Iterator[None]:
        """Wrap one execution: success resets, ``ToolRetry`` is counted and re-raised with the hint.

        ``signal`` is the call's abort signal: a new run's signal resets the
        count first (see the module docstring). Other exceptions pass through
        untouched and leave the count as it is. Works around a sync body and
        around an ``await`` alike.
        """
        self.enter_run(signal)
        try:
            yield
        except ToolRetryError:
            raise  # already counted by an inner budget (a wrapped tool calling another)
        except ToolRetry as retry:
            raise self.failed(retry) from retry
        self.succeeded()


@dataclass(eq=False)
class DefinedTool(AgentTool):
    """An ``AgentTool`` made from a ``ToolDefinition``; remembers where it came from."""

    definition: ToolDefinition | None = None
    """The definition it wraps: render hooks, approval policy, prompt metadata."""
    context: ToolContext | None = None
    """Passed to the definition's ``execute``; ``None``: a fresh ``ToolContext()`` per call
    (so relative paths follow the current working directory)."""
    retry_budget: RetryBudget | None = None
    """Consecutive ``ToolRetry`` failures of this wrapped tool."""


def wrap_tool_definition(defn: ToolDefinition, ctx: ToolContext | None = None) -> DefinedTool:
    """Adapt ``defn`` to an ``AgentTool`` whose ``execute(tool_call_id, params, signal, on_update)``
    calls ``defn.execute(tool_call_id, params, signal, on_update, ctx)``."""
    budget = RetryBudget(defn.name, defn.max_retries)
    execute = _async_execute(defn, ctx, budget) if is_async_callable(defn.execute) else _sync_execute(defn, ctx, budget)
    return DefinedTool(
        name=defn.name,
        description=defn.description,
        parameters=defn.parameters,
        constrained_sampling=defn.constrained_sampling,
        label=defn.label,
        prepare_arguments=defn.prepare_arguments,
        execution_mode=defn.execution_mode,
        execute=execute,
        definition=defn,
        context=ctx,
        retry_budget=budget,
    )


def _sync_execute(defn: ToolDefinition, ctx: ToolContext | None, budget: RetryBudget) -> Callable[..., AgentToolResult]:
    def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: Callable[[AgentToolResult], None] | None = None,
    ) -> AgentToolResult:
        with budget.attempt(signal):
            value = defn.execute(tool_call_id, params, signal, on_update, ctx if ctx is not None else ToolContext())
        return to_agent_tool_result(value)

    return execute


def _async_execute(defn: ToolDefinition, ctx: ToolContext | None, budget: RetryBudget) -> Callable[..., Any]:
    async def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: Callable[[AgentToolResult], None] | None = None,
    ) -> AgentToolResult:
        with budget.attempt(signal):
            value = await defn.execute(
                tool_call_id, params, signal, on_update, ctx if ctx is not None else ToolContext()
            )
        return to_agent_tool_result(value)

    return execute
