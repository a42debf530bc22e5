"""The approval broker: a tool call waits here until a person decides; and how the call is shown to them.

Requests are keyed by tool call id. A decision may come from any thread: a
widget's button callback runs on the main shell or on a subshell thread
(JupyterLab routes comms to subshells), a stdin prompt runs in a worker, an
interrupt arrives from the signal handler. So ``resolve`` hands the decision
to the waiting loop with ``call_soon_threadsafe``. Nothing waits forever: a
timeout, an abort or ``deny_all`` resolve a request as denied.

What the person sees of a call is the same in every front-end (widgets, text,
stdin): its arguments as JSON-ready data (``plain_arguments``), cut in the
middle and never at one end (``cut_middle``), with characters that hide or
reorder text made visible (``reveal_invisible``).

Who can answer is a list of answerers registered with the broker
(``ApprovalBroker.register``), asked in order: the first whose
``can_answer(asking)`` is true takes the request (``answerer_for``); the
host registers them (the kernel: widgets, a ``pi.approval`` comm client,
stdin, and last "nobody", which denies with the reason). ``asking`` is the
host's record of who started the call (the kernel's ``Turn``), passed through.
"""

from __future__ import annotations

import asyncio
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pi_kernel.ai import AbortSignal
from pi_kernel.ai.messages import map_strings

DecisionKind = Literal["approve", "always", "deny"]


def plain_arguments(args: Any) -> Any:
    """Validated arguments as JSON-ready data, as a person is shown them (a pydantic model is dumped)."""
    dump = getattr(args, "model_dump", None)
    return dump(mode="json") if callable(dump) else args


def hidden_marker(count: int) -> str:
    """The plain warning that stands for the hidden middle of a call shown to a person."""
    return f"[… {count:,} characters hidden here; the call runs with all of them …]"


