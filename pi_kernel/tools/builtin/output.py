"""Command output kept as pi's ``bash`` keeps it: a rolling tail in memory, all of it on disk when long.

Used by ``bash`` (streamed chunks) and ``python`` (one block of text). The
model gets the tail (``truncate_tail``: last 2000 lines / 50 KB) with pi's
trailer naming the temp file that holds the full output.

Memory keeps only the last ~100 KB, so the totals in the trailer and in
``details["truncation"]`` (lines, bytes) are counted as chunks arrive, not
taken from the kept tail: ``seq 1 50000`` must say "of 50001", not the
number of lines that happen to be in memory.

The temp file is private and short-lived: it is created with mode 0600 in a
folder of this process only (mode 0700, ``spool_folder``), its text is masked
(``paths.MaskedStream``: key values, URL credentials, ``sk-`` keys) when the
command ends, and the folder is removed when the process exits (the trailer
names the file so that the model can read it during the session).
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
from typing import IO, Any

from pi_kernel.tools.paths import MaskedStream
from pi_kernel.tools.truncate import DEFAULT_MAX_BYTES, TruncationResult, tail_notice, truncate_tail

_folder: str | None = None
_folder_lock = threading.Lock()


def spool_folder() -> str:
    """This process's private folder for full-output files (mode 0700), removed at exit."""
    global _folder
    with _folder_lock:
        if _folder is None or not os.path.isdir(_folder):
            _folder = tempfile.mkdtemp(prefix="pi-kernel-")
            atexit.register(remove_spool_folder, _folder)
        return _folder


def remove_spool_folder(folder: str | None = None) -> None:
    """Remove the full-output files (``folder``: this process's)."""
    target = folder or _folder
    if target:
        shutil.rmtree(target, ignore_errors=True)


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
