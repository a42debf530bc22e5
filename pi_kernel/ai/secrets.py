"""Masking key values: one function, ``mask``, for text and JSON-like data.

Keys are never copied into settings or messages, but text from elsewhere can
still quote one (a provider error echoing the request, a tool printing the
environment). ``mask`` replaces the value of every key-like environment
variable (``is_secret_name``: the one list of secret names every surface uses), every long enough run of one, its hex
and base64 forms (``secret_encodings``), credentials in URLs and ``sk-`` keys
with ``***``. It is called at the choke points: where text enters (a
provider's error message, a tool's result) and where it leaves the kernel
(iopub and stdin messages: ``pi_kernel.kernel.outgoing``; saved sessions,
notebook metadata), plus the few places where masking must come before a
transformation that would hide a key from a later mask (HTML escaping,
highlighting, a cut to length: those modules say so). Text that leaves in
pieces is masked by a ``MaskedStream``, which holds back a tail that may be the
start of a key; ``unmask`` undoes the mask in arguments a person edited.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, overload

from pi_kernel.ai.messages import MAX_DEPTH, map_strings
from pi_kernel.ai.secret_encodings import (
    SpacedView,
    may_hold,
    merged,
    other_forms_masked,
    replaced,
    runs_of,
    spaced_letters,
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

"""``user:password@`` after ``//`` (the user may be empty, as in ``redis://:pw@host``; the password may hold
``@``: the match runs to the last one before the path). The scheme is not needed, so a split before ``//``
is no gap."""
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


LARGE_TEXT_CHARS = 65_536
"""Text at least this long is masked once per set of keys: the result is remembered (``LARGE_TEXT_KEPT``
of them), since the end of a turn masks the same 5 MB argument for the display, the saved metadata and
each outgoing message."""
LARGE_TEXT_KEPT = 4
_large_masked: dict[tuple[str, tuple[str, ...]], str] = {}
_large_lock = threading.Lock()


def _mask_text(text: str, secrets: Sequence[str]) -> str:
    if len(text) < LARGE_TEXT_CHARS:
        return _KEY_LIKE.sub("sk-***", _mask_values_and_urls(text, secrets))
    key = (text, tuple(secrets))  # a str caches its hash; the same object compares equal at once
    with _large_lock:
        done = _large_masked.get(key)
    if done is not None:
        return done
    done = _KEY_LIKE.sub("sk-***", _mask_values_and_urls(text, secrets))
    with _large_lock:
        _large_masked[key] = done
        while len(_large_masked) > LARGE_TEXT_KEPT:
            del _large_masked[next(iter(_large_masked))]
    return done


def _mask_values_and_urls(text: str, secrets: Sequence[str]) -> str:
    """Each key value, each ``FRAGMENT_CHARS``-long run of one, their other forms (``secret_encodings``), and
    URL credentials replaced by ``***``."""
    if not may_hold(text, secrets, FRAGMENT_CHARS):  # the common case, in one regular expression search
        return _URL_CREDENTIALS.sub("//***@", text)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
        text = replaced(text, _fragment_spans(text, secret), MASK)
    return _URL_CREDENTIALS.sub("//***@", other_forms_masked(text, secrets, FRAGMENT_CHARS))


def _fragment_spans(text: str, secret: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each longest run of ``secret``'s characters in ``text`` at least ``FRAGMENT_CHARS``
    long, in order, overlapping runs merged."""
    return merged(runs_of(text, secret, FRAGMENT_CHARS))


def _unfinished_start(text: str, secrets: Sequence[str]) -> int:
    """Where the end of ``text`` may be part of something ``mask`` hides (``len(text)`` if nowhere).

    Text that is still growing (a streamed answer, arguments being written) is
    shown up to this point only: the rest waits until it either completes a
    secret or a run of one (and is masked whole) or stops looking like one.
    The end held back is the longest one that is a piece of a key (a rolling
    tail may start in the middle of one), so it is never longer than the key.
    """
    start = len(text)
    for secret in secrets:
        for size in range(min(len(text), len(secret)), 0, -1):
            if len(text) - size < start and text[len(text) - size :] in secret:
                start = len(text) - size
                break
    for secret in secrets:
        # A finished run of the key may end inside the held end (its last characters also begin another
        # reading of the key): cut after the run, so it is masked whole rather than shown in two parts.
        for run_start, run_end in _fragment_spans(text, secret):
            if run_start < start < run_end:
                start = run_end
    start = min(start, _spaced_unfinished_start(text, secrets))
    window = max(0, len(text) - _UNFINISHED_WINDOW)
    match = _UNFINISHED.search(text, window)
    if match is not None:
        start = min(start, match.start())
    return start


def _spaced_unfinished_start(text: str, secrets: Sequence[str]) -> int:
    """Where the end of ``text`` may begin a key written with separators between its letters (markup tags:
    ``sk-proj-ab<b></b>cd``), read in the spaced view (``secret_encodings.SpacedView``) of its last part."""
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


class MaskedStream:
    """``mask`` for text sent in pieces: a secret split across two pieces is still masked.

    ``feed`` returns what is safe to send now and holds back a tail that may
    be the start of a secret (at most the longest secret's length, or the
    last ``_UNFINISHED_WINDOW`` characters while an ``sk-`` run or URL grows);
    ``flush`` returns the held-back rest once the text is complete. Costs the
    size of each piece plus that tail, not the size of the whole text.
    """

    def __init__(self, secrets: Sequence[str] | None = None) -> None:
        self.secrets: Sequence[str] = secret_values() if secrets is None else secrets
        """The values masked, read from the environment once (a stream is short-lived)."""
        self._pending = ""
        self._sent_tail = ""

    def feed(self, text: str) -> str:
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


__all__ = [
    "KEY_VARIABLES",
    "MASK",
    "MIN_SECRET_CHARS",
    "MaskedStream",
    "add_secret_value",
    "is_secret_name",
    "is_secret_variable",
    "mask",
    "secret_values",
    "secrets_read_once",
    "unmask",
    "url_password",
    "without_secrets",
]
