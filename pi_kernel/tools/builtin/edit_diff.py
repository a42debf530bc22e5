"""Matching, replacing and diffing for the ``edit`` tool (port of pi's ``edit-diff.ts``).

Matching is pi's: each ``old_text`` is looked for exactly first; when that fails, in a "fuzzy" form of both
texts (NFKC, trailing whitespace of each line dropped, curly quotes, Unicode dashes and odd spaces made
ASCII). Uniqueness is counted in the fuzzy form, as pi does.

One deliberate improvement: pi, once any edit needs the fuzzy form, rewrites the whole file in that
normalised form (stripping trailing whitespace and replacing quotes everywhere). Here a fuzzy match is
mapped back to its span in the original text and only that span is replaced; everything else stays byte
for byte. (The mapping normalises per character with its combining marks, which equals whole-text NFKC
except for exotic sequences such as conjoining Hangul jamo; those then simply do not fuzzy-match.)
"""

from __future__ import annotations

import difflib
import itertools
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""What JavaScript's ``trimEnd`` strips (pi's definition of trailing whitespace)."""

_FUZZY_CHARS = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "),
    }
)
"""One character for one: smart quotes, dashes and special spaces to ASCII."""

LineEnding = Literal["\r\n", "\n"]


class EditError(ValueError):
    """An edit that cannot be applied; the message is for the model."""


def detect_line_ending(content: str) -> LineEnding:
    """``\\r\\n`` when the first line break is CRLF, else ``\\n``."""
    lf = content.find("\n")
    return "\r\n" if lf > 0 and content[lf - 1] == "\r" else "\n"


def normalize_to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def restore_line_endings(text: str, ending: LineEnding) -> str:
    return text.replace("\n", "\r\n") if ending == "\r\n" else text


def strip_bom(content: str) -> tuple[str, str]:
    """``(bom, text)``: the UTF-8 byte order mark (or ``""``) and the text without it."""
    return ("\ufeff", content[1:]) if content.startswith("\ufeff") else ("", content)


def normalize_for_fuzzy_match(text: str) -> str:
    """pi's fuzzy form of a whole text."""
    text = unicodedata.normalize("NFKC", text)
    text = "\n".join(line.rstrip(_JS_WHITESPACE) for line in text.split("\n"))
    return text.translate(_FUZZY_CHARS)


@dataclass(slots=True)
class FuzzyText:
    """A text's fuzzy form with, for each of its characters, the span it came from."""

    text: str
    starts: list[int]
    ends: list[int]

    @classmethod
    def of(cls, original: str) -> FuzzyText:
        chars: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        position = 0
        for line_number, line in enumerate(original.split("\n")):
            if line_number:
                chars.append("\n")
                starts.append(position - 1)
                ends.append(position)
            if line.isascii():  # NFKC and the character table leave ASCII alone
                kept = line.rstrip(_JS_WHITESPACE)
                chars.append(kept)
                starts.extend(range(position, position + len(kept)))
                ends.extend(range(position + 1, position + len(kept) + 1))
            else:
                _append_normalized_line(line, position, chars, starts, ends)
            position += len(line) + 1
        return cls("".join(chars), starts, ends)

    def span(self, index: int, length: int) -> tuple[int, int]:
        """The original span of ``text[index:index + length]``."""
        if length == 0:
            start = self.starts[index] if index < len(self.starts) else (self.ends[-1] if self.ends else 0)
            return start, start
        return self.starts[index], self.ends[index + length - 1]


def _append_normalized_line(line: str, offset: int, chars: list[str], starts: list[int], ends: list[int]) -> None:
    """One non-ASCII line in fuzzy form: NFKC per character with its combining marks, trimmed, translated."""
    line_chars: list[tuple[str, int, int]] = []
    index = 0
    while index < len(line):
        end = index + 1
        while end < len(line) and unicodedata.combining(line[end]):
            end += 1
        for char in unicodedata.normalize("NFKC", line[index:end]):
            line_chars.append((char, offset + index, offset + end))
        index = end
    while line_chars and line_chars[-1][0] in _JS_WHITESPACE:
        line_chars.pop()
    for char, start, end in line_chars:
        chars.append(char.translate(_FUZZY_CHARS))
        starts.append(start)
        ends.append(end)


def _error_texts(path: str, total: int) -> dict[str, str]:
    """pi's messages, with the field names the model sees (``old_text``)."""
    if total == 1:
        return {
            "empty": f"old_text must not be empty in {path}.",
            "not_found": f"Could not find the exact text in {path}. The old text must match exactly including all "
            "whitespace and newlines.",
            "duplicate": "Found {count} occurrences of the text in " + path + ". The text must be unique. Please "
            "provide more context to make it unique.",
            "no_change": f"No changes made to {path}. The replacement produced identical content. This might indicate "
            "an issue with special characters or the text not existing as expected.",
        }
    return {
        "empty": "edits[{index}].old_text must not be empty in " + path + ".",
        "not_found": "Could not find edits[{index}] in " + path + ". The old_text must match exactly including all "
        "whitespace and newlines.",
        "duplicate": "Found {count} occurrences of edits[{index}] in " + path + ". Each old_text must be unique. "
        "Please provide more context to make it unique.",
        "no_change": f"No changes made to {path}. The replacements produced identical content.",
    }