def cut_middle(text: str, limit: int) -> str:
    """``text`` whole when it fits in ``limit`` characters, else its head and its tail around
    ``hidden_marker``: what a person approves is never cut at one end only (a command padded with
    harmless text would hide its dangerous tail)."""
    if len(text) <= limit:
        return text
    keep = max(limit // 2, 1)
    return f"{text[:keep]} {hidden_marker(len(text) - 2 * keep)} {text[-keep:]}"


_SHOWN_AS_IS = "\n\t"
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
"""Controls (ESC, CR), format characters (bidi overrides and isolates, zero-width characters, tag
characters), line and paragraph separators, surrogates, private and unassigned code points."""
_INVISIBLE_EXTRA = frozenset(
    "\u034f\u115f\u1160\u180b\u180c\u180d\u180f\u2800\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)
"""Printable by Unicode's rules yet blank on screen: fillers, the Braille blank, variation selectors."""


def _is_invisible(char: str) -> bool:
    if char in _INVISIBLE_EXTRA:
        return True
    return not char.isprintable() and char not in _SHOWN_AS_IS and unicodedata.category(char) in _INVISIBLE_CATEGORIES


def _printable_apart_from_shown_as_is(text: str) -> bool:
    if text.isprintable():
        return True
    for char in _SHOWN_AS_IS:
        text = text.replace(char, " ")
    return text.isprintable()


def _escape(char: str, json_text: bool) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    if json_text:  # a JSON escape of a character beyond the BMP is its surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\U{code:08x}"


PREVIEW_DIFF_CHARS = 40_000
"""The longest change (diff) an approval card shows whole: a tool refuses a bigger one (split it), so
what is approved is what is seen."""


def reveal_invisible(text: str, *, json_text: bool = False) -> tuple[str, int]:
    """``text`` with every character that hides or reorders text on screen written as ``\\uXXXX``, and how
    many there were: what a person approves must look like what runs (Trojan Source: a bidi override
    shows ``curl … | sh`` as harmless text). ``json_text``: ``text`` is JSON, its escapes stay valid JSON
    (the characters only occur inside strings, so parsing it gives back the same value)."""
    if _printable_apart_from_shown_as_is(text) and not _INVISIBLE_EXTRA.intersection(text):
        return text, 0  # the common case, also for text of many lines, without a step per character
    count = 0
    parts = []
    for char in text:
        if _is_invisible(char):
            count += 1
            parts.append(_escape(char, json_text))
        else:
            parts.append(char)
    return "".join(parts), count


def reveal_invisible_data(value: Any) -> tuple[Any, int]:
    """``reveal_invisible`` applied to every string (and mapping key) inside JSON-like ``value``."""
    count = 0

    def reveal(text: str) -> str:
        nonlocal count
        shown, found = reveal_invisible(text)
        count += found
        return shown

    return map_strings(value, reveal, reveal), count


def invisible_warning(count: int) -> str:
    """The plain warning shown with a call that holds characters ``reveal_invisible`` made visible."""
    plural = "character" if count == 1 else "characters"
    return (
        f"⚠ this call holds {count:,} invisible or text-reordering {plural}, shown as \\uXXXX; the call runs with them"
    )


@dataclass(slots=True)
class ApprovalDecision:
    kind: DecisionKind
    """``approve`` once; ``always`` allow this tool for the session; ``deny``."""
    reason: str | None = None
    """For ``deny``: what the model is told."""
    args: dict[str, Any] | None = None
    """For ``approve``/``always``: edited arguments (re-validated before running)."""
    source: str = "user"
    """Who decided: ``user``, ``policy``, ``timeout``, ``interrupt``, ``stdin``."""


@dataclass(frozen=True, slots=True)
class ApprovalPreview:
    """What a change will do, shown on its approval card (the notebook tools: a cell's diff)."""

    title: str
    """What changes, in a line (``edit cell #2 (code) df = load()``)."""
    diff: str
    """A unified, line-level diff (``-`` removed, ``+`` added lines)."""
    cell_id: str | None = None
    """The cell the front-end highlights while the approval waits."""


@dataclass(slots=True)
class ApprovalRequest:
    tool_call_id: str
    tool_name: str
    args: Any
    """The validated arguments (what the call will run with)."""
    label: str = ""
    schema: dict[str, Any] | None = None
    """The tool's JSON schema, for an edit-arguments form."""
    decision: ApprovalDecision | None = None
    warning: str | None = None
    """Why this call asks though its tool or mode would let it run (it may read secrets), for the person."""
    preview: ApprovalPreview | None = None
    """The change the call makes, as a diff (tools with an ``approval_preview``)."""


class Answerer(Protocol):
    """Someone who can answer approvals (registered with ``ApprovalBroker.register``)."""

    name: str
    """``widget``, ``comm``, ``stdin``, ``nobody``, ..."""
    person: bool
    """``False``: nobody is asked; the call is denied with ``refusal`` (no preview is made for it)."""

    def can_answer(self, asking: Any) -> bool:
        """Whether this answerer can answer a request of ``asking`` (the host's turn) now."""

    async def answer(
        self, request: ApprovalRequest, broker: ApprovalBroker, asking: Any, signal: AbortSignal | None
    ) -> ApprovalDecision:
        """The decision on ``request`` (``person`` answerers: usually ``broker.request``)."""

    def refusal(self, tool_name: str, asking: Any) -> str:
        """What the model is told when this answerer cannot ask anyone (``person`` is ``False``)."""


ApprovalListener = Callable[[str, ApprovalRequest], None]
"""``listener(event, request)`` with event ``"requested"`` or ``"resolved"``."""


@dataclass
class ApprovalBroker:
    timeout: float | None = 600.0
    """Seconds before an unanswered request is denied (``None``: never)."""
    _waiting: dict[str, tuple[ApprovalRequest, asyncio.AbstractEventLoop, asyncio.Future[ApprovalDecision]]] = field(
        default_factory=dict, repr=False
    )
    _listeners: list[ApprovalListener] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    answerers: list[Answerer] = field(default_factory=list, repr=False)
    """Who can answer, in order (``register``; ``answerer_for`` takes the first that can)."""

    def register(self, answerer: Answerer) -> None:
        """Add ``answerer`` after those registered before it (replacing one of the same name)."""
        self.answerers = [known for known in self.answerers if known.name != answerer.name] + [answerer]

    def answerer_for(self, asking: Any) -> Answerer | None:
        """The first registered answerer that can answer a request of ``asking`` now, or ``None``."""
        return next((answerer for answerer in self.answerers if answerer.can_answer(asking)), None)

    def subscribe(self, listener: ApprovalListener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def pending(self) -> list[ApprovalRequest]:
        with self._lock:
            return [request for request, _, _ in self._waiting.values()]

    async def request(self, request: ApprovalRequest, signal: AbortSignal | None = None) -> ApprovalDecision:
        """Wait for a decision on ``request``; never raises on timeout or abort."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ApprovalDecision] = loop.create_future()
        with self._lock:
            self._waiting[request.tool_call_id] = (request, loop, future)
        remove_abort = (
            signal.add_listener(lambda _: self.resolve(request.tool_call_id, _interrupted())) if signal else None
        )
        self._notify("requested", request)
        try:
            decision = await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except asyncio.TimeoutError:
            decision = ApprovalDecision(
                "deny", f"Approval timed out after {self.timeout:g} s; the call was not run.", source="timeout"
            )
            self.resolve(request.tool_call_id, decision)
        finally:
            if remove_abort:
                remove_abort()
            with self._lock:
                self._waiting.pop(request.tool_call_id, None)
        return decision

    def resolve(self, tool_call_id: str, decision: ApprovalDecision) -> bool:
        """Decide a waiting request, from any thread. False if none waits."""
        with self._lock:
            entry = self._waiting.get(tool_call_id)
            if entry is None or entry[0].decision is not None:
                return False
            request, loop, future = entry
            request.decision = decision

        def settle() -> None:
            if not future.done():
                future.set_result(decision)

        loop.call_soon_threadsafe(settle)
        self._notify("resolved", request)
        return True

    def announce(self, request: ApprovalRequest) -> None:
        """Tell the listeners of a request that was decided without waiting (the policy denied it),
        so a view shows the call as denied rather than failed."""
        self._notify("resolved", request)

    def deny_all(self, reason: str = "Interrupted by the user", source: str = "interrupt") -> int:
        """Deny every waiting request (kernel interrupt); returns how many."""
        count = 0
        for request in self.pending():
            count += self.resolve(request.tool_call_id, ApprovalDecision("deny", reason, source=source))
        return count

    def _notify(self, event: str, request: ApprovalRequest) -> None:
        for listener in list(self._listeners):
            try:
                listener(event, request)
            except Exception:  # noqa: BLE001 - a broken view must not break the approval
                pass


def _interrupted() -> ApprovalDecision:
    return ApprovalDecision("deny", "Interrupted by the user", source="interrupt")
