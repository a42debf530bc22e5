"""Masking key values: one function, ``mask``, for text and JSON-like data.

Keys are never copied into settings or messages, but text from elsewhere can
still quote one (a provider error echoing the request, a tool printing the
environment). ``mask`` replaces the value of every key-like environment
variable (``is_secret_name``: the one list of secret names every surface uses), every long enough run of one, its hex
and base64 forms (below), credentials in URLs and ``sk-`` keys
with ``***``. It is called at the choke points: where text enters (a
provider's error message; every message entering the transcript, ``admit``:
a prompt, the notebook context, a tool's result) and where it leaves the kernel
(iopub and stdin messages: ``pi_kernel.kernel.outgoing``; saved sessions,
notebook metadata), plus the view model (``widgets.turn_state``), so that HTML
escaping, highlighting and cutting never see a key. Text cut to a length before it is
masked is cut by ``cut``, which never splits a key. Text that leaves in
pieces is masked by a ``MaskedStream``, which holds back a tail that may be the
start of a key in any of the forms below; ``unmask`` undoes the mask in arguments a person edited.

**A key in another spelling.** A command can print it otherwise
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
import os
import re
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from itertools import accumulate
from typing import Any, overload

from pi_kernel.ai.messages import (
    MAX_DEPTH,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
    clean_message,
    map_strings,
)
from pi_kernel.ai.secret_variables import (
    _TOKEN_VALUE,
    _URL_CREDENTIALS,
    KEY_VARIABLES,
    is_secret_name,
    is_secret_variable,
    url_password,
    without_secrets,
)

MIN_SECRET_CHARS = 8
"""Shorter values are not masked: replacing ``"1"`` everywhere would garble text and protect nothing."""
MASK = "***"


_fixed: ContextVar[list[str] | None] = ContextVar("pi_fixed_secret_values", default=None)
_added: set[str] = set()
_last: dict[int, tuple[Any, list[str]]] = {}
"""The last answer for ``os.environ``, with the environment it was read from (read again when it changed)."""


def add_secret_value(value: str | bytes) -> None:
    """Mask ``value`` from now on too: a secret held outside the environment (the kernel's HMAC key)."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if len(text) >= MIN_SECRET_CHARS:
        _added.add(text)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of secret variables currently set (``is_secret_variable``; of a URL, its password), longest
    first (so a key containing another is masked whole)."""
    if environ is None:
        fixed = _fixed.get()
        if fixed is not None:
            return fixed
    env = os.environ if environ is None else environ
    snapshot = (tuple(getattr(env, "_data", env).items()), len(_added) if environ is None else -1)
    cached = _last.get(id(env))
    if cached is not None and cached[0] == snapshot:  # the environment's own objects: compared by identity
        return list(cached[1])
    values: set[str] = set(_added) if environ is None else set()
    for name, value in list(env.items()):
        password = url_password(value)
        if password is not None:
            values.add(password)
        if is_secret_name(name) or _TOKEN_VALUE.search(value) is not None:
            values.add(value)
    found = sorted({value for value in values if len(value) >= MIN_SECRET_CHARS}, key=len, reverse=True)
    if environ is None:
        _last[id(env)] = (snapshot, found)
    return list(found)


@contextmanager
def secrets_read_once() -> Iterator[list[str]]:
    """Within the block, ``secret_values()`` answers from one reading of the environment.

    For work that masks thousands of strings at once (the static rendering of a turn of
    thousands of calls): each reading walks the whole environment.
    """
    values = secret_values()
    token = _fixed.set(values)
    try:
        yield values
    finally:
        _fixed.reset(token)


FRAGMENT_CHARS = 12
"""A run of at least this many characters of a key is masked too: text cut to a length (a preview, a
tool's rolling tail) may hold a key's first or last part only. Shorter runs are left: ``sk-proj-`` alone
is public, and a few characters of a key give nothing away."""

_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")
_UNFINISHED = re.compile(r"(?:\bs(?:k(?:-[A-Za-z0-9_-]*)?)?|/(?:/[^/\s]*)?)\Z")
"""The end of growing text that may still become an ``sk-`` key or URL credentials."""
_UNFINISHED_WINDOW = 512


@overload
def mask(value: str, secrets: Sequence[str] | None = None, *, partial: bool = False) -> str: ...
@overload
def mask(value: Any, secrets: Sequence[str] | None = None, *, partial: bool = False) -> Any: ...
def mask(value: Any, secrets: Sequence[str] | None = None, *, partial: bool = False) -> Any:
    """``value`` (text, or JSON-like data: every string and string mapping key inside) with secrets as ``***``.

    ``secrets``: the key values, if already read (``secret_values()`` otherwise, read once per call).
    ``partial``: the text is still growing (a streamed answer, arguments being written), so what may be the
    beginning of a secret at the end of each string is left out until it is whole (mapping keys are whole).
    Data is rebuilt iteratively (``messages.map_strings``, no recursion on its depth) within a bound far
    beyond what a transcript holds, so saved data is never cut; only a preview of arguments still streaming is.
    """
    known = secret_values() if secrets is None else secrets

    def strings(text: str) -> str:
        return _mask_text(text[: _unfinished_start(text, known)] if partial else text, known)

    if isinstance(value, str):
        return strings(value)
    return map_strings(value, strings, lambda key: _mask_text(key, known), max_depth=4 * MAX_DEPTH)


def admit(message: Any) -> Any:
    """``message`` as it enters the transcript, in place (returns it): made sendable and storable
    (``messages.clean_message``) and every key in the text it carries masked (``mask``): a user
    message's text (a prompt, the notebook context), an assistant's text and ``error_message`` (a provider's
    error quoting the request), a tool result's text. The one place keys are masked in the transcript, so no
    key reaches a provider other than its own, a saved session or a view from there. Thinking is kept as it
    came (a provider signs it and refuses it changed), and so are tool-call arguments (the call runs with
    them) and a tool result's ``details`` (never sent to the model; masked where they leave the kernel)."""
    clean_message(message)
    secrets = secret_values()  # read once for the whole message
    if isinstance(message, UserMessage) and isinstance(message.content, str):
        message.content = mask(message.content, secrets)
    elif isinstance(message, (UserMessage, AssistantMessage, ToolResultMessage)):
        for block in message.content:
            if isinstance(block, TextContent):
                block.text = mask(block.text, secrets)
    if isinstance(message, AssistantMessage) and message.error_message:
        message.error_message = mask(message.error_message, secrets)
    return message


LARGE_TEXT_CHARS = 65_536
"""Text at least this long is masked once per set of keys: the result is remembered (``LARGE_TEXT_KEPT``
of them), since the end of a turn masks the same 5 MB argument for the display, the saved metadata and
each outgoing message."""
LARGE_TEXT_KEPT = 4


def _mask_text(text: str, secrets: Sequence[str]) -> str:
    if len(text) < LARGE_TEXT_CHARS:
        return _KEY_LIKE.sub("sk-***", _mask_values_and_urls(text, secrets))
    return _mask_large(text, tuple(secrets))  # a str caches its hash; the same object compares equal at once


@lru_cache(maxsize=LARGE_TEXT_KEPT)  # thread-safe: masking runs on any thread
def _mask_large(text: str, secrets: tuple[str, ...]) -> str:
    return _KEY_LIKE.sub("sk-***", _mask_values_and_urls(text, secrets))


def _mask_values_and_urls(text: str, secrets: Sequence[str]) -> str:
    """Each key value, each ``FRAGMENT_CHARS``-long run of one, their other forms (below), and
    URL credentials replaced by ``***``."""
    if not may_hold(text, secrets, FRAGMENT_CHARS):  # the common case, in one regular expression search
        return _URL_CREDENTIALS.sub("//***@", text)
    for secret in secrets:
        text = text.replace(secret, MASK)
        text = replaced(text, merged(runs_of(text, secret, FRAGMENT_CHARS)), MASK)
    return _URL_CREDENTIALS.sub("//***@", other_forms_masked(text, secrets, FRAGMENT_CHARS))


def _unfinished_start(text: str, secrets: Sequence[str]) -> int:
    """Where the end of ``text`` may be part of something ``mask`` hides (``len(text)`` if nowhere).

    Text that is still growing (a streamed answer, arguments being written) is
    shown up to this point only: the rest waits until it either completes a
    secret or a run of one (and is masked whole) or stops looking like one.
    The end held back is the longest one that is a piece of a key or of one of
    its other forms (a rolling tail may start in the middle of one), so it is
    never longer than the longest form (``_encoded_unfinished_start``).
    """
    start = len(text)
    for secret in secrets:
        for size in range(min(len(text), len(secret)), 0, -1):
            if len(text) - size < start and text[len(text) - size :] in secret:
                start = len(text) - size
                break
    start = min(start, _spaced_unfinished_start(text, secrets), _encoded_unfinished_start(text, secrets))
    for secret in secrets:
        # A finished run of the key may end inside the held end (its last characters also begin another
        # reading of the key): cut after the run, so it is masked whole rather than shown in two parts.
        for run_start, run_end in merged(runs_of(text, secret, FRAGMENT_CHARS)):
            if run_start < start < run_end:
                start = run_end
    window = max(0, len(text) - _UNFINISHED_WINDOW)
    for key in _KEY_LIKE.finditer(text, window):  # nor an ``sk-`` key the held end starts inside
        if key.start() < start < key.end():
            start = key.start()
    match = _UNFINISHED.search(text, window)
    if match is not None:
        start = min(start, match.start())
    return start


def cut(text: str, limit: int, secrets: Sequence[str] | None = None) -> str:
    """The first ``limit`` characters of ``text``, less an end that may be part of something ``mask`` hides
    (``_unfinished_start``; ``secrets``: the key values, if already read). Text cut so never splits a key: the
    mask it gets where it enters (a tool's result, the notebook context) finds every key in it whole."""
    if len(text) <= limit:
        return text
    head = text[: max(0, limit)]
    return head[: _unfinished_start(head, secret_values() if secrets is None else secrets)]


def _spaced_unfinished_start(text: str, secrets: Sequence[str]) -> int:
    """Where the end of ``text`` may begin a key written with separators between its letters (markup tags:
    ``sk-proj-ab<b></b>cd``), read in the spaced view (``SpacedView``) of its last part."""
    letters = [spaced_letters(secret) for secret in secrets]
    longest = max((len(form) for form in letters), default=0)
    if not longest or not text:
        return len(text)
    offset = max(0, len(text) - 4 * longest - 256)
    if "<" not in text[offset:]:
        return len(text)  # no markup: the plain reading (``_unfinished_start``) says all there is
    view = SpacedView(text[offset:])
    for size in range(min(len(view.text), longest), 0, -1):
        tail = view.text[len(view.text) - size :]
        if any(tail in form for form in letters):
            start = offset + view.position(len(view.text) - size)
            return start if "<" in text[start:] else len(text)
    return len(text)


_PARTIAL_ESCAPE = re.compile(r"(?:<[^<>]*|\\(?:[xu][0-9a-fA-F]{0,3})?|&(?:#x?[0-9a-fA-F]{0,2})?|%[0-9a-fA-F]?)\Z")
"""An escape or markup tag begun at the very end (``\\x``, ``&#``, ``%7``, ``<b></``): the next byte's
separator, not yet a letter of the form."""
_ESCAPE_START = re.compile(r"[\\&#%<]")
"""A separator that begins the next byte of an escaped form (``\\x73``, ``&#115;``, ``%73``, a markup tag)."""


@lru_cache(maxsize=16)
def _stream_forms(secrets: tuple[str, ...]) -> tuple[tuple[tuple[str, int], ...], str, re.Pattern[str] | None]:
    """Every form of ``secrets`` as the spaced view (``SpacedView``) reads it, with its shortest masked run
    (the spaced forms, and the encoded forms less what the view takes out: base64's ``+`` / ``/``), longest
    first; all of them joined by ``\\0`` (never in the view: a piece of the view is a piece of a form when it
    is one of this text); and a pattern matching where a run of one must be (``any_window``'s test)."""
    runs: dict[str, int] = {}
    for secret in secrets:
        for form, run in spaced_forms(secret):
            runs[form] = min(run, runs.get(form, run))
        for form, run in encoded_forms(secret):
            letters = spaced_letters(form)
            if letters:
                runs[letters] = min(run, runs.get(letters, run))
    forms = tuple(sorted(runs.items(), key=lambda item: len(item[0]), reverse=True))
    pieces = {window for form, run in forms for _, window in windows(form, run)}
    return forms, "\0".join(form for form, _ in forms), (re.compile(_trie_pattern(pieces)) if pieces else None)


def _encoded_unfinished_start(text: str, secrets: Sequence[str]) -> int:
    """Where the end of ``text`` may begin (or be the middle of) a key in another spelling (hex, base64,
    decimal bytes, escapes, its letters with anything between them: the forms ``mask`` finds), read in the
    spaced view of its last part (``mask`` finds them there and in the text with its line breaks taken out,
    which the spaced view also takes out). A word that ended (a separator after it, not one that begins an
    escape) is not held, nor a line that ended (output printed line by line goes out line by line): only a
    form spelled out with separators goes on after one.

    The held end is the longest one that is a piece of a form, found by growing it one character of the view
    at a time (an end that is a piece of a form stays one when shortened): a few comparisons for text that
    holds no key, at most the length of the longest form otherwise."""
    if not secrets or not text:
        return len(text)
    partial = _PARTIAL_ESCAPE.search(text)
    if partial is not None and partial.start() > 0:  # judged without it: read as a letter it breaks the form
        inner = _encoded_unfinished_start(text[: partial.start()], secrets)
        if inner < partial.start():
            return inner
    forms, joined, any_run = _stream_forms(tuple(secrets))
    longest = len(forms[0][0]) if forms else 0
    if not longest:
        return len(text)
    offset = max(0, len(text) - 4 * longest - 256)
    view = SpacedView(text[offset:])
    spaced = view.text
    held, most = 0, min(len(spaced), longest)
    while held < most and spaced[len(spaced) - held - 1 :] in joined:
        held += 1
    if not held:
        return len(text)
    cut = len(spaced) - held
    first, last = offset + view.position(cut), offset + view.position(len(spaced) - 1) + 1
    lone = held <= 3 and (first == 0 or not text[first - 1].isalnum())  # a piece of a form sent letter by letter
    ended = last - first == held and not _ESCAPE_START.search(text, last) and not lone
    if last < len(text) and ("\n" in text[last:] or ended):
        return len(text)  # a line or a word that ended, not a form spelled out with separators
    # A finished run of a form may end inside the held end (as in ``_unfinished_start``): cut after the run,
    # so it is masked whole rather than shown in two parts.
    region_start = max(0, cut - longest)
    region = spaced[region_start:]
    bridge = spaced[cut - 1 : cut + 1]  # what a run across the cut holds: only forms holding it are searched
    if cut and any_run is not None and any_run.search(region) is not None:
        for form, run in forms:
            if bridge not in form:
                continue
            for run_start, run_end in runs_of(region, form, run):
                if region_start + run_start < cut < region_start + run_end:
                    cut = region_start + run_end
    return offset + view.position(cut) if cut < len(spaced) else len(text)


class MaskedStream:
    """``mask`` for text sent in pieces: a secret split across two pieces is still masked.

    ``feed`` returns what is safe to send now and holds back a tail that may
    be the start of a secret in any form ``mask`` finds (at most the longest
    form's length and the separators within it, or the last
    ``_UNFINISHED_WINDOW`` characters while an ``sk-`` run or URL grows);
    ``flush`` returns the held-back rest once the text is complete. Costs the
    size of each piece plus that tail, not the size of the whole text.
    """

    def __init__(self, secrets: Sequence[str] | None = None) -> None:
        self._fixed = secrets is not None
        self.secrets: Sequence[str] = secret_values() if secrets is None else secrets
        """The values masked: those given, else the environment's, read again at each piece (a key loaded
        while the stream runs, ``load_dotenv()`` in a tool, is masked from then on; an unchanged environment
        is one comparison, ``secret_values``)."""
        self._pending = ""
        self._sent_tail = ""

    def _refresh(self) -> None:
        if not self._fixed:
            self.secrets = secret_values()

    def feed(self, text: str) -> str:
        self._refresh()
        # The cut comes first, in the raw text: what may begin a key waits
        # whole (masking it now would show its rest, later, as plain text). A
        # key that straddles the cut cannot escape either: its part before the
        # cut is a run of the key, masked once it is ``FRAGMENT_CHARS`` long.
        pending = self._pending + text
        cut = _unfinished_start(pending, self.secrets)
        self._pending = pending[cut:]
        return self._mask_keys(_mask_values_and_urls(pending[:cut], self.secrets))

    def _mask_keys(self, text: str) -> str:
        # The pattern starts at a word boundary: the two characters sent before
        # tell whether this text starts one (no match can begin inside them, as
        # a word-initial "s" is always held back).
        context = self._sent_tail
        masked = _KEY_LIKE.sub("sk-***", context + text)[len(context) :]
        self._sent_tail = (context + masked)[-2:]
        return masked

    def flush(self) -> str:
        """The held-back tail (it did not become a secret), masked; the stream starts afresh."""
        self._refresh()
        pending, self._pending = self._pending, ""
        masked = self._mask_keys(_mask_values_and_urls(pending, self.secrets))
        self._sent_tail = ""
        return masked

    def reset(self) -> None:
        """Forget the held-back tail (what was shown is being cleared)."""
        self._pending = self._sent_tail = ""


def unmask(edited: Any, original: Any, secrets: Sequence[str] | None = None) -> Any:
    """``edited`` (arguments a person edited from their masked form) with what the mask hid put back.

    A value still equal to the masked form of the original's is the original; in a string the person
    changed elsewhere, each ``***`` is the piece it hid, in order, when the edit kept every one of them
    (the key in a ``curl -H`` of a command whose URL was changed). An approval never sends the mask on.
    """
    known = secret_values() if secrets is None else secrets
    if isinstance(edited, str) and isinstance(original, str):
        shown = mask(original, known)
        if edited == shown or shown == original:
            return original if edited == shown else edited
        hidden = _hidden_pieces(shown, original)
        if hidden is not None and edited.count(MASK) == len(hidden) and MASK not in original:
            parts = edited.split(MASK)
            return "".join(part + (hidden[index] if index < len(hidden) else "") for index, part in enumerate(parts))
        return edited
    if isinstance(edited, dict) and isinstance(original, dict):
        keys = {mask(key, known): key for key in original if isinstance(key, str)}  # shown masked → original
        restored = {}
        for key, value in edited.items():
            source = key if key in original else keys.get(key, key)
            restored[source] = unmask(value, original[source], known) if source in original else value
        return restored
    if isinstance(edited, list) and isinstance(original, (list, tuple)):
        return [unmask(value, original[i], known) if i < len(original) else value for i, value in enumerate(edited)]
    return edited


def _hidden_pieces(shown: str, original: str) -> list[str] | None:
    """What each ``***`` of ``shown`` (``mask(original)``) stands for in ``original``; ``None`` if unclear."""
    if MASK in original:
        return None
    pattern = "(.*?)".join(re.escape(part) for part in shown.split(MASK))
    match = re.fullmatch(pattern, original, re.DOTALL)
    return list(match.groups()) if match is not None else None


# --- A key in another spelling (see the module doc)

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


class JoinedView:
    """Pieces of a text joined (``text``), and the way back to the text's positions."""

    def __init__(self, text_starts: list[int], pieces: list[str]) -> None:
        """``pieces``, in order, and where each starts in the text."""
        self.text_starts = text_starts
        self.view_starts = [0, *accumulate(map(len, pieces[:-1]))] if pieces else []
        self.text = "".join(pieces)

    def position(self, index: int) -> int:
        """Where the view's character ``index`` is in the text."""
        piece = bisect_right(self.view_starts, index) - 1
        return self.text_starts[piece] + index - self.view_starts[piece]

    def spans(self, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """The view's ``(start, end)`` spans as spans of the text (what lies between their characters included)."""
        return [(self.position(start), self.position(end - 1) + 1) for start, end in spans]


class SpacedView(JoinedView):
    """The text with every separator taken out (``text``)."""

    def __init__(self, text: str) -> None:
        starts: list[int] = []
        pieces: list[str] = []
        kept = 0
        for match in _SEPARATORS.finditer(text):
            if match.start() > kept:
                starts.append(kept)
                pieces.append(text[kept : match.start()])
            kept = match.end()
        if kept < len(text):
            starts.append(kept)
            pieces.append(text[kept:])
        super().__init__(starts, pieces)


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


@lru_cache(maxsize=1024)
def windows(form: str, shortest: int) -> tuple[tuple[int, str], ...]:
    """``(offset, window)``: the pieces of ``form`` one of which every run of ``shortest`` characters of it holds
    whole (``shortest // 2`` characters, at each multiple of the stride that guarantees it)."""
    window_size = max(1, shortest // 2)
    stride = shortest - window_size + 1
    return tuple(
        (offset, form[offset : offset + window_size]) for offset in range(0, len(form) - window_size + 1, stride)
    )


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
    (``letters``)."""

    def __init__(self, text: str) -> None:
        hex_starts: list[int] = []
        hex_pieces: list[str] = []
        letter_starts: list[int] = []
        letters: list[str] = []
        for match in _XXD_LINE.finditer(text):
            for piece in re.finditer(r"[0-9a-fA-F]+", match.group(1)):
                hex_starts.append(match.start(1) + piece.start())
                hex_pieces.append(piece.group())
            letter_starts.append(match.start(2))
            letters.append(match.group(2))
        self.hex, self.letters = JoinedView(hex_starts, hex_pieces), JoinedView(letter_starts, letters)

    def spans(self, secrets: Sequence[str], shortest_plain: int) -> list[tuple[int, int]]:
        """Spans of the text holding a run of a key in the hex or the text columns."""
        found: list[tuple[int, int]] = []
        for secret in secrets:
            for form, run in spaced_forms(secret)[:2]:
                found += self.hex.spans(runs_of(self.hex.text, form, run))
            found += self.letters.spans(runs_of(self.letters.text, secret, shortest_plain))
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
    "KEY_VARIABLES",
    "MASK",
    "MIN_SECRET_CHARS",
    "MaskedStream",
    "add_secret_value",
    "admit",
    "cut",
    "is_secret_name",
    "is_secret_variable",
    "mask",
    "secret_values",
    "secrets_read_once",
    "unmask",
    "url_password",
    "without_secrets",
]
