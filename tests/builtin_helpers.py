"""Calling a built-in tool the way the agent loop does: prepare, validate, execute with a context."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

from pi_kernel.agent.tool_execution import FinalizedToolCall, create_tool_result_message
from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent, ToolCall
from pi_kernel.tools import ToolContext, ToolDefinition
from pi_kernel.tools.builtin.edit import EditParams, _pairs, _read_for_edit, prepare_edit_arguments
from pi_kernel.tools.builtin.edit_diff import apply_edits, generate_diff_string
from pi_kernel.tools.paths import resolve_tool_path


def make_ctx(cwd: Path, workspace_root: Path | None = None, namespace: dict[str, Any] | None = None) -> ToolContext:
    return ToolContext(cwd=cwd, workspace_root=workspace_root, namespace=namespace)


async def call_tool(
    definition: ToolDefinition,
    arguments: dict[str, Any],
    ctx: ToolContext,
    *,
    signal: AbortSignal | None = None,
    updates: list[AgentToolResult] | None = None,
) -> AgentToolResult:
    """Prepare and validate ``arguments`` as the loop would, then run ``execute`` (sync ones on a thread)."""
    raw = definition.prepare_arguments(arguments) if definition.prepare_arguments else arguments
    assert isinstance(definition.parameters, type)
    params = definition.parameters.model_validate(raw)
    on_update = updates.append if updates is not None else None
    if inspect.iscoroutinefunction(definition.execute):
        return await definition.execute("call-1", params, signal, on_update, ctx)  # type: ignore[no-any-return]
    return await asyncio.to_thread(definition.execute, "call-1", params, signal, on_update, ctx)  # type: ignore[no-any-return]


def text_of(result: AgentToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def entered(text: str) -> str:
    """``text`` as a tool's result enters the transcript, where keys are masked (``tool_execution``): what the
    model and every view get. Tools cut their text never inside a key, so that mask finds each whole."""
    call = FinalizedToolCall(ToolCall("call-1", "tool", {}), AgentToolResult([TextContent(text)]), False)
    return text_of(AgentToolResult(create_tool_result_message(call, max_chars=None).content))


def preview_edit(arguments: EditParams | dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The diff the call would make, without writing: ``{"diff", "first_changed_line"}`` or ``{"error"}``.

    The edit tool's own steps (its private helpers), as an approval view could show the change first.
    """
    try:
        params = (
            arguments
            if isinstance(arguments, EditParams)
            else EditParams.model_validate(prepare_edit_arguments(arguments))
        )
        pairs = _pairs(params)
        absolute = resolve_tool_path(params.path, ctx)
        _bom, _ending, base = _read_for_edit(absolute, params.path)
        diff, first_changed_line = generate_diff_string(base, apply_edits(base, pairs, params.path))
    except Exception as error:  # noqa: BLE001 - a preview reports any failure as text
        return {"error": str(error)}
    return {"diff": diff, "first_changed_line": first_changed_line}
