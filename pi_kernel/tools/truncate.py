"""Tool-output truncation with pi's limits and wording (port of pi's ``truncate.ts``).

Two independent limits, whichever is hit first: ``DEFAULT_MAX_LINES`` lines
and ``DEFAULT_MAX_BYTES`` bytes of UTF-8. ``truncate_head`` keeps the start
(file reads), ``truncate_tail`` the end (command output, where errors and
results are). Neither returns a partial line, except ``truncate_tail`` when
the last line alone is over the byte limit (then its end is kept).

``TruncationResult`` is what the tools put in ``details["truncation"]`` (as a
dict, snake_case keys) so the UI can say what was cut.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024


@dataclass(frozen=True, slots=True)
class TruncationResult:
    content: str
    """The kept text."""
    truncated: bool
    """Whether anything was cut."""
    truncated_by: Literal["lines", "bytes"] | None
    """Which limit cut it (``None`` when nothing was cut)."""
    total_lines: int
    """Lines in the original text (``text.split("\\n")``)."""
    total_bytes: int
    """UTF-8 bytes in the original text."""
    output_lines: int
    """Complete lines kept."""
    output_bytes: int
    """UTF-8 bytes kept."""
    last_line_partial: bool
    """Tail truncation kept only the end of an over-long last line."""
    first_line_exceeds_limit: bool
    """Head truncation: the first line alone is over the byte limit (nothing kept)."""
    max_lines: int
    """The line limit applied."""
    max_bytes: int
    """The byte limit applied."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form for ``details`` (without the kept text, which is in ``content``)."""
        data = dataclasses.asdict(self)
        del data["content"]
        return data


def format_size(size: int) -> str:
    """``512B``, ``50.0KB``, ``1.5MB`` (pi's ``formatSize``)."""
    if size < 1024:
        return f"{size}B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f}KB"
    return f"{size / (1024 * 1024):.1f}MB"


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _untruncated(content: str, total_lines: int, total_bytes: int, max_lines: int, max_bytes: int) -> TruncationResult:
    return TruncationResult(
        content, False, None, total_lines, total_bytes, total_lines, total_bytes, False, False, max_lines, max_bytes
    )


def truncate_head(
    content: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """Keep the first lines that fit both limits; never a partial line."""
    total_bytes = utf8_len(content)
    lines = content.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untruncated(content, total_lines, total_bytes, max_lines, max_bytes)
    if utf8_len(lines[0]) > max_bytes:
        return TruncationResult("", True, "bytes", total_lines, total_bytes, 0, 0, False, True, max_lines, max_bytes)
    kept: list[str] = []
    kept_bytes = 0
    truncated_by: Literal["lines", "bytes"] = "lines"
    for index, line in enumerate(lines[:max_lines]):
        line_bytes = utf8_len(line) + (1 if index > 0 else 0)  # the newline before it
        if kept_bytes + line_bytes > max_bytes:
            truncated_by = "bytes"
            break
        kept.append(line)
        kept_bytes += line_bytes
    if len(kept) >= max_lines and kept_bytes <= max_bytes:
        truncated_by = "lines"
    output = "\n".join(kept)
    return TruncationResult(
        output,
        True,
        truncated_by,
        total_lines,
        total_bytes,
        len(kept),
        utf8_len(output),
        False,
        False,
        max_lines,
        max_bytes,
    )


def truncate_tail(
    content: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """Keep the last lines that fit both limits; the end of the last line if it alone is too long."""
    total_bytes = utf8_len(content)
    lines = content.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untruncated(content, total_lines, total_bytes, max_lines, max_bytes)
    kept: list[str] = []  # newest first; reversed at the end
    kept_bytes = 0
    truncated_by: Literal["lines", "bytes"] = "lines"
    last_line_partial = False
    for line in reversed(lines):
        if len(kept) >= max_lines:
            break
        line_bytes = utf8_len(line) + (1 if kept else 0)  # the newline after it
        if kept_bytes + line_bytes > max_bytes:
            truncated_by = "bytes"
            if not kept:
                tail = truncate_to_bytes_from_end(line, max_bytes)
                kept.append(tail)
                kept_bytes = utf8_len(tail)
                last_line_partial = True
            break
        kept.append(line)
        kept_bytes += line_bytes
    if len(kept) >= max_lines and kept_bytes <= max_bytes:
        truncated_by = "lines"
    output = "\n".join(reversed(kept))
    return TruncationResult(
        output,
        True,
        truncated_by,
        total_lines,
        total_bytes,
        len(kept),
        utf8_len(output),
        last_line_partial,
        False,
        max_lines,
        max_bytes,
    )


def truncate_to_bytes_from_end(text: str, max_bytes: int) -> str:
    """The longest end of ``text`` within ``max_bytes`` UTF-8 bytes, cut at a character boundary."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    start = len(data) - max_bytes
    while start < len(data) and (data[start] & 0xC0) == 0x80:  # skip continuation bytes
        start += 1
    return data[start:].decode("utf-8", "surrogatepass")


def tail_notice(truncation: TruncationResult, full_output_path: str | None, last_line_bytes: int) -> str:
    """pi's trailer for tail-truncated command output (``\\n\\n[Showing lines ...]``).

    ``last_line_bytes`` is the size of the original last line, named when only
    its end could be shown.
    """
    end_line = truncation.total_lines
    start_line = end_line - truncation.output_lines + 1
    if truncation.last_line_partial:
        return (
            f"\n\n[Showing last {format_size(truncation.output_bytes)} of line {end_line} "
            f"(line is {format_size(last_line_bytes)}). Full output: {full_output_path}]"
        )
    if truncation.truncated_by == "lines":
        return (
            f"\n\n[Showing lines {start_line}-{end_line} of {truncation.total_lines}. Full output: {full_output_path}]"
        )
    return (
        f"\n\n[Showing lines {start_line}-{end_line} of {truncation.total_lines} "
        f"({format_size(truncation.max_bytes)} limit). Full output: {full_output_path}]"
    )
