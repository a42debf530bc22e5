"""Command output kept as pi's ``bash`` keeps it: a rolling tail in memory, all of it on disk when long.

Used by ``bash`` (streamed chunks) and ``python`` (one block of text). The
model gets the tail (``truncate_tail``: last 2000 lines / 50 KB) with pi's
trailer naming the temp file that holds the full output.

Memory keeps only the last ~100 KB, so the totals in the trailer and in
``details["truncation"]`` (lines, bytes) are counted as chunks arrive, not
taken from the kept tail: ``seq 1 50000`` must say "of 50001", not the
number of lines that happen to be in memory.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import tempfile
from collections import deque
from typing import IO, Any

from pi_kernel.tools.truncate import DEFAULT_MAX_BYTES, TruncationResult, tail_notice, truncate_tail


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
        self.full_output_path = os.path.join(tempfile.gettempdir(), f"{self._prefix}-{secrets.token_hex(8)}.log")
        self._file = open(self.full_output_path, "wb")
        for chunk in self._chunks:  # everything so far is still in memory (the file starts before trimming)
            self._file.write(chunk)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    @property
    def total_lines(self) -> int:
        """Lines of the whole output, counted as ``text.split("\\n")`` counts them (as ``truncate_tail``)."""
        return self.newlines + 1

    def tail_text(self) -> str:
        return b"".join(self._chunks).decode("utf-8", "replace")

    def _truncate(self) -> TruncationResult:
        """``truncate_tail`` of the kept tail, with the whole output's totals when memory dropped some."""
        truncation = truncate_tail(self.tail_text())
        if self._chunk_bytes < self.total_bytes:
            truncation = dataclasses.replace(truncation, total_lines=self.total_lines, total_bytes=self.total_bytes)
        return truncation

    def snapshot(self) -> tuple[str, dict[str, Any]]:
        """The current tail for a streaming update: ``(text, details)``."""
        truncation = self._truncate()
        if truncation.truncated:
            self._ensure_file()
        return truncation.content, self._details(truncation)

    def final(self) -> tuple[str, dict[str, Any]]:
        """The tail with pi's trailer (``(no output)`` when empty), and ``details``; closes the file."""
        truncation = self._truncate()
        if truncation.truncated:
            self._ensure_file()
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
