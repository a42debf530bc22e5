"""``wrap_tool_definition``: a ``ToolDefinition`` adapted to the agent's ``AgentTool``, with its retry budget.

The agent sees name, description, parameters, label, ``prepare_arguments``,
``execution_mode`` and ``execute``; prompt metadata (snippet, guidelines)
reaches the model only through the system prompt. The wrapped tool keeps its
definition (``DefinedTool.definition``) so the UI and the approval hook find
``render_call``, ``render_result`` and ``approval`` by tool name. A sync
definition gives a sync ``execute`` (the loop runs it in a worker thread), an
async one an async ``execute``; either returns ``to_agent_tool_result`` of the
value.

**The retry budget.** A tool raises ``ToolRetry("no city named 'Pariss'; did
you mean 'Paris'?")`` when the arguments passed validation but are still
wrong: the model receives the message and a hint to fix the arguments and
retry. Once the tool failed with ``ToolRetry`` more than
``ToolDefinition.max_retries`` times in a row (3 by default), the text tells the
model to stop retrying it; a success resets the count. The count lives on the
wrapped tool and is shared by parallel calls, hence the lock.

The budget belongs to one agent run (one user prompt): failures in an earlier
prompt must not make a later prompt's first failure say "stop retrying". A run
is recognised by its abort signal, which the agent creates afresh for every run
and hands to every ``execute`` of it, so this needs no hook from the agent or
the kernel. Calls without a signal (a tool called directly in a cell) share one
count.
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
    """What the wrapper raises in place of a ``ToolRetry``: the agent loop turns its message, hint
    included, into the error result the model reads."""


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

    @contextmanager
    def attempt(self, signal: AbortSignal | None = None) -> Iterator[None]:
        """Wrap one execution (sync or around an ``await``): a new run's ``signal`` starts a fresh count,
        success resets it, ``ToolRetry`` is counted and re-raised with the hint, other exceptions pass."""
        with self._lock:
            if signal is not None and (self._run is None or self._run() is not signal):
                self._run = weakref.ref(signal)
                self.failures = 0
        try:
            yield
        except ToolRetryError:
            raise  # already counted by an inner budget (a wrapped tool calling another)
        except ToolRetry as retry:
            with self._lock:
                self.failures += 1
                attempt = self.failures
            text = retry_hint(self.tool_name, str(retry) or "Invalid arguments.", attempt, self.max_retries)
            raise ToolRetryError(text) from retry
        with self._lock:
            self.failures = 0


@dataclass(eq=False)
class DefinedTool(AgentTool):
    """An ``AgentTool`` made from a ``ToolDefinition``; remembers where it came from."""

    definition: ToolDefinition | None = None
    context: ToolContext | None = None
    """Passed to the definition's ``execute``; ``None``: a fresh ``ToolContext()`` per call
    (so relative paths follow the current working directory)."""
    retry_budget: RetryBudget | None = None


def wrap_tool_definition(defn: ToolDefinition, ctx: ToolContext | None = None) -> DefinedTool:
    """Adapt ``defn`` to an ``AgentTool`` whose ``execute(tool_call_id, params, signal, on_update)``
    calls ``defn.execute(tool_call_id, params, signal, on_update, ctx)``."""
    budget = RetryBudget(defn.name, defn.max_retries)

    def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: Callable[[AgentToolResult], None] | None = None,
    ) -> Any:
        with budget.attempt(signal):
            value = defn.execute(tool_call_id, params, signal, on_update, ctx if ctx is not None else ToolContext())
        return to_agent_tool_result(value)

    async def execute_async(
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

    return DefinedTool(
        name=defn.name,
        description=defn.description,
        parameters=defn.parameters,
        constrained_sampling=defn.constrained_sampling,
        label=defn.label,
        prepare_arguments=defn.prepare_arguments,
        execution_mode=defn.execution_mode,
        execute=execute_async if is_async_callable(defn.execute) else execute,
        definition=defn,
        context=ctx,
        retry_budget=budget,
    )
