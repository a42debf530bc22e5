"""The ``write`` tool: create or overwrite a file, making its folders.

Port of pi's ``write.ts``: the text is written as UTF-8 exactly as given (no newline translation) by
``save_file`` inside the file mutation queue (``edit`` writes through it too). The reply is pi's
``Successfully wrote N bytes to <path>``; N counts UTF-8 bytes (pi's UTF-16 units, the same for ASCII).

``details``: ``{"path": <absolute path>, "bytes": N}``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from pi_kernel.agent import OPERATION_ABORTED
from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.file_queue import with_file_mutation_queue
from pi_kernel.tools.files import write_file_atomic
from pi_kernel.tools.paths import resolve_tool_path


class WriteParams(BaseModel):
    path: str = Field(description="Path to the file to write (relative or absolute)")
    content: str = Field(description="Content to write to the file")


def save_file(absolute: str, data: bytes, ctx: ToolContext, signal: AbortSignal | None, parents: bool = False) -> None:
    """Write ``data`` inside the file mutation queue: not after an abort (one while waiting for the queue must
    not write), told to the turn's journal first, atomically (``write_file_atomic``)."""
    if signal is not None and signal.aborted:
        raise RuntimeError(OPERATION_ABORTED)
    if ctx.journal is not None:
        ctx.journal.record_file(absolute)
    write_file_atomic(absolute, data, make_parents=parents)


def create_write_tool() -> ToolDefinition:
    async def execute(
        tool_call_id: str, params: WriteParams, signal: AbortSignal | None, on_update: Any, ctx: ToolContext
    ) -> AgentToolResult:
        absolute = resolve_tool_path(params.path, ctx)
        data = params.content.encode("utf-8", "surrogateescape")
        await with_file_mutation_queue(absolute, lambda: save_file(absolute, data, ctx, signal, parents=True))
        return AgentToolResult(
            [TextContent(f"Successfully wrote {len(data)} bytes to {params.path}")],
            details={"path": absolute, "bytes": len(data)},
        )

    return ToolDefinition(
        origin="builtin",
        secret_arguments={"path": "path"},  # what of a call may name secrets (approval.secret_reason)
        name="write",
        description=(
            "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. "
            "Automatically creates parent directories."
        ),
        parameters=WriteParams,
        execute=execute,
        prompt_snippet="Create or overwrite files",
        prompt_guidelines=("Use write only for new files or complete rewrites.",),
        approval="ask",
    )
