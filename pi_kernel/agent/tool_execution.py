"""One tool call, phase by phase, as pi runs it.

Each call goes through three phases, each one small function:

``prepare_tool_call``   (preflight) look the tool up, ``prepare_arguments``,
                        validate, ``ask_before_tool_call`` (may block or edit
                        the arguments). Returns a ``PreparedToolCall`` or an
                        ``ImmediateOutcome`` (the call will not run).
``execute_prepared_tool_call``  runs ``execute`` (sync tools on a worker
                        thread); an exception becomes an error result.
``finalize_executed_tool_call`` ``after_tool_call`` patches the result.

The outcomes are a tagged union (``kind``); ``FinalizedToolCall`` is what
every call ends as, and ``create_tool_result_message`` makes its message.
How a whole batch runs (order, concurrency, truncation) is ``tool_batch``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel

from pi_kernel.agent.events import AgentEvent, MessageEndEvent, MessageStartEvent, ToolExecutionEndEvent
from pi_kernel.agent.invoke import as_tool_error, await_unless_aborted, call_hook, is_async_callable, run_in_worker
from pi_kernel.agent.result_limit import bound_content
from pi_kernel.agent.types import (
    AfterToolCallContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    ToolUpdateCallback,
)
from pi_kernel.ai import (
    AbortSignal,
    AssistantMessage,
    Context,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    validate_tool_arguments,
)
from pi_kernel.ai.messages import clean_tool_call
from pi_kernel.ai.secrets import mask, secret_values

Emit = Callable[[AgentEvent], Awaitable[None]]
"""Receives every event; the loop waits for it before going on."""

OPERATION_ABORTED = "Operation aborted"
TOOL_BLOCKED = "Tool execution was blocked"


def truncated_call_text(tool_name: str) -> str:
    return (
        f'Tool call "{tool_name}" was not executed: the response hit the output token limit, '
        "so its arguments may be truncated. Re-issue the tool call with complete arguments."
    )


def tool_not_found_text(tool_name: str, tools: Sequence[Tool] | None) -> str:
    names = ", ".join(tool.name for tool in tools or ())
    return f"Tool {tool_name} not found. " + (f"Available tools: {names}" if names else "No tools are available.")


# ---------------------------------------------------------------- outcomes


@dataclass(slots=True)
class PreparedToolCall:
    """Preflight passed: the call will run with ``args``."""

    tool_call: ToolCall
    tool: AgentTool
    args: Any
    """The validated (possibly hook-edited) arguments ``execute`` receives."""
    kind: Literal["prepared"] = "prepared"


@dataclass(slots=True)
class ImmediateOutcome:
    """Preflight decided the result: the call does not run."""

    result: AgentToolResult
    is_error: bool = True
    kind: Literal["immediate"] = "immediate"


@dataclass(slots=True)
class ExecutedOutcome:
    """What ``execute`` gave (or the error it raised, as a result)."""

    result: AgentToolResult
    is_error: bool


@dataclass(slots=True)
class FinalizedToolCall:
    """The call's final result, after ``after_tool_call``."""

    tool_call: ToolCall
    result: AgentToolResult
    is_error: bool


# ---------------------------------------------------------------- helpers


def error_result(text: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text)])


def error_text(error: BaseException) -> str:
    """The exception's message, or its class name when the message is empty."""
    return str(error) or type(error).__name__


def aborted_call(tool_call: ToolCall) -> FinalizedToolCall:
    return FinalizedToolCall(tool_call, error_result(OPERATION_ABORTED), True)


def find_tool(tools: Sequence[Tool] | None, name: str) -> AgentTool | None:
    """The tool called ``name``: the agent's context holds its ``AgentTool``s (typed ``Tool`` in ``ai``)."""
    for tool in tools or ():
        if tool.name == name:
            return cast(AgentTool, tool)
    return None