def apply_edits(content: str, edits: Sequence[tuple[str, str]], path: str) -> str:
    """``content`` (LF-normalised) with the ``(old_text, new_text)`` replacements: each ``old_text`` matched
    against the original ``content``, unique, overlapping no other; ``EditError`` with pi's messages."""
    texts = _error_texts(path, len(edits))
    normalized = [(normalize_to_lf(old), normalize_to_lf(new)) for old, new in edits]
    for index, (old, _new) in enumerate(normalized):
        if not old:
            raise EditError(texts["empty"].format(index=index))
    fuzzy_content = normalize_for_fuzzy_match(content)
    fuzzy_map: FuzzyText | None = None  # built only when an exact match fails
    matches: list[tuple[int, int, int, str]] = []  # (start, end, edit index, new text)
    for index, (old, new) in enumerate(normalized):
        start = content.find(old)
        if start != -1:
            end = start + len(old)
        else:
            if fuzzy_map is None:
                fuzzy_map = FuzzyText.of(content)
            fuzzy_old = normalize_for_fuzzy_match(old)
            found = fuzzy_map.text.find(fuzzy_old)
            if found == -1:
                raise EditError(texts["not_found"].format(index=index))
            start, end = fuzzy_map.span(found, len(fuzzy_old))
        count = fuzzy_content.count(normalize_for_fuzzy_match(old))
        if count > 1:
            raise EditError(texts["duplicate"].format(index=index, count=count))
        matches.append((start, end, index, new))
    matches.sort(key=lambda match: match[0])
    for (_, previous_end, previous, _), (current_start, _, current, _) in itertools.pairwise(matches):
        if previous_end > current_start:
            raise EditError(
                f"edits[{previous}] and edits[{current}] overlap in {path}. "
                "Merge them into one edit or target disjoint regions."
            )
    pieces: list[str] = []
    cursor = 0
    for start, end, _, new_text in matches:
        pieces += [content[cursor:start], new_text]
        cursor = end
    pieces.append(content[cursor:])
    new_content = "".join(pieces)
    if new_content == content:
        raise EditError(texts["no_change"])
    return new_content


def generate_diff_string(old_content: str, new_content: str, context_lines: int = 4) -> tuple[str, int | None]:
    """pi's numbered diff: ``(diff, first changed line in the new file or None)``. Lines look like ``+ 12 added``,
    ``- 12 removed``, ``  12 context``, `` ...`` where unchanged lines are skipped (``context_lines`` kept)."""
    old_lines = old_content.split("\n")
    new_lines = new_content.split("\n")
    width = len(str(max(len(old_lines), len(new_lines))))
    if old_content.endswith("\n") and new_content.endswith("\n"):
        old_lines, new_lines = old_lines[:-1], new_lines[:-1]
    parts = _line_parts(old_lines, new_lines)
    output: list[str] = []
    old_number = new_number = 1
    first_changed: int | None = None
    for index, (kind, lines) in enumerate(parts):
        if kind != "equal":
            first_changed = first_changed or new_number
            sign, number = ("+", new_number) if kind == "added" else ("-", old_number)
            output.extend(f"{sign}{number + offset:>{width}} {line}" for offset, line in enumerate(lines))
            new_number += len(lines) if kind == "added" else 0
            old_number += len(lines) if kind == "removed" else 0
            continue
        # Equal runs lie between changes: context after the change before, before the change after.
        head = context_lines if index > 0 else 0
        tail = context_lines if index < len(parts) - 1 else 0
        if len(parts) == 1:  # no change at all
            shown: list[int | None] = []
        elif len(lines) <= head + tail:
            shown = list(range(len(lines)))
        else:
            shown = [*range(head), None, *range(len(lines) - tail, len(lines))]
        for i in shown:
            output.append(f" {'':>{width}} ..." if i is None else f" {old_number + i:>{width}} {lines[i]}")
        old_number += len(lines)
        new_number += len(lines)
    return "\n".join(output), first_changed


def _line_parts(old_lines: list[str], new_lines: list[str]) -> list[tuple[str, list[str]]]:
    """Runs of equal / removed / added lines, removals before additions (as jsdiff's ``diffLines``)."""
    parts: list[tuple[str, list[str]]] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            parts.append(("equal", old_lines[old_start:old_end]))
            continue
        if old_end > old_start:
            parts.append(("removed", old_lines[old_start:old_end]))
        if new_end > new_start:
            parts.append(("added", new_lines[new_start:new_end]))
    return parts
