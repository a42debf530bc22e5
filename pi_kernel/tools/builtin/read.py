"""The ``read`` tool: a text file's lines (truncated with a way to continue), or an image.

Port of pi's ``read.ts``. Text: lines from ``offset`` (1-indexed), at most ``limit`` of them, then cut by
``truncate_head`` (2000 lines / 50 KB) with pi's trailers: ``[Showing lines X-Y of Z. Use offset=N to
continue.]``, ``[... (50.0KB limit). ...]``, ``[N more lines in file. Use offset=N to continue.]``, and for
a single line over the byte limit a pointer to ``bash``. Images (PNG, JPEG, GIF, WebP, by their magic
bytes) come back as an ``ImageContent`` after a short text note.

``details``: ``{"path": <absolute path>, "truncation": <TruncationResult dict> | None}`` for text;
``{"path": ..., "mime_type": ...}`` for an image.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel, Field

from pi_kernel.agent import OPERATION_ABORTED
from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, ImageContent, TextContent
from pi_kernel.tools.builtin.output import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head, utf8_len
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.paths import resolve_tool_path
from pi_kernel.tools.results import IMAGE_OMITTED_NOTE, fit_image, image_mime_type

READ_DESCRIPTION = (
    "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images are sent as "
    f"attachments. For text files, output is truncated to {DEFAULT_MAX_LINES} lines or "
    f"{DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). Use offset/limit for large files. When you need the "
    "full file, continue with offset until complete."
)


class ReadParams(BaseModel):
    path: str = Field(description="Path to the file to read (relative or absolute)")
    offset: int | None = Field(default=None, description="Line number to start reading from (1-indexed)")
    limit: int | None = Field(default=None, description="Maximum number of lines to read")


def create_read_tool() -> ToolDefinition:
    async def execute(
        tool_call_id: str, params: ReadParams, signal: AbortSignal | None, on_update: Any, ctx: ToolContext
    ) -> AgentToolResult:
        if signal is not None and signal.aborted:
            raise RuntimeError(OPERATION_ABORTED)
        absolute = resolve_tool_path(params.path, ctx, for_read=True)
        result = await asyncio.to_thread(read_file, absolute, params)
        if signal is not None and signal.aborted:
            raise RuntimeError(OPERATION_ABORTED)
        return result

    return ToolDefinition(
        origin="builtin",
        secret_arguments={"path": "path"},  # what of a call may name secrets (approval.secret_reason)
        name="read",
        description=READ_DESCRIPTION,
        parameters=ReadParams,
        execute=execute,
        prompt_snippet="Read file contents",
        prompt_guidelines=("Use read to examine files instead of cat or sed.",),
        read_only=True,
    )


def read_file(absolute: str, params: ReadParams) -> AgentToolResult:
    """The blocking part of ``read``: the result for the file at ``absolute``."""
    if not os.path.exists(absolute):
        raise FileNotFoundError(f"File not found: {params.path}")
    if os.path.isdir(absolute):
        raise IsADirectoryError(f"{params.path} is a directory, not a file. Use bash (ls) to list its contents.")
    with open(absolute, "rb") as file:
        data = file.read()
    mime_type = image_mime_type(data[:16])
    if mime_type is not None:
        return _image_result(absolute, data, mime_type)
    text, truncation = read_text_lines(data.decode("utf-8", "replace"), params)
    return AgentToolResult([TextContent(text)], details={"path": absolute, "truncation": truncation})


def _image_result(absolute: str, data: bytes, mime_type: str) -> AgentToolResult:
    """The image bounded for the model (``fit_image``), after a note naming its type."""
    fitted = fit_image(data, mime_type)
    blocks: list[Any]
    if fitted is None:
        blocks = [TextContent(f"Read image file [{mime_type}]\n{IMAGE_OMITTED_NOTE}")]
    else:
        note = f"Read image file [{fitted.mime_type}]" + (f"\n{fitted.note}" if fitted.note else "")
        blocks = [TextContent(note), ImageContent(fitted.data, fitted.mime_type)]
    return AgentToolResult(blocks, details={"path": absolute, "mime_type": mime_type})


def read_text_lines(content: str, params: ReadParams) -> tuple[str, dict[str, Any] | None]:
    """pi's text read: the selected lines with their trailer, and the truncation dict (or None)."""
    all_lines = content.split("\n")
    total = len(all_lines)
    start = max(0, params.offset - 1) if params.offset else 0
    if start >= total:
        raise ValueError(f"Offset {params.offset} is beyond end of file ({total} lines total)")
    end = total if params.limit is None else min(start + max(0, params.limit), total)
    truncation = truncate_head("\n".join(all_lines[start:end]))
    first_shown = start + 1
    if truncation.first_line_exceeds_limit:
        size = format_size(utf8_len(all_lines[start]))
        text = (
            f"[Line {first_shown} is {size}, exceeds {format_size(DEFAULT_MAX_BYTES)} limit. "
            f"Use bash: sed -n '{first_shown}p' {params.path} | head -c {DEFAULT_MAX_BYTES}]"
        )
        return text, truncation.to_dict()
    if truncation.truncated:
        last_shown = first_shown + truncation.output_lines - 1
        limit_note = "" if truncation.truncated_by == "lines" else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
        text = (
            f"{truncation.content}\n\n[Showing lines {first_shown}-{last_shown} of {total}{limit_note}. "
            f"Use offset={last_shown + 1} to continue.]"
        )
        return text, truncation.to_dict()
    if end < total:
        return f"{truncation.content}\n\n[{total - end} more lines in file. Use offset={end + 1} to continue.]", None
    return truncation.content, None
