"""Tool output cut as pi cuts it (port of pi's ``truncate.ts``), and command output kept as pi's ``bash``
keeps it: a rolling tail in memory, all of it in a temp file when long.

**Truncation**: two independent limits, whichever is hit first: ``DEFAULT_MAX_LINES`` lines and
``DEFAULT_MAX_BYTES`` bytes of UTF-8. ``truncate_head`` keeps the start (file reads), ``truncate_tail``
the end (command output, where errors and results are). Neither returns a partial line, except
``truncate_tail`` when the last line alone is over the byte limit (then its end is kept).
``TruncationResult.to_dict()`` is ``details["truncation"]``, so the UI can say what was cut.

**OutputSpool** (``bash``'s streamed chunks, ``python``'s text): the model gets the tail with pi's
trailer naming the temp file that holds the full output. Memory keeps only the last ~100 KB, so the
totals in the trailer and in ``details["truncation"]`` are counted as chunks arrive, not taken from the
kept tail: ``seq 1 50000`` must say "of 50001", not the number of lines that happen to be in memory.

The temp file is private and short-lived: it is created with mode 0600 in a folder of this process only
(mode 0700, ``spool_folder``), its text is masked (``paths.MaskedStream``: key values, URL credentials,
``sk-`` keys) when the command ends, and the folder is removed when the process exits (the trailer names
the file so that the model can read it during the session).
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import dataclasses
import os
import secrets
import shutil
import tempfile
import threading
from collections import deque
from typing import IO, Any, Literal

from pi_kernel.tools.paths import MaskedStream, mask

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class TruncationResult:
    content: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    """Lines in the original text (``text.split("\\n")``); the byte counts are of UTF-8."""
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool
    """Tail truncation kept only the end of an over-long last line."""
    first_line_exceeds_limit: bool
    """Head truncation: the first line alone is over the byte limit (nothing kept)."""
    max_lines: int
    max_bytes: int

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


def truncate_head(
    content: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """Keep the first lines that fit both limits; never a partial line."""
    return _truncate(content, max_lines, max_bytes, tail=False)


def truncate_tail(
    content: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """Keep the last lines that fit both limits; the end of the last line if it alone is too long."""
    return _truncate(content, max_lines, max_bytes, tail=True)


def _truncate(content: str, max_lines: int, max_bytes: int, *, tail: bool) -> TruncationResult:
    total_bytes = utf8_len(content)
    lines = content.split("\n")

    def result(
        kept: str, by: Literal["lines", "bytes"] | None, count: int, partial: bool = False, too_long: bool = False
    ) -> TruncationResult:
        return TruncationResult(
            kept,
            by is not None,
            by,
            len(lines),
            total_bytes,
            count,
            utf8_len(kept),
            partial,
            too_long,
            max_lines,
            max_bytes,
        )

    if len(lines) <= max_lines and total_bytes <= max_bytes:
        return result(content, None, len(lines))
    if not tail and utf8_len(lines[0]) > max_bytes:
        return result("", "bytes", 0, too_long=True)
    kept: list[str] = []
    kept_bytes = 0
    truncated_by: Literal["lines", "bytes"] = "lines"
    partial = False
    for line in reversed(lines) if tail else lines:
        if len(kept) >= max_lines:
            break
        line_bytes = utf8_len(line) + (1 if kept else 0)  # the newline between it and the lines kept
        if kept_bytes + line_bytes > max_bytes:
            truncated_by = "bytes"
            if not kept:  # tail only (head checked the first line): keep the end of the last line
                # masked before the cut: the end kept may begin inside a key, too short a piece to find
                kept, partial = [truncate_to_bytes_from_end(mask(line), max_bytes)], True
            break
        kept.append(line)
        kept_bytes += line_bytes
    if len(kept) >= max_lines:
        truncated_by = "lines"
    return result("\n".join(reversed(kept) if tail else kept), truncated_by, len(kept), partial)


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
    """pi's trailer for tail-truncated command output; ``last_line_bytes`` (the original last line's size) is
    named when only its end could be shown."""
    end_line = truncation.total_lines
    if truncation.last_line_partial:
        shown = (
            f"last {format_size(truncation.output_bytes)} of line {end_line} (line is {format_size(last_line_bytes)})"
        )
    else:
        limit = "" if truncation.truncated_by == "lines" else f" ({format_size(truncation.max_bytes)} limit)"
        shown = f"lines {end_line - truncation.output_lines + 1}-{end_line} of {end_line}{limit}"
    return f"\n\n[Showing {shown}. Full output: {full_output_path}]"


_folder: str | None = None
_folder_lock = threading.Lock()


def spool_folder() -> str:
    """This process's private folder for full-output files (mode 0700), removed at exit."""
    global _folder
    with _folder_lock:
        if _folder is None or not os.path.isdir(_folder):
            _folder = tempfile.mkdtemp(prefix="pi-kernel-")
            atexit.register(shutil.rmtree, _folder, ignore_errors=True)
        return _folder