def as_tool_result(value: Any) -> AgentToolResult:
    """What ``execute`` returned, as an ``AgentToolResult`` (a str becomes its text)."""
    if isinstance(value, AgentToolResult):
        if value.content is None:  # an untyped tool; never let None reach the transcript
            value.content = []
        return value
    if isinstance(value, str):
        return AgentToolResult(content=[TextContent(value)])
    raise TypeError(f"execute returned {type(value).__name__}, expected an AgentToolResult")


def masked_content(content: list[Any]) -> list[Any]:
    """Tool result content with key values (``pi_kernel.ai.secrets.mask``) hidden in every text."""
    secrets = secret_values()  # read once for all the blocks
    return [
        dataclasses.replace(block, text=mask(block.text, secrets)) if isinstance(block, TextContent) else block
        for block in content
    ]


def create_tool_result_message(finalized: FinalizedToolCall, max_chars: int | None = None) -> ToolResultMessage:
    """The message the model gets: keys that reached the result (a tool printed the environment, read a
    ``.env``) are masked here, where every tool's result enters the transcript, and its text is bounded to
    ``max_chars`` (``result_limit``)."""
    result = finalized.result
    content = masked_content(result.content if result.content is not None else [])
    content, _ = bound_content(content, max_chars)
    return ToolResultMessage(
        tool_call_id=finalized.tool_call.id,
        tool_name=finalized.tool_call.name,
        content=content,
        details=result.details,  # never sent to the model; views and saved files mask it where it leaves
        is_error=finalized.is_error,
        usage=result.usage,
    )


async def emit_tool_execution_end(finalized: FinalizedToolCall, emit: Emit) -> None:
    call = finalized.tool_call
    await emit(ToolExecutionEndEvent(call.id, call.name, finalized.result, finalized.is_error))


async def emit_tool_result_message(message: ToolResultMessage, emit: Emit) -> None:
    await emit(MessageStartEvent(message))
    await emit(MessageEndEvent(message))


# ---------------------------------------------------------------- phase 1: preflight


async def prepare_arguments(tool: AgentTool, tool_call: ToolCall) -> ToolCall:
    """``tool.prepare_arguments`` rewrites old argument shapes; None or the same object keeps them."""
    if tool.prepare_arguments is None:
        return tool_call
    prepared = await call_hook(tool.prepare_arguments, tool_call.arguments)
    if prepared is None or prepared is tool_call.arguments:
        return tool_call
    return dataclasses.replace(tool_call, arguments=prepared)


def _plain_arguments(args: Any) -> Any:
    return args.model_dump() if isinstance(args, BaseModel) else args


