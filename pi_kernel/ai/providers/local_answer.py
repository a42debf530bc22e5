"""The local model's text answer: seeded with a short tool result, ended at a sentence, not mid-line.

SmolLM2-135M reads a tool result and then often ignores it ("The word 'the' is a
punctuation mark" after ``word_count`` returned 9). So when the answer follows
tool results that are short, one line each (``SEED_MAX_CHARS``), the answer
starts with them, written by the provider, not sampled: ``word_count returned 9.``;
the model continues from there (``answer_seed``). A long result (a table, a
traceback) is not seeded: the model answers from the prompt alone.

The answer's token cap (``max_tokens``) used to cut it mid-word. ``SentenceCut``
holds back the text after the last clean end (a sentence's ``.``/``!``/``?``, a
line end, the closing fence of a code block) and, when the cap ends the
answer, drops that tail; an answer without any clean end is kept whole. Holding back costs the first
token's latency (a whole first sentence), so while the cap is more than ``HOLD_TOKENS`` tokens away the
text streams as it comes: only the last ``HOLD_TOKENS`` before the cap can be cut, and when the text
already sent runs past the last clean end (a sentence longer than that), the answer is kept whole.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from typing import Any

from pi_kernel.ai.messages import ToolResultMessage, text_of

SEED_MAX_CHARS = 200
"""A tool result longer than this (or of more than one line) is not copied into the answer."""
HOLD_TOKENS = 64
"""Text is held back for a clean end only within this many tokens of the cap (``shaped_answer``)."""
_SENTENCE_END = re.compile(r"[.!?](?=\s)")


def answer_seed(messages: Sequence[Any]) -> str:
    """The start of an answer that follows tool results: each short result, as its tool returned it
    (``""`` when the answer does not follow tool results, or one of them is long)."""
    results: list[ToolResultMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.insert(0, message)
    sentences: list[str] = []
    for result in results:
        text = " ".join(text_of(result.content).split()) if "\n" not in text_of(result.content).strip() else ""
        if not text or len(text) > SEED_MAX_CHARS:
            return ""
        verb = "failed:" if result.is_error else "returned"
        sentences.append(f"{result.tool_name} {verb} {text}{'' if text[-1] in '.!?' else '.'}")
    return " ".join(sentences)


def last_clean_end(text: str, at_end: bool) -> int:
    """The index after the last clean end of ``text`` (0: none); ``at_end``: the text ends there (a final
    ``.`` or an unterminated closing fence counts)."""
    last = 0
    in_code = False
    position = 0
    for line in text.splitlines(keepends=True):
        found, in_code = _line_clean_end(line, position, in_code, at_end)
        last = found if found is not None else last
        position += len(line)
    return last


def _line_clean_end(line: str, position: int, in_code: bool, at_end: bool) -> tuple[int | None, bool]:
    """The last clean end in ``line`` (which starts at ``position``; ``None``: none) and whether the text
    after it is inside a code fence."""
    complete = line.endswith("\n") or at_end
    body = line.rstrip("\n")
    last = None
    if body.strip().startswith("```"):
        in_code = not in_code
        if not in_code and complete:
            last = position + len(body)
    elif not in_code:
        for match in _SENTENCE_END.finditer(body):
            last = position + match.end()
        if line.endswith("\n") and body.strip():
            last = position + len(body)
        elif at_end and body.rstrip()[-1:] in (".", "!", "?"):
            last = position + len(body.rstrip())
    return last, in_code


_FENCE_START = re.compile(r"\s*```")
_LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
"""Where ``str.splitlines`` ends a line."""


class SentenceCut:
    """Streams an answer's text up to its last clean end; ``finish`` gives the rest, or drops it at the cap.

    ``feed`` scans only what is new: each finished line once, and the unfinished one from one character
    before the new piece (a sentence end needs the character after it). It finds what
    ``last_clean_end(text, at_end=False)`` finds."""

    def __init__(self) -> None:
        self.text = ""
        self.sent = 0
        self._line = 0  # where the unfinished line starts
        self._in_code = False  # whether that line starts inside a code fence
        self._clean = 0  # the last clean end found so far
        self._scanned = 0  # how far the unfinished line was scanned for sentence ends

    def feed(self, piece: str, hold: bool = True) -> str:
        """The text that can be sent now: up to the last clean end, or all of it when not ``hold``."""
        self.text += piece
        self._scan()
        end = self._clean if hold else len(self.text)
        if end <= self.sent:
            return ""
        out, self.sent = self.text[self.sent : end], end
        return out

    def _scan(self) -> None:
        text = self.text
        while (brk := _LINE_BREAK.search(text, self._line)) is not None:
            if brk.group() == "\r" and brk.end() == len(text):
                break  # may be the first half of "\r\n": the line is not finished yet
            found, self._in_code = _line_clean_end(text[self._line : brk.end()], self._line, self._in_code, False)
            self._clean = max(self._clean, found or 0)
            self._line = self._scanned = brk.end()
        if self._in_code or _FENCE_START.match(text, self._line):
            return  # a code line or a fence line, unfinished: no clean end in it yet
        for match in _SENTENCE_END.finditer(text, max(self._line, self._scanned - 1)):
            self._clean = max(self._clean, match.end())
        self._scanned = len(text)

    def finish(self, hit_limit: bool) -> str:
        """What is left to send: all of it, or, when the cap ended the answer, up to its last clean end
        (all of it when there is none, or the text already sent runs past it)."""
        end = len(self.text)
        if hit_limit:
            clean = last_clean_end(self.text, at_end=True)
            end = clean if clean > 0 and clean >= self.sent else end
        out = self.text[self.sent : end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return out


def shaped_answer(seed: str, pieces: Iterator[str], stats: Any, max_tokens: int | None = None) -> Iterator[str]:
    """The seed, then the model's pieces, sent up to their last clean end; at the end what ``finish`` gives
    (``stats.hit_limit`` is read once ``pieces`` is done). With ``max_tokens`` (the decode's cap; ``stats.tokens``
    counts the tokens sampled so far) pieces stream as they come while the cap is more than ``HOLD_TOKENS``
    away."""
    cut = SentenceCut()
    for piece in itertools.chain([seed] if seed else [], pieces):
        hold = max_tokens is None or max_tokens - len(stats.tokens) <= HOLD_TOKENS
        out = cut.feed(piece, hold)
        if out:
            yield out
    rest = cut.finish(bool(stats.hit_limit))
    if rest:
        yield rest
