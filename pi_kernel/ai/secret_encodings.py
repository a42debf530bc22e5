"""A key in another spelling: its hex and base64 forms, and any of its forms split over lines.

``secrets.mask`` masks the key's own text. A command can print it otherwise
(``base64 /proc/self/environ``, ``xxd -p``, a key folded into short lines),
and the model could decode that. This module owns those other forms:

- hex, lower and upper case (``xxd -p``, ``.hex()``);
- base64 at each of the three byte alignments the key can have in the
  encoded stream (only the characters that depend on the key alone; the
  standard and the URL-safe alphabet);
- each of these, and the key itself, with line breaks inside (``base64``
  wraps at 76 columns, ``xxd -p`` at 60; a key printed in pieces of 8);
- decimal bytes with any separator (``list(key.encode())``, ``' '.join(str(b) ...)``, ``&#115;&#107;``),
  and ``\\u0073`` / ``&#x73;`` escapes, searched in the spaced view too;
- an ``xxd`` dump's hex columns and text columns, each joined over its lines
  (``ColumnsView``: ``xxd -c4`` shows 4 bytes a line);
- hex with any separator and any grouping (``xxd``'s default dump,
  ``od -An -tx1``, ``key.encode().hex(' ')``, ``0x73, 0x6b``, ``\\x73\\x6b``,
  ``%73%6b``; ``od -x``'s little-endian words too), and the key's letters and digits with anything between them
  (markup tags: ``sk-proj-ab<b></b>cd...``, spaces, dots): both searched in
  the text's *spaced view*, the text with every separator taken out (a run
  of characters other than letters and digits, a markup tag, a ``0x`` or ``\\\\x``
  before a hex digit), each run found there masked with what lies between.

A run of a form long enough to stand for ``FRAGMENT_BYTES`` of the key is
masked too (a cut output may hold part of it). Other spellings (a key
reversed or enciphered, UTF-16 hex, base32, binary, octal, a dump in another
layout than ``xxd``'s whose lines interleave offsets and text) are not
recognised: masking is the net under the secret-read
check (``tools.paths``), not a replacement for it.

Every run is found through a few short windows of its form (``windows``);
``may_hold`` searches all the windows of all the forms at once, one regular
expression, so text holding no key (nearly all of it) costs one pass.
"""

from __future__ import annotations

import base64
import re
from bisect import bisect_right
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

FRAGMENT_BYTES = 12
"""A run of an encoded form standing for at least this many bytes of the key is masked."""
_LINE_BREAKS = re.compile(r"[\r\n]+")
_SEPARATORS = re.compile(r"(?:<[^<>]{0,64}>|[^0-9A-Za-z])+(?:(?<=\\)[xX](?=[0-9A-Fa-f])|0[xX](?=[0-9A-Fa-f]))?")
"""What the spaced view takes out: runs of markup tags and other characters than letters and digits, with a
``0x`` / ``\\x`` hex prefix after them."""
_NOT_ALNUM = re.compile(r"[^0-9A-Za-z]+")
WORD_SIZES = (2, 4, 8)
"""``od -tx2`` / ``-tx4`` / ``-tx8`` print words of this many bytes, little-endian: each word's bytes reversed."""


