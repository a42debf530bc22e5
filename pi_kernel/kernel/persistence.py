"""``%pi save`` / ``%pi load``: a conversation as JSON lines.

A header (format, version, model, and the message each ``%%pi`` cell's turn starts at, so a re-run
after ``%pi load`` still replaces its turn), then one message a line (``pi_kernel.ai.to_dict``). A
version-1 file's compaction summary, known by its ``[compacted N turns]`` text in first place, is read as
one (version 2 writes ``compacted_turns``). Keys are never written: a ``Model`` holds only the name of
its key's variable, the header only ``provider:id``, and every string is masked on the way out, and on
the way in (a file written elsewhere may hold a key in a tool call's arguments, which no request masks).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_kernel.ai import message_from_dict, to_dict
from pi_kernel.ai.messages import clean_data, clean_message, message_problem
from pi_kernel.kernel.outgoing import masked
from pi_kernel.tools.files import write_text_atomic

FORMAT = "pi-kernel-conversation"
VERSION = 2
READABLE_VERSIONS = (1, 2)
_V1_SUMMARY = re.compile(r"^\[compacted (\d+) turns?\]")
"""How version 1 marked a summary (its text): read only from version-1 files, only in first place."""


@dataclass
class SavedConversation:
    messages: list[Any]
    model: str | None = None
    """``provider:id`` of the model it was saved with."""
    cells: dict[str, int] = field(default_factory=dict)
    """Cell id → index of the first message of its turn."""


def save_conversation(
    path: str | Path, messages: list[Any], model: str | None = None, cells: dict[str, int] | None = None
) -> Path:
    """Write ``messages`` to ``path`` (JSON lines); returns the path. ``cells``: cell id → first message."""
    target = Path(path).expanduser()
    header = {
        "format": FORMAT,
        "version": VERSION,
        "model": model,
        "saved_at": int(time.time()),
        "count": len(messages),
        "cells": clean_data(dict(cells or {})),  # cell ids come from the front-end: any text
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    lines += [json.dumps(masked(to_dict(message)), ensure_ascii=False, default=repr) for message in messages]
    # Encoded whole before the file is touched, then written atomically: a failure keeps the previous save.
    write_text_atomic(target, "\n".join(lines) + "\n", make_parents=True)
    return target


def load_conversation(path: str | Path) -> SavedConversation:
    """Read a file written by ``save_conversation``; ``ValueError`` names the first bad line. The whole file
    is checked first (``message_problem``, the header's ``count``), and every message made sendable
    (``clean_message``), so a loaded conversation can never break the turns that follow."""
    source = Path(path).expanduser()
    text = source.read_bytes().decode("utf-8", "replace")
    # Records end at "\n" only: ``str.splitlines`` would also cut at U+2028/U+2029/U+0085, which
    # ``json.dumps(ensure_ascii=False)`` writes raw inside strings.
    rows = [(number, line) for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
    if not rows:
        raise ValueError(f"{source}: empty file")
    header_number, header_row = rows[0]
    header = _parse_row(source, header_number, header_row, f"not a {FORMAT} header")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{source}:{header_number}: not a {FORMAT} file")
    version = header.get("version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise ValueError(f"{source}:1: format version {version!r} is not supported (expected {VERSION})")
    messages = []
    for number, row in rows[1:]:
        data = _parse_row(source, number, row, "not a message")
        problem = message_problem(data)
        if problem is not None:
            raise ValueError(f"{source}:{number}: not a message ({problem})")
        try:
            messages.append(clean_message(message_from_dict(masked(data))))  # a foreign file's keys too
        except (ValueError, TypeError, KeyError) as error:  # message_problem should have said: belt and braces
            raise ValueError(f"{source}:{number}: not a message ({error})") from None
    if version == 1 and messages:
        _mark_v1_summary(messages[0])
    count = header.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count != len(messages):
        raise ValueError(
            f"{source}: the header says {count} messages, the file holds {len(messages)} (cut short or edited)"
        )
    model = header.get("model")
    return SavedConversation(
        messages, model if isinstance(model, str) else None, _cells(header.get("cells"), len(messages))
    )


def _mark_v1_summary(message: Any) -> None:
    """A version-1 file's first message that begins ``[compacted N turns]`` was written as a summary."""
    if getattr(message, "role", "") != "user" or getattr(message, "compacted_turns", None) is not None:
        return
    content = message.content
    text = content if isinstance(content, str) else "".join(getattr(block, "text", "") for block in content[:1])
    found = _V1_SUMMARY.match(text)
    if found:
        message.compacted_turns = int(found.group(1))


def _parse_row(source: Path, number: int, row: str, what: str) -> Any:
    try:
        return json.loads(row)
    except RecursionError:
        raise ValueError(f"{source}:{number}: {what} (nested too deeply)") from None
    except ValueError as error:
        raise ValueError(f"{source}:{number}: {what} ({error})") from None


def _cells(value: Any, count: int) -> dict[str, int]:
    """The header's cell marks that still make sense (an edited file may hold anything)."""
    if not isinstance(value, dict):
        return {}
    return {
        str(cell): start
        for cell, start in value.items()
        if isinstance(start, int) and not isinstance(start, bool) and 0 <= start <= count
    }
