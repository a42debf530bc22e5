"""Best-effort parsing of streamed (incomplete) JSON tool-call arguments.

Providers stream a tool call's arguments as many small text deltas and the
agent previews the parsed arguments after every delta.  Re-parsing the whole
buffer per delta is O(n^2) per tool call: seconds for a 400 KB file write.

``parse_streaming_json(text)``
    Stateless best-effort value of a JSON prefix; never raises.  pydantic_core's
    partial parser is the fast path; whenever it rejects the text (e.g. lone
    surrogates, which Rust strings cannot hold) the incremental parser below
    gives the answer.

``IncrementalJSONParser``
    A resumable tokenizer for one streamed argument.  ``feed()`` only queues a
    delta; the next ``snapshot()``/``finish()`` tokenizes the queued text once.
    State kept between calls: an explicit stack of open containers (no
    recursion) with the pending key of each object, the token state, the
    decoded pieces of the string being read, the text of a partial number or
    literal, and the unconsumed tail of an incomplete escape (including a high
    surrogate waiting for its low half).

Why it is linear:

* The tree is built live: an opened ``{``/``[`` is inserted into its parent at
  once and values are stored as they complete, so a snapshot never rebuilds or
  copies anything.  ``snapshot()`` and ``finish()`` return this live structure;
  treat it as read-only (it keeps changing while the stream goes on; deep-copy
  it to keep a frozen view).
* A string is scanned with one regex call per delta and decoded by the C JSON
  decoder only when the piece holds an escape.  Pieces are buffered and added
  to the string in the tree on snapshot.  The string is first detached from the
  tree so a local variable holds the only reference; CPython then grows it in
  place (``str +=`` on a unique local reference reallocates instead of
  copying), so a snapshot costs O(new data), not O(string length).  A caller
  that keeps a reference to the string itself forces a copy: still correct,
  but quadratic (see benchmarks/stream_args.py for the numbers).
* Numbers and literals are assumed short; a huge number costs O(its length)
  per delta.

Partial values follow pydantic_core's ``allow_partial='trailing-strings'`` so
both entry points agree on every prefix: unfinished strings are kept (minus a
trailing incomplete escape or unpaired high surrogate); unfinished keys, keys
without a value and unfinished literals are dropped; a trailing number is shown
only while its text is a valid number (``12`` yes; ``12.``, ``1e``, ``-`` no).
A top-level value that is not an object gives ``{}``.

Validation is RFC 8259 JSON (``json.loads`` minus NaN/Infinity) with pi's
repair of what models write inside strings, so the call is not lost:

* a raw control character (a literal newline or tab, which local models and
  some hosted ones emit) is kept as that character;
* an invalid escape (``"C:\\Users\\x"``, a ``\\u`` without four hex digits)
  keeps its backslash as text: ``C:\\Users\\x``.

The same rule holds for the live preview and for ``finish()``.  Anything else invalid
freezes the parser: snapshots keep the value of the longest valid prefix and
``finish()`` raises ``JSONDecodeError``.

Why hand-written: no library parses a growing buffer incrementally (pydantic_core and jiter re-parse
the whole prefix, which is what ``benchmarks/stream_args.py`` measures as its baseline: that benchmark
fails, by more than 50x, without this parser).

The module is a little over 400 lines: an explicit-stack state machine needs a
branch per token state, and the error paths keep snapshots consistent.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic_core import from_json

__all__ = ["IncrementalJSONParser", "parse_streaming_json"]

Container = dict[str, Any] | list[Any]

# Longest run of string content made of complete units.  A high-surrogate
# escape is only consumed once we can see what follows it, so a surrogate pair
# split across deltas is decoded as one character, exactly like json.loads.
_STRING_BODY = re.compile(
    r'(?:[^"\\]+'
    r'|\\(?:["\\/bfnrt]'
    r"|u(?![dD][89abAB])[0-9a-fA-F]{4}"
    r"|u[dD][89abAB][0-9a-fA-F]{2}(?=[^\\]|\\[^u]|\\u[0-9a-fA-F]{4})))*"
)
# What may legitimately be left over at the end of a buffer inside a string.
_PARTIAL_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?|\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\(?:u[0-9a-fA-F]{0,3})?)?")
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NUMBER_CHARS = re.compile(r"[-+0-9.eE]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
# Valid beginnings of a number; the longest alternative comes first so that
# .match() also finds the longest valid prefix of an invalid token.
_NUMBER_PREFIX = re.compile(r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]+[eE][-+]?[0-9]*|\.[0-9]*|[eE][-+]?[0-9]*)?)?")


def _run_end(pattern: re.Pattern[str], text: str, start: int = 0) -> int:
    """Where the run of ``pattern`` at ``start`` ends (these patterns match the empty string, so they always match)."""
    found = pattern.match(text, start)
    return found.end() if found is not None else start


_LITERALS: dict[str, tuple[str, Any]] = {
    "t": ("true", True),
    "f": ("false", False),
    "n": ("null", None),
}
_JSON_DECODER = json.JSONDecoder(strict=False)  # strict=False: raw control characters are kept

# Tokenizer states.  Plain ints: they are compared in the hot loop.
_ROOT = 0  # nothing but whitespace so far
_VALUE = 1  # after ':' or ',' in an array: a value must follow
_VALUE_OR_CLOSE = 2  # just after '['
_KEY = 3  # after ',' in an object: a key must follow
_KEY_OR_CLOSE = 4  # just after '{'
_COLON = 5  # after a key
_AFTER_VALUE = 6  # after a value inside a container: ',' or a closing bracket
_STRING = 7  # inside a string (key or value)
_NUMBER_TOKEN = 8  # inside a number; it only ends at a delimiter
_LITERAL = 9  # inside true/false/null
_END = 10  # top-level object closed; only whitespace may follow
_FAILED = 11  # invalid JSON seen; the parser is frozen


def _decode_string_piece(raw: str) -> str:
    """Decode one run of complete string content (escapes included)."""
    if "\\" not in raw:
        return raw
    # The C decoder handles every escape and surrogate pair; the run holds no
    # bare quote, so wrapping it in quotes yields a valid JSON string.
    decoded: str = _JSON_DECODER.raw_decode('"' + raw + '"')[0]
    return decoded


class IncrementalJSONParser:
    """Assemble one streamed JSON object; see the module docstring for costs."""

    __slots__ = (
        "_carry",
        "_chunks",
        "_containers",
        "_error",
        "_keys",
        "_literal_text",
        "_literal_value",
        "_number_shown",
        "_root",
        "_scalar",
        "_scanned_chars",
        "_slot_filled",
        "_state",
        "_string_is_key",
        "_string_pieces",
        "_unscanned",
    )

    def __init__(self) -> None:
        self._chunks: list[str] = []  # every delta, joined lazily for .text
        self._unscanned: list[str] = []  # deltas not tokenized yet
        self._scanned_chars = 0  # absolute offset just past the tokenized text
        self._carry = ""  # unconsumed tail of an incomplete string escape
        self._state = _ROOT
        self._root: dict[str, Any] = {}
        self._containers: list[Container] = []  # open containers, innermost last
        self._keys: list[str | None] = []  # pending key per open container
        self._string_is_key = False
        self._string_pieces: list[str] = []  # decoded, not yet in the tree
        self._scalar = ""  # text of the number or literal being read
        self._literal_text = ""  # the literal being read: true, false or null
        self._literal_value: Any = None
        # Whether the in-progress scalar already occupies its slot in the
        # innermost container (a list slot is appended, later overwritten).
        self._slot_filled = False
        self._number_shown = ""  # number text whose value is in the tree
        self._error: tuple[str, int] | None = None  # message and offset

    # ------------------------------------------------------------------ API

    def feed(self, delta: str) -> None:
        """Queue a delta; it is tokenized by the next snapshot()/finish()."""
        if delta:
            self._chunks.append(delta)
            self._unscanned.append(delta)

    @property
    def text(self) -> str:
        """The whole buffer fed so far."""
        if len(self._chunks) > 1:
            # Compact so repeated reads are free and later joins stay linear.
            self._chunks[:] = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    def snapshot(self) -> dict[str, Any]:
        """Best-effort value of the buffer, like parse_streaming_json(text).

        Returns the parser's live tree: do not mutate it, and copy it if you
        need it to stop changing.  Frozen at the longest valid prefix once the
        stream turns invalid.
        """
        if self._unscanned:
            self._advance()
        if self._state == _STRING:
            if not self._string_is_key:
                self._flush_string()
        elif self._state == _NUMBER_TOKEN:
            self._show_partial_number()
        return self._root

    def finish(self) -> dict[str, Any]:
        """Strictly parse the whole buffer; an empty buffer gives ``{}``.

        Raises json.JSONDecodeError (a ValueError) if the buffer is not one
        complete JSON object.  Returns the same live tree as snapshot().
        """
        if self._unscanned:
            self._advance()
        if self._state == _END:
            return self._root
        if self._state == _ROOT:  # empty or whitespace only: no arguments
            return {}
        if self._error is not None:
            message, position = self._error
        elif self._state == _STRING:
            message, position = "Unterminated string", self._scanned_chars
        else:
            message, position = "Unexpected end of JSON input", self._scanned_chars
        raise json.JSONDecodeError(message, self.text, position)

    # ------------------------------------------------------------ tokenizer

    def _advance(self) -> None:
        unscanned = self._unscanned
        new_text = unscanned[0] if len(unscanned) == 1 else "".join(unscanned)
        unscanned.clear()
        if self._state == _FAILED:
            return
        carry = self._carry
        self._carry = ""
        base = self._scanned_chars - len(carry)
        self._scanned_chars += len(new_text)
        self._scan(carry + new_text if carry else new_text, base)

    def _scan(self, buf: str, base: int) -> None:
        """Tokenize ``buf``, which starts at absolute offset ``base``."""
        state = self._state
        if state == _STRING and '"' not in buf and "\\" not in buf:
            # The usual delta: more of a long string, with no quote or escape in it. All of it is
            # content, as the loop below would find, without the pattern match and the calls.
            self._string_pieces.append(buf)
            return
        i = 0
        end = len(buf)
        while i < end:
            if state == _STRING:
                run_end = _run_end(_STRING_BODY, buf, i)
                if run_end != i:
                    self._string_pieces.append(_decode_string_piece(buf[i:run_end]))
                    i = run_end
                    if i == end:
                        break
                char = buf[i]
                if char == '"':
                    i += 1
                    state = self._end_string()
                elif _PARTIAL_ESCAPE.fullmatch(buf, i):
                    self._carry = buf[i:]  # finish the escape with the next delta
                    break
                else:
                    # An escape the body pattern left alone (pi's repair, see the module doc): a
                    # complete \uXXXX whose surrogate pair is broken decodes alone, as in
                    # json.loads; any other backslash is kept as text.
                    lone = _UNICODE_ESCAPE.match(buf, i)
                    if lone is not None:
                        self._string_pieces.append(chr(int(lone.group(1), 16)))
                        i = lone.end()
                    else:
                        self._string_pieces.append("\\")
                        i += 1
                continue

            if state == _NUMBER_TOKEN:
                run_end = _run_end(_NUMBER_CHARS, buf, i)
                self._scalar += buf[i:run_end]
                i = run_end
                if not _NUMBER_PREFIX.fullmatch(self._scalar):
                    # Show the longest valid prefix, e.g. "1" of "1-2".
                    valid = _run_end(_NUMBER_PREFIX, self._scalar)
                    self._scalar = self._scalar[:valid]
                    self._show_partial_number()
                    state = self._fail("Invalid number", base + i)
                    break
                if i == end:
                    break  # the number may continue in the next delta
                state = self._end_number(base + i)
                if state == _FAILED:
                    break
                continue

            if state == _LITERAL:
                target = self._literal_text
                piece = buf[i : i + len(target) - len(self._scalar)]
                self._scalar += piece
                if not target.startswith(self._scalar):
                    state = self._fail("Expecting value", base + i)
                    break
                i += len(piece)
                if len(self._scalar) == len(target):
                    state = self._end_value(self._literal_value)
                continue

            char = buf[i]
            if char in " \t\n\r":
                i = _run_end(_WHITESPACE, buf, i)
                continue
            if state == _AFTER_VALUE:
                container = self._containers[-1]
                if char == ",":
                    state = _KEY if isinstance(container, dict) else _VALUE
                elif char == ("}" if isinstance(container, dict) else "]"):
                    state = self._close_container()
                else:
                    state = self._fail("Expecting ',' delimiter", base + i)
                    break
                i += 1
            elif state == _VALUE or state == _VALUE_OR_CLOSE:
                if char == "]" and state == _VALUE_OR_CLOSE:
                    state = self._close_container()
                    i += 1
                else:
                    state = self._start_value(char, base + i)
                    if state == _FAILED:
                        break
                    if state != _NUMBER_TOKEN:  # numbers re-read their 1st char
                        i += 1
            elif state == _KEY or state == _KEY_OR_CLOSE:
                if char == '"':
                    state = _STRING
                    self._string_is_key = True
                elif char == "}" and state == _KEY_OR_CLOSE:
                    state = self._close_container()
                else:
                    message = "Expecting property name enclosed in double quotes"
                    state = self._fail(message, base + i)
                    break
                i += 1
            elif state == _COLON:
                if char != ":":
                    state = self._fail("Expecting ':' delimiter", base + i)
                    break
                state = _VALUE
                i += 1
            elif state == _ROOT:
                if char != "{":
                    state = self._fail("Top-level JSON value is not an object", base + i)
                    break
                self._containers.append(self._root)
                self._keys.append(None)
                state = _KEY_OR_CLOSE
                i += 1
            else:  # _END
                state = self._fail("Extra data", base + i)
                break
        if state != _FAILED:
            self._state = state

    def _start_value(self, char: str, position: int) -> int:
        self._slot_filled = False
        if char == '"':
            self._string_is_key = False
            return _STRING
        if char == "-" or "0" <= char <= "9":
            self._scalar = ""
            self._number_shown = ""
            return _NUMBER_TOKEN
        if char in _LITERALS:
            self._scalar = char
            self._literal_text, self._literal_value = _LITERALS[char]
            return _LITERAL
        if char == "{" or char == "[":
            child: Container = {} if char == "{" else []
            self._store(child)
            self._containers.append(child)
            self._keys.append(None)
            return _KEY_OR_CLOSE if char == "{" else _VALUE_OR_CLOSE
        return self._fail("Expecting value", position)

    def _end_string(self) -> int:
        if self._string_is_key:
            self._keys[-1] = "".join(self._string_pieces)
            self._string_pieces.clear()
            return _COLON
        self._flush_string()
        self._slot_filled = False
        return _AFTER_VALUE

    def _end_number(self, position: int) -> int:
        text = self._scalar
        match = _NUMBER.fullmatch(text)
        try:
            if match is None:  # e.g. "1." or "-" followed by a delimiter
                raise ValueError(text)
            value: int | float = float(text) if match.lastindex else int(text)
        except ValueError:  # also: more digits than sys.get_int_max_str_digits()
            self._show_partial_number()  # hide a value shown for a shorter prefix
            return self._fail("Invalid number", position)
        return self._end_value(value)

    def _end_value(self, value: Any) -> int:
        self._store(value)
        self._slot_filled = False
        return _AFTER_VALUE

    def _close_container(self) -> int:
        self._containers.pop()
        self._keys.pop()
        return _AFTER_VALUE if self._containers else _END

    def _fail(self, message: str, position: int) -> int:
        """Freeze; the caller has already shown the longest valid prefix."""
        self._error = (message, position)
        self._state = _FAILED
        self._carry = ""
        return _FAILED

    # ------------------------------------------------------- tree updates

    def _store(self, value: Any) -> None:
        """Put ``value`` into the slot of the value being read."""
        container = self._containers[-1]
        if isinstance(container, dict):
            key = self._keys[-1]
            assert key is not None
            container[key] = value
        elif self._slot_filled:
            container[-1] = value
        else:
            container.append(value)
        self._slot_filled = True

    def _flush_string(self) -> None:
        """Append the buffered string pieces to the string in the tree."""
        pieces = self._string_pieces
        if not self._slot_filled:
            self._store("".join(pieces))
            pieces.clear()
            return
        if not pieces:
            return
        addition = pieces[0] if len(pieces) == 1 else "".join(pieces)
        pieces.clear()
        container = self._containers[-1]
        # Detach the string so this local holds the only reference: CPython
        # then extends it in place instead of copying the whole prefix.
        slot: Any = self._keys[-1] if isinstance(container, dict) else -1
        value: str = container[slot]
        container[slot] = None
        value += addition
        container[slot] = value

    def _show_partial_number(self) -> None:
        text = self._scalar
        if text == self._number_shown:
            return
        self._number_shown = text
        match = _NUMBER.fullmatch(text)
        if match is not None:
            try:
                self._store(float(text) if match.lastindex else int(text))
                return
            except ValueError:
                pass
        if self._slot_filled:  # e.g. "12" became "12.": hide it again
            container = self._containers[-1]
            if isinstance(container, dict):
                container.pop(self._keys[-1] or "", None)
            else:
                container.pop()
            self._slot_filled = False


def parse_streaming_json(text: str) -> dict[str, Any]:
    """Best-effort value of a (possibly incomplete) JSON object; never raises.

    ``'{"a":"hel'`` gives ``{"a": "hel"}``; empty text, garbage or a top-level
    value that is not an object give ``{}``.
    """
    try:
        return parse_prefix(text)
    except Exception:  # noqa: BLE001 - best effort by contract: a preview must never crash
        return {}


def parse_prefix(text: str) -> dict[str, Any]:
    """``parse_streaming_json`` without its last-resort guard.

    Separate so that tests can tell a prefix that parses from one that raised
    and was hidden by the guard.
    """
    if not text or text.isspace():
        return {}
    try:
        value = from_json(text, allow_partial="trailing-strings", allow_inf_nan=False)
    except (ValueError, TypeError):  # TypeError: raw lone surrogates in a str
        parser = IncrementalJSONParser()
        parser.feed(text)
        return parser.snapshot()
    return value if isinstance(value, dict) else {}