def mask_file(path: str, block_size: int = 1 << 20) -> None:
    """Rewrite ``path`` with its keys masked (read in blocks; a key across two blocks is masked whole)."""
    stream = MaskedStream()  # what may be the beginning of a key waits for the next block
    masked = f"{path}.masking"
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    with open(path, "rb") as source, os.fdopen(_private(masked), "w", encoding="utf-8") as target:
        while block := source.read(block_size):
            target.write(stream.feed(decoder.decode(block)))
        target.write(stream.feed(decoder.decode(b"", final=True)) + stream.flush())
    os.replace(masked, path)


def _private(path: str) -> int:
    """A new file only this user can read (0600), opened for writing."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)


class OutputSpool:
    def __init__(self, prefix: str = "pi-bash") -> None:
        self._prefix = prefix
        self._chunks: deque[bytes] = deque()
        self._chunk_bytes = 0
        self.total_bytes = 0
        """Every byte seen, also those no longer in memory."""
        self.newlines = 0
        """Every newline seen, also in chunks no longer in memory."""
        self.last_line_bytes = 0
        """Bytes after the last newline seen (the whole last line, even when longer than memory keeps)."""
        self.full_output_path: str | None = None
        """The temp file with the whole output, once there is one."""
        self._file: IO[bytes] | None = None
        self._max_memory = DEFAULT_MAX_BYTES * 2
        """At least this much of the end stays in memory (plus at most one chunk more)."""

    def add(self, data: bytes) -> None:
        if not data:
            return
        self.total_bytes += len(data)
        self.newlines += data.count(b"\n")
        newline = data.rfind(b"\n")
        self.last_line_bytes = len(data) - newline - 1 if newline != -1 else self.last_line_bytes + len(data)
        if self.total_bytes > DEFAULT_MAX_BYTES:
            self._ensure_file()
        if self._file is not None:
            self._file.write(data)
        self._chunks.append(data)
        self._chunk_bytes += len(data)
        # Drop the oldest chunk only while the rest still holds ``_max_memory``:
        # dropping down to "under the limit" could leave a small last chunk
        # alone, shorter than the tail ``truncate_tail`` must show.
        while len(self._chunks) > 1 and self._chunk_bytes - len(self._chunks[0]) >= self._max_memory:
            self._chunk_bytes -= len(self._chunks.popleft())

    def _ensure_file(self) -> None:
        if self._file is not None:
            return
        self.full_output_path = os.path.join(spool_folder(), f"{self._prefix}-{secrets.token_hex(8)}.log")
        self._file = os.fdopen(_private(self.full_output_path), "wb")
        for chunk in self._chunks:  # everything so far is still in memory (the file starts before trimming)
            self._file.write(chunk)

    def close(self) -> None:
        """Close the file and mask it (once)."""
        if self._file is not None and not self._file.closed:
            self._file.close()
            if self.full_output_path is not None:
                try:
                    mask_file(self.full_output_path)
                except OSError:  # the unmasked file is never left behind
                    with contextlib.suppress(OSError):
                        os.unlink(self.full_output_path)

    @property
    def total_lines(self) -> int:
        """Lines of the whole output, counted as ``text.split("\\n")`` counts them (as ``truncate_tail``)."""
        return self.newlines + 1

    def _truncate(self) -> TruncationResult:
        """``truncate_tail`` of the kept tail, with the whole output's totals when memory dropped some; a cut
        output gets its file."""
        truncation = truncate_tail(b"".join(self._chunks).decode("utf-8", "replace"))
        if self._chunk_bytes < self.total_bytes:
            truncation = dataclasses.replace(truncation, total_lines=self.total_lines, total_bytes=self.total_bytes)
        if truncation.truncated:
            self._ensure_file()
        return truncation

    def snapshot(self) -> tuple[str, dict[str, Any]]:
        """The current tail for a streaming update: ``(text, details)``."""
        truncation = self._truncate()
        return truncation.content, self._details(truncation)

    def final(self) -> tuple[str, dict[str, Any]]:
        """The tail with pi's trailer (``(no output)`` when empty), and ``details``; closes the file."""
        truncation = self._truncate()
        self.close()
        output = truncation.content or "(no output)"
        if truncation.truncated:
            output += tail_notice(truncation, self.full_output_path, self.last_line_bytes)
        return output, self._details(truncation)

    def _details(self, truncation: TruncationResult) -> dict[str, Any]:
        return {
            "truncation": truncation.to_dict() if truncation.truncated else None,
            "full_output_path": self.full_output_path,
        }
