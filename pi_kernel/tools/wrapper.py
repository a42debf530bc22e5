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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pi_kernel.agent.tool_execution import is_async_callable
from pi_kernel.agent.types import AgentTool, AgentToolResult
from pi_kernel.ai import AbortSignal
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.results import to_agent_tool_result
from pi_kernel.tools.tool_retry import RetryBudget


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