@lru_cache(maxsize=64)
def spaced_forms(secret: str) -> tuple[tuple[str, int], ...]:
    """``(form, shortest masked run)`` searched in the spaced view: hex (lower and upper) and the key's letters
    and digits."""
    raw = secret.encode("utf-8", "surrogatepass")
    hex_run = 2 * FRAGMENT_BYTES
    forms = [(raw.hex(), hex_run), (raw.hex().upper(), hex_run)]
    for word in WORD_SIZES:  # ``od -x``: the bytes of each 2-, 4- or 8-byte word in reverse order
        for start in range(word):
            whole = range(start, len(raw) - word + 1, word)
            swapped = "".join(raw[index : index + word][::-1].hex() for index in whole)
            if len(swapped) >= hex_run:
                forms.append((swapped, hex_run))
    letters = spaced_letters(secret)
    if len(letters) >= FRAGMENT_BYTES:
        forms.append((letters, FRAGMENT_BYTES))
    # Decimal bytes (``list(key.encode())``, ``' '.join(str(b) ...)``, ``&#115;&#107;``): their digits run
    # together in the view; a run of ``DECIMAL_RUN`` digits stands for at least 10 bytes (2-3 digits each).
    decimal = "".join(str(byte) for byte in raw)
    if len(decimal) >= DECIMAL_RUN:
        forms.append((decimal, DECIMAL_RUN))
    # ``\u0073\u006b`` (JSON, ``ascii()``) and ``&#x73;&#x6b;``: the view keeps the ``u`` / ``x`` and the digits.
    if secret.isascii():
        for prefix, width in (("u", 4), ("x", 2)):
            for case in (str.lower, str.upper):
                escaped = "".join(prefix + case(format(ord(char), f"0{width}x")) for char in secret)
                if len(escaped) >= (width + 1) * FRAGMENT_BYTES:
                    forms.append((escaped, (width + 1) * FRAGMENT_BYTES))
    return tuple(forms)


DECIMAL_RUN = 30
"""Digits of a decimal byte run masked (30 digits: at least 10 bytes of the key)."""


@lru_cache(maxsize=64)
def spaced_letters(secret: str) -> str:
    """The key's letters and digits: its form in the spaced view."""
    return _NOT_ALNUM.sub("", secret)


