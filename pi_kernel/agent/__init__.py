"""The agent layer: the loop, ``Agent``, tools that run, hooks, abort.

Knows nothing of Jupyter: the layers above subscribe to its events.
"""

from pi_kernel.agent.agent import Agent
from pi_kernel.agent.events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from pi_kernel.agent.loop import (
    AgentEventStream,
    agent_loop,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
)
from pi_kernel.agent.state import AgentState, QueueMode
from pi_kernel.agent.tool_execution import OPERATION_ABORTED, TOOL_BLOCKED, truncated_call_text
from pi_kernel.agent.types import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ShouldStopAfterTurnContext,
    ToolExecutionMode,
    ToolUpdateCallback,
)
from pi_kernel.ai.models import AbortController, AbortSignal

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
