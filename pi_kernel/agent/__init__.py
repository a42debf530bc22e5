"""The agent layer: the loop, ``Agent``, tools that run, hooks, abort.

Knows nothing of Jupyter: the layers above subscribe to its events. In the order a run uses
them: ``types`` (tools, hooks, config, the event union, state), ``loop`` (pi's agent loop),
``compaction``, ``tool_execution`` (one message's tool calls) and ``agent`` (``Agent``).
"""

from pi_kernel.agent.agent import Agent, QueueMode
from pi_kernel.agent.loop import (
    AgentEventStream,
    agent_loop,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
)
from pi_kernel.agent.tool_execution import OPERATION_ABORTED, TOOL_BLOCKED, truncated_call_text
from pi_kernel.agent.types import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentEndEvent,
    AgentEvent,
    AgentLoopConfig,
    AgentStartEvent,
    AgentState,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ShouldStopAfterTurnContext,
    ToolExecutionEndEvent,
    ToolExecutionMode,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolUpdateCallback,
    TurnEndEvent,
    TurnStartEvent,
)
from pi_kernel.ai.abort import AbortController, AbortSignal

__all__ = [
    "OPERATION_ABORTED",
    "TOOL_BLOCKED",
    "AbortController",
    "AbortSignal",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "Agent",
    "AgentEndEvent",
    "AgentEvent",
    "AgentEventStream",
    "AgentLoopConfig",
    "AgentStartEvent",
    "AgentState",
    "AgentTool",
    "AgentToolResult",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "QueueMode",
    "ShouldStopAfterTurnContext",
    "ToolExecutionEndEvent",
    "ToolExecutionMode",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolUpdateCallback",
    "TurnEndEvent",
    "TurnStartEvent",
    "agent_loop",
    "agent_loop_continue",
    "run_agent_loop",
    "run_agent_loop_continue",
    "truncated_call_text",
]
