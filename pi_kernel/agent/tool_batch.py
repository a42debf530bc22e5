"""Running the tool calls of one assistant message as a batch, as pi does.

Preflight (``prepare_tool_call``) is always one call at a time in source
order, and ``tool_execution_start`` is emitted for every call there; an
outcome decided there gets its ``tool_execution_end`` at once. In parallel
mode every prepared call then runs at once (``tool_runner``),
``tool_execution_end`` follows completion order and the tool-result messages
follow source order after the batch. In sequential mode (by config, or
because a tool of the batch is marked ``sequential``) each call runs and gets
its result message before the next one is prepared. A message cut off by the
output token limit runs none of its calls (``fail_truncated_tool_calls``).

Every tool call gets exactly one ``tool_execution_end`` and one result
message, whatever happens: unknown tool, bad arguments, a hook or the tool
raising, a block, an abort (``Operation aborted``). The batch asks the loop to
stop only when every result asks to ``terminate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pi_kernel.agent.events import ToolExecutionStartEvent
from pi_kernel.agent.tool_execution import (
    Emit,
    FinalizedToolCall,
    PreparedToolCall,
    aborted_call,
    create_tool_result_message,
    emit_tool_execution_end,
    emit_tool_result_message,
    error_result,
    find_tool,
    prepare_tool_call,
    truncated_call_text,
)
from pi_kernel.agent.tool_runner import run_prepared_tool_calls
from pi_kernel.agent.types import AgentLoopConfig
from pi_kernel.ai import AbortSignal, AssistantMessage, Context, ToolCall, ToolResultMessage


@dataclass(slots=True)
class ToolBatchResult:
    messages: list[ToolResultMessage]
    """One result message per tool call, in source order."""
    terminate: bool
    """Every result of the batch asked to stop."""


def should_terminate_tool_batch(finalized: Sequence[FinalizedToolCall]) -> bool:
    return bool(finalized) and all(item.result.terminate is True for item in finalized)


async def execute_tool_calls(
    context: Context,
    assistant_message: AssistantMessage,
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> ToolBatchResult:
    tool_calls = assistant_message.tool_calls
    sequential = config.tool_execution == "sequential" or any(
        getattr(find_tool(context.tools, call.name), "execution_mode", None) == "sequential" for call in tool_calls
    )
    run_batch = execute_tool_calls_sequential if sequential else execute_tool_calls_parallel
    return await run_batch(context, assistant_message, tool_calls, config, signal, emit)


async def _preflight(
    context: Context,
    assistant_message: AssistantMessage,
    tool_call: ToolCall,
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> PreparedToolCall | FinalizedToolCall:
    """Emit the call's start, prepare it; an outcome decided here gets its end at once."""
    await emit(ToolExecutionStartEvent(tool_call.id, tool_call.name, tool_call.arguments))
    if signal.aborted:
        finalized = aborted_call(tool_call)
    else:
        preparation = await prepare_tool_call(context, assistant_message, tool_call, config, signal)
        if isinstance(preparation, PreparedToolCall):
            return preparation
        finalized = FinalizedToolCall(tool_call, preparation.result, preparation.is_error)
    await emit_tool_execution_end(finalized, emit)
    return finalized


async def execute_tool_calls_sequential(
    context: Context,
    assistant_message: AssistantMessage,
    tool_calls: list[ToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> ToolBatchResult:
    finalized_calls: list[FinalizedToolCall] = []
    messages: list[ToolResultMessage] = []
    for tool_call in tool_calls:
        outcome = await _preflight(context, assistant_message, tool_call, config, signal, emit)
        if isinstance(outcome, PreparedToolCall):
            [outcome] = await run_prepared_tool_calls([outcome], context, assistant_message, config, signal, emit)
        message = create_tool_result_message(outcome, config.max_tool_result_chars)
        await emit_tool_result_message(message, emit)
        finalized_calls.append(outcome)
        messages.append(message)
    return ToolBatchResult(messages, should_terminate_tool_batch(finalized_calls))


async def execute_tool_calls_parallel(
    context: Context,
    assistant_message: AssistantMessage,
    tool_calls: list[ToolCall],
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
) -> ToolBatchResult:
    outcomes: list[PreparedToolCall | FinalizedToolCall] = []
    for tool_call in tool_calls:
        outcomes.append(await _preflight(context, assistant_message, tool_call, config, signal, emit))
    prepared = [item for item in outcomes if isinstance(item, PreparedToolCall)]
    ran = iter(
        await run_prepared_tool_calls(prepared, context, assistant_message, config, signal, emit) if prepared else ()
    )
    finalized_calls = [next(ran) if isinstance(item, PreparedToolCall) else item for item in outcomes]
    messages = [create_tool_result_message(item, config.max_tool_result_chars) for item in finalized_calls]
    for message in messages:
        await emit_tool_result_message(message, emit)
    return ToolBatchResult(messages, should_terminate_tool_batch(finalized_calls))


async def fail_truncated_tool_calls(tool_calls: list[ToolCall], emit: Emit) -> ToolBatchResult:
    """A ``length`` stop may have cut any argument short: run nothing, tell the model why.

    No lookup, no validation, no hooks: a truncated call's arguments can parse
    and validate and still be incomplete.
    """
    messages: list[ToolResultMessage] = []
    for tool_call in tool_calls:
        await emit(ToolExecutionStartEvent(tool_call.id, tool_call.name, tool_call.arguments))
        finalized = FinalizedToolCall(tool_call, error_result(truncated_call_text(tool_call.name)), True)
        await emit_tool_execution_end(finalized, emit)
        message = create_tool_result_message(finalized)
        await emit_tool_result_message(message, emit)
        messages.append(message)
    return ToolBatchResult(messages, terminate=False)