class SpacedView:
    """The text with every separator taken out (``text``), and the way back to the text's positions."""

    def __init__(self, text: str) -> None:
        pieces: list[str] = []
        self.view_starts: list[int] = []
        self.text_starts: list[int] = []
        kept = length = 0
        for match in _SEPARATORS.finditer(text):
            if match.start() > kept:
                self.view_starts.append(length)
                self.text_starts.append(kept)
                pieces.append(text[kept : match.start()])
                length += match.start() - kept
            kept = match.end()
        if kept < len(text):
            self.view_starts.append(length)
            self.text_starts.append(kept)
            pieces.append(text[kept:])
        self.text = "".join(pieces)

    def position(self, index: int) -> int:
        """Where the view's character ``index`` is in the text."""
        piece = bisect_right(self.view_starts, index) - 1
        return self.text_starts[piece] + index - self.view_starts[piece]

    def spans(self, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """The view's ``(start, end)`` spans as spans of the text (what lies between their characters included)."""
        return [(self.position(start), self.position(end - 1) + 1) for start, end in spans]


@lru_cache(maxsize=64)
def encoded_forms(secret: str) -> tuple[tuple[str, int], ...]:
    """``(form, shortest masked run)`` for each encoded spelling of ``secret``."""
    raw = secret.encode("utf-8", "surrogatepass")
    hex_run = 2 * FRAGMENT_BYTES
    forms: list[tuple[str, int]] = [(raw.hex(), hex_run), (raw.hex().upper(), hex_run)]
    b64_run = -(-FRAGMENT_BYTES * 4 // 3)
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        first = -(-shift * 8 // 6)  # characters holding bits of the padding before the key
        last = (shift + len(raw)) * 8 // 6  # characters holding only bits of the key (none after it)
        form = encoded[first:last]
        if len(form) >= b64_run:
            forms.append((form, b64_run))
            urlsafe = form.replace("+", "-").replace("/", "_")
            if urlsafe != form:
                forms.append((urlsafe, b64_run))
    return tuple(forms)


def windows(form: str, shortest: int) -> list[tuple[int, str]]:
    """``(offset, window)``: the pieces of ``form`` one of which every run of ``shortest`` characters of it holds
    whole (``shortest // 2`` characters, at each multiple of the stride that guarantees it)."""
    window_size = max(1, shortest // 2)
    stride = shortest - window_size + 1
    return [(offset, form[offset : offset + window_size]) for offset in range(0, len(form) - window_size + 1, stride)]


@lru_cache(maxsize=16)
def any_window(secrets: tuple[str, ...], shortest_plain: int) -> re.Pattern[str]:
    """Matches where any run ``runs_of`` can report for ``secrets`` (any form) must be: a cheap first test."""
    pieces = {window for secret in secrets for _, window in windows(secret, shortest_plain)}
    pieces |= {window for secret in secrets for form, run in encoded_forms(secret) for _, window in windows(form, run)}
    pieces |= {window for secret in secrets for form, run in spaced_forms(secret) for _, window in windows(form, run)}
    return re.compile(_trie_pattern(pieces))


def _trie_pattern(pieces: set[str]) -> str:
    """A regular expression that finds a match wherever one of ``pieces`` occurs, their common beginnings
    merged: at each position the search follows one branch per character instead of trying every piece
    (a flat alternation of hundreds of pieces searched 0.15 s a MB, and a turn masks a 5 MB argument for
    each of its outputs). Where a piece ends the branch ends (a longer piece holds it). Recursion is bounded
    by the length of a window of a key."""
    trie: dict[str, Any] = {}
    for piece in pieces:
        node = trie
        for char in piece:
            node = node.setdefault(char, {})
        node[""] = {}

    def branch(node: dict[str, Any]) -> str:
        if "" in node:
            return ""
        parts = [re.escape(char) + branch(child) for char, child in sorted(node.items())]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"

    return branch(trie)


_XXD_LINE = re.compile(r"^[0-9a-fA-F]{7,16}: ([0-9a-fA-F]{2}(?:[0-9a-fA-F ]*[0-9a-fA-F])?)  +(.*)$", re.MULTILINE)
"""A line of an ``xxd`` dump: its offset, its hex column and its text column (``xxd -c4`` puts 4 bytes a line:
each column alone holds no run of the key)."""


class ColumnsView:
    """An ``xxd`` dump's hex columns joined (``hex``, spaces taken out) and its text columns joined
    (``letters``), each with the way back to the text's positions."""

    def __init__(self, text: str) -> None:
        self.hex: list[tuple[int, str]] = []
        self.letters: list[tuple[int, str]] = []
        for match in _XXD_LINE.finditer(text):
            start = match.start(1)
            for piece in re.finditer(r"[0-9a-fA-F]+", match.group(1)):
                self.hex.append((start + piece.start(), piece.group()))
            self.letters.append((match.start(2), match.group(2)))

    @staticmethod
    def joined(pieces: list[tuple[int, str]]) -> tuple[str, list[int], list[int]]:
        """The pieces' text joined, where each piece starts in it, and where each starts in the text."""
        view_starts: list[int] = []
        length = 0
        for _, piece in pieces:
            view_starts.append(length)
            length += len(piece)
        return "".join(piece for _, piece in pieces), view_starts, [start for start, _ in pieces]

    @staticmethod
    def position(index: int, view_starts: list[int], text_starts: list[int]) -> int:
        piece = bisect_right(view_starts, index) - 1
        return text_starts[piece] + index - view_starts[piece]

    def spans(self, secrets: Sequence[str], shortest_plain: int) -> list[tuple[int, int]]:
        """Spans of the text holding a run of a key in the hex or the text columns."""
        found: list[tuple[int, int]] = []
        for pieces, forms in (
            (self.hex, lambda secret: [(form, run) for form, run in spaced_forms(secret)[:2]]),
            (self.letters, lambda secret: [(secret, shortest_plain)]),
        ):
            if not pieces:
                continue
            view, view_starts, text_starts = self.joined(pieces)
            for secret in secrets:
                for form, run in forms(secret):
                    found += [
                        (
                            self.position(start, view_starts, text_starts),
                            self.position(end - 1, view_starts, text_starts) + 1,
                        )
                        for start, end in runs_of(view, form, run)
                    ]
        return found


def may_hold(text: str, secrets: Sequence[str], shortest_plain: int) -> bool:
    """Whether ``text`` may hold a run of a key in any form (also split over lines); ``False`` is certain."""
    if not secrets or not text:
        return False
    joined = _LINE_BREAKS.sub("", text) if ("\n" in text or "\r" in text) else text
    pattern = any_window(tuple(secrets), shortest_plain)
    if pattern.search(joined) is not None:
        return True
    spaced = spaced_text(text)
    if spaced != joined and pattern.search(spaced) is not None:  # the same text needs no second search
        return True
    return _XXD_LINE.search(text) is not None and bool(ColumnsView(text).spans(secrets, shortest_plain))


_NOT_ALNUM_ASCII = {code: None for code in range(128) if not chr(code).isalnum()}
_TAGS = re.compile(r"<[^<>]{0,64}>")


def spaced_text(text: str) -> str:
    """``SpacedView(text).text``, the quick way for ASCII text without a hex prefix (``0x``, ``\\x``): markup
    tags and characters other than letters and digits deleted in one pass each."""
    if not text.isascii() or "0x" in text or "0X" in text or "\\x" in text or "\\X" in text:
        return SpacedView(text).text
    return (_TAGS.sub("", text) if "<" in text else text).translate(_NOT_ALNUM_ASCII)


def runs_of(text: str, form: str, shortest: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of at least ``shortest`` characters of ``form`` in ``text``.

    Such a run holds a whole window of ``form`` (``windows``): only those are searched, and each hit grown
    to the run around it."""
    window_size = max(1, shortest // 2)
    spans: list[tuple[int, int]] = []
    for offset, window in windows(form, shortest):
        position = text.find(window)
        while position >= 0:
            start, first = position, offset
            while start > 0 and first > 0 and text[start - 1] == form[first - 1]:
                start, first = start - 1, first - 1
            end, last = position + window_size, offset + window_size
            while end < len(text) and last < len(form) and text[end] == form[last]:
                end, last = end + 1, last + 1
            if end - start >= shortest:
                spans.append((start, end))
            position = text.find(window, position + 1)
    return spans


def other_forms_masked(text: str, secrets: Sequence[str], shortest_plain: int) -> str:
    """``text`` with each encoded form of each of ``secrets`` (and each form split over lines, the key's own
    text too, a run of at least ``shortest_plain`` characters) replaced by ``***``."""
    if not secrets or not text:
        return text
    joined = _LINE_BREAKS.sub("", text)
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        forms = encoded_forms(secret)
        if len(joined) != len(text):
            forms = ((secret, shortest_plain), *forms)
        for form, shortest in forms:
            spans += runs_of(joined, form, shortest)
    if len(joined) != len(text):
        where = [index for index, char in enumerate(text) if char not in "\r\n"]  # joined index → text index
        spans = [(where[start], where[end - 1] + 1) for start, end in spans]
    view = SpacedView(text)
    if len(view.text) != len(text):
        found = [
            span for secret in secrets for form, run in spaced_forms(secret) for span in runs_of(view.text, form, run)
        ]
        spans += view.spans(found)
    if _XXD_LINE.search(text) is not None:
        spans += ColumnsView(text).spans(secrets, shortest_plain)
    if not spans:
        return text
    return replaced(text, merged(spans), "***")


def merged(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` in order, overlapping and touching ones merged."""
    result: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if result and start <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return result


def replaced(text: str, spans: Sequence[tuple[int, int]], mask: str) -> str:
    """``text`` with each of ``spans`` (in order, not overlapping: ``merged``'s) replaced by ``mask``, built
    once (a copy of the text per span would cost the square of the spans on a text full of key fragments)."""
    if not spans:
        return text
    pieces: list[str] = []
    kept = 0
    for start, end in spans:
        pieces += (text[kept:start], mask)
        kept = end
    pieces.append(text[kept:])
    return "".join(pieces)


__all__ = [
    "FRAGMENT_BYTES",
    "ColumnsView",
    "SpacedView",
    "encoded_forms",
    "spaced_forms",
    "spaced_letters",
    "may_hold",
    "merged",
    "other_forms_masked",
    "replaced",
    "runs_of",
]