async def prepare_tool_call(
    context: Context,
    assistant_message: AssistantMessage,
    tool_call: ToolCall,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> PreparedToolCall | ImmediateOutcome:
    """Phase 1: look the tool up, ``prepare_arguments``, validate, ``before_tool_call``."""
    tool = find_tool(context.tools, tool_call.name)
    if tool is None:
        return ImmediateOutcome(error_result(tool_not_found_text(tool_call.name, context.tools)))
    try:
        args = validate_tool_arguments(tool, await prepare_arguments(tool, tool_call))
        outcome = await ask_before_tool_call(
            PreparedToolCall(tool_call, tool, args), assistant_message, context, config, signal
        )
    except Exception as error:  # noqa: BLE001 - validation and hook failures become results the model reads
        return ImmediateOutcome(error_result(error_text(error)))
    if isinstance(outcome, PreparedToolCall) and signal.aborted:
        return ImmediateOutcome(error_result(OPERATION_ABORTED))
    return outcome


async def ask_before_tool_call(
    prepared: PreparedToolCall,
    assistant_message: AssistantMessage,
    context: Context,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> PreparedToolCall | ImmediateOutcome:
    """``before_tool_call`` decides: run as is, block (maybe asking to terminate), or run edited arguments.

    An async hook (an approval waiting for a person) is raced against the abort signal.
    """
    hook = config.before_tool_call
    if hook is None:
        return prepared
    decision = hook(BeforeToolCallContext(assistant_message, prepared.tool_call, prepared.args, context), signal)
    aborted = False
    if inspect.isawaitable(decision):
        aborted, decision = await await_unless_aborted(decision, signal)
    if aborted or signal.aborted:
        return ImmediateOutcome(error_result(OPERATION_ABORTED))
    if decision is None:
        return prepared
    if decision.block:
        result = error_result(decision.reason or TOOL_BLOCKED)
        result.terminate = decision.terminate is True
        return ImmediateOutcome(result)
    if decision.args is not None:
        # Approval with edited arguments: they pass validation again.
        edited = dataclasses.replace(prepared.tool_call, arguments=_plain_arguments(decision.args), raw_arguments=None)
        clean_tool_call(edited)  # a person's edit enters like the model's arguments: bounded, valid text
        prepared.args = validate_tool_arguments(prepared.tool, edited)
    return prepared


# ---------------------------------------------------------------- phase 2: execute


async def call_tool_execute(
    tool: AgentTool, tool_call_id: str, args: Any, signal: AbortSignal, on_update: ToolUpdateCallback
) -> Any:
    """Run ``tool.execute``: async ones on the loop, sync ones on a worker thread.

    A sync function that returns an awaitable (a wrapper around a coroutine)
    gets that awaitable awaited back on the loop.
    """
    execute = tool.execute
    if is_async_callable(execute):
        value = execute(tool_call_id, args, signal, on_update)
    else:
        value = await run_in_worker(execute, tool_call_id, args, signal, on_update)
    if inspect.isawaitable(value):
        value = await value
    return value


async def execute_prepared_tool_call(
    prepared: PreparedToolCall, signal: AbortSignal, on_update: ToolUpdateCallback
) -> ExecutedOutcome:
    """Phase 2: what ``execute`` returned, or what it raised as an error result.

    ``SystemExit`` / ``KeyboardInterrupt`` from an async tool are results too,
    as they are from a sync one (``as_tool_error``): raised on the loop they
    would stop it. ``CancelledError`` is not caught: the call's task is being
    cancelled (an abort's grace ran out, the run itself was cancelled), or the
    tool called ``signal.throw_if_aborted()``; either way it ends as aborted.
    """
    try:
        value = await call_tool_execute(prepared.tool, prepared.tool_call.id, prepared.args, signal, on_update)
        return ExecutedOutcome(as_tool_result(value), False)
    except Exception as error:  # noqa: BLE001 - a failing tool is a result the model reads
        return ExecutedOutcome(error_result(error_text(error)), True)
    except (SystemExit, KeyboardInterrupt) as error:
        return ExecutedOutcome(error_result(error_text(as_tool_error(error))), True)


# ---------------------------------------------------------------- phase 3: finalize


async def finalize_executed_tool_call(
    context: Context,
    assistant_message: AssistantMessage,
    prepared: PreparedToolCall,
    executed: ExecutedOutcome,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> FinalizedToolCall:
    result, is_error = executed.result, executed.is_error
    if config.after_tool_call is not None:
        hook_context = AfterToolCallContext(
            assistant_message, prepared.tool_call, prepared.args, result, is_error, context
        )
        try:
            patch = await call_hook(config.after_tool_call, hook_context, signal)
        except Exception as error:  # noqa: BLE001 - a failing hook is a result the model reads
            return FinalizedToolCall(prepared.tool_call, error_result(error_text(error)), True)
        if patch is not None:
            # Field by field: None keeps, a given value replaces the field whole.
            result = dataclasses.replace(
                result,
                content=result.content if patch.content is None else patch.content,
                details=result.details if patch.details is None else patch.details,
                usage=result.usage if patch.usage is None else patch.usage,
                terminate=result.terminate if patch.terminate is None else patch.terminate,
            )
            is_error = is_error if patch.is_error is None else patch.is_error
    return FinalizedToolCall(prepared.tool_call, result, is_error)
