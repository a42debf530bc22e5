"""Approvals in the tool layer: the one decision, the session's policy, and the broker where a call waits.

**The decision.** ``decide(tool, name, args, state, cells, cwd)`` is a pure function of the tool's declaration
(``ToolDefinition.origin`` and, for built-ins, ``secret_arguments``), the validated arguments, the policy
state (``PolicyState``), the code of the cells the call names (read by the host) and the folder the tool
resolves relative paths in (the turn's ``ToolContext.cwd``, not the process's: a ``python`` call may
``os.chdir``). It walks the ordered
rule table ``RULES`` (first match wins) and returns ``run``, ``ask`` or ``deny``, the rule that decided and,
for a denial, what the model is told. The precedence, the modes and the per-tool overrides are documented
in docs/security.md ("Approvals"); ``ApprovalPolicy`` holds them for a session (``apply_spec``: a stricter
mode chosen later drops the looser per-tool overrides set before it).

**The broker** (``ApprovalBroker``): a call that asks waits here, keyed by tool
call id, until a person decides. A decision may come from any thread: a
widget's button callback runs on the main shell or on a subshell thread
(JupyterLab routes comms to subshells), a stdin prompt runs in a worker, an
interrupt arrives from the signal handler. So ``resolve`` sets a
``concurrent.futures.Future`` the request awaits (``asyncio.wrap_future``). Nothing waits forever: a
timeout, an abort or ``deny_all`` resolve a request as denied. Who can answer
is a list of answerers registered with the broker (``register``), asked in
order: the first whose ``can_answer(asking)`` is true takes the request
(``answerer_for``; the kernel registers widget, comm, stdin, nobody:
``kernel.approval_hook``). ``asking`` is the host's record of who started the
call (the kernel's ``Turn``), passed through.

What a person sees of a call (``plain_arguments``, ``cut_middle``,
``reveal_invisible``) is the same in every front-end.

Long: the rule table, the policy and the broker are the whole approval decision, kept in one place on purpose.
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import os
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from pi_kernel.agent.tool_execution import is_async_callable
from pi_kernel.ai import AbortSignal
from pi_kernel.ai.messages import map_strings
from pi_kernel.tools.paths import ipython_transformed, secret_mention_reason, secret_path_reason

Verdict = Literal["run", "ask", "deny"]
OriginKind = Literal["builtin", "user", "mcp"]
"""Where a tool comes from (``ToolDefinition.origin``), declared by whoever makes its definition."""
SecretKind = Literal["path", "command", "code", "attribute", "cells"]
"""How an argument may name secrets: a file path; a shell command or Python code (read for paths and for
reads of the environment, ``secret_mention_reason``); a dotted attribute path (``inspect``); references to
notebook cells whose code will run (``run_cells``), judged by that code as ``python``'s, as written and as
IPython rewrites it (the host reads it from the notebook and hands it to ``decide``; a ref it could not read
asks, ``UNREADABLE_CELLS``)."""

STRICTNESS = {"auto": 0, "ask": 1, "deny": 2}
"""Among the patterns matching a tool, the strictest mode wins."""
STRICT_MODES: tuple[str, ...] = ("deny", "read-only")
"""Modes that refuse calls by themselves: an earlier ``ask`` override or "always allow" never lifts that."""


@dataclass(frozen=True, slots=True)
class PolicyState:
    """The session's policy as ``decide`` reads it (``ApprovalPolicy.state``)."""

    mode: str = "ask"
    overrides: Mapping[str, str] | None = None
    """Tool name or pattern → ``ask`` | ``auto`` | ``deny``."""
    always_allowed: frozenset[str] = frozenset()
    cell_mode: str | None = None
    """The running cell's ``%%pi --approve MODE``."""

    @property
    def effective_mode(self) -> str:
        return self.cell_mode or self.mode


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    rule: str
    """The name of the rule that decided (``RULES``)."""
    reason: str | None = None
    """For ``deny``: what the model is told."""
    secret: str | None = None
    """Why the call may read secrets (shown to the person who is asked), when it may."""


@dataclass(frozen=True, slots=True)
class Call:
    """One call as the rules see it; the derived facts are computed once."""

    name: str
    state: PolicyState
    override: str | None
    """The per-tool rule in force (after the cell's mode dropped looser ones)."""
    read_only: bool
    own: Verdict
    """The tool's own ``approval`` for these arguments."""
    secret: str | None


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    applies: Callable[[Call], bool]
    verdict: Verdict | Callable[[Call], Verdict]


def _mode_refuses(call: Call) -> bool:
    mode = call.state.effective_mode
    return mode == "deny" or (mode == "read-only" and not call.read_only)


RULES: tuple[Rule, ...] = (
    Rule("cell-deny", lambda c: c.state.cell_mode == "deny", "deny"),
    Rule("tool-deny", lambda c: c.override == "deny", "deny"),
    Rule(
        "read-only", lambda c: c.override is None and c.state.effective_mode == "read-only" and not c.read_only, "deny"
    ),
    Rule("own-deny", lambda c: c.override is None and c.state.effective_mode != "auto" and c.own == "deny", "deny"),
    Rule("deny-mode", lambda c: c.override is None and c.state.effective_mode == "deny" and c.own == "ask", "deny"),
    Rule(
        "secret-read", lambda c: c.secret is not None, lambda c: "deny" if c.state.effective_mode == "deny" else "ask"
    ),
    Rule("tool-auto", lambda c: c.override == "auto", "run"),
    Rule("auto-mode", lambda c: c.override is None and c.state.effective_mode == "auto", "run"),
    Rule("always-allowed", lambda c: c.name in c.state.always_allowed and not _mode_refuses(c), "run"),
    Rule("tool-ask", lambda c: c.override == "ask", "ask"),
    Rule("own-rule", lambda c: True, lambda c: c.own),
)
"""The ordered rule table ``decide`` walks; the first rule that applies decides (each is described in
docs/security.md, "Approvals")."""


def decide(
    tool: Any,
    name: str | None,
    args: Any,
    state: PolicyState,
    cells: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Decision:
    """``run``, ``ask`` or ``deny`` for a call of ``tool`` (a ``ToolDefinition``, or ``None`` when unknown)
    with validated ``args`` under ``state``: the first rule of ``RULES`` that applies. ``cells``: the code of
    the notebook cells the call's ``cells`` arguments name, by reference (``named_cells``). ``cwd``: the
    folder the tool resolves relative paths in (``ToolContext.cwd``; ``None``: the process's, now)."""
    tool_name = name or (tool.name if tool is not None else "")
    call = Call(
        name=tool_name,
        state=state,
        override=override_in_force(state, tool_name),
        read_only=bool(getattr(tool, "read_only", None)),
        own=approval_verdict(tool, args) if tool is not None else "ask",
        secret=secret_reason(tool, args, tool_name, cells, cwd),
    )
    rule = next(rule for rule in RULES if rule.applies(call))  # the last rule always applies
    verdict = rule.verdict if isinstance(rule.verdict, str) else rule.verdict(call)
    reason = deny_reason(state, tool_name, call.secret) if verdict == "deny" else None
    return Decision(verdict, rule.name, reason, call.secret)


def override_for(overrides: Mapping[str, str] | None, tool_name: str) -> str | None:
    """The per-tool mode for ``tool_name``: its exact entry, else the strictest matching pattern's."""
    if not overrides:
        return None
    exact = overrides.get(tool_name)
    if exact is not None:
        return exact
    modes = [mode for key, mode in overrides.items() if "*" in key and fnmatch.fnmatchcase(tool_name, key)]
    return max(modes, key=STRICTNESS.__getitem__) if modes else None


def override_in_force(state: PolicyState, tool_name: str) -> str | None:
    """The per-tool rule that still holds under the cell's mode (a stricter cell mode drops looser ones)."""
    override = override_for(state.overrides, tool_name)
    if override == "auto" and state.cell_mode not in (None, "auto"):
        return None  # a cell's stricter mode wins over an earlier session-wide auto
    if override == "ask" and state.cell_mode in STRICT_MODES:
        return None  # ... and over a session-wide ask (asking could still let it write)
    return override


def origin_of(tool: Any) -> OriginKind:
    """The tool's declared origin (``ToolDefinition.origin``); anything else counts as ``user``."""
    origin = getattr(tool, "origin", None)
    return origin if origin in ("builtin", "mcp") else "user"


_ENVIRONMENT_ATTRIBUTES = frozenset({"environ", "getenv", "__globals__", "__dict__", "__builtins__"})
"""Parts of an ``inspect`` path that may reach the environment (``os.environ``)."""


UNREADABLE_CELLS = "the code of the cells it names could not be read from the notebook to check it"
"""The secret reason of a call naming cells the host could not read (a read failed: fail closed, ask)."""


def _cell_code_reason(text: str) -> str | None:
    """Why a cell's code may read secrets, judged as written and as it runs once IPython has rewritten its
    syntax (``!env`` → ``get_ipython().system('env')``, ``%env KEY``), the way ``run_cells`` runs it."""
    reason = secret_mention_reason(text)
    if reason is None:
        transformed = ipython_transformed(text)
        reason = secret_mention_reason(transformed) if transformed != text else None
    return reason


def _argument_reason(kind: str, value: Any, cells: Mapping[str, str] | None, cwd: str | None) -> str | None:
    if kind == "attribute":
        reaches = isinstance(value, str) and _ENVIRONMENT_ATTRIBUTES.intersection(value.strip().split("."))
        return "it may read the environment, which holds the API keys" if reaches else None
    if kind == "cells":  # the code of the cells it names, read from the notebook by the host
        if not isinstance(value, list) or cells is None:  # no host read them (nothing named, or no notebook)
            return None
        if any(not isinstance(ref, str) or ref not in cells for ref in value):
            return UNREADABLE_CELLS
        return next((reason for ref in value if (reason := _cell_code_reason(cells[ref])) is not None), None)
    # A path or a command is read in ``cwd``, the folder the tool uses (``bash`` runs there); code (``python``'s,
    # also inside a structure: ``edits[].new_text``, ``cells[].source``) runs in the kernel process, so in the
    # process's folder now (``None``).
    folder = None if kind == "code" else cwd
    judge = secret_mention_reason if kind in ("command", "code") else secret_path_reason
    return next((reason for text in _strings(value) if (reason := judge(text, folder)) is not None), None)


def declared_secret_arguments(tool: Any) -> Mapping[str, SecretKind]:
    """The arguments a built-in declares may name secrets (``secret_arguments``); none for any other tool."""
    return (getattr(tool, "secret_arguments", None) or {}) if origin_of(tool) == "builtin" else {}


def secret_reason(
    tool: Any,
    args: Any,
    tool_name: str,
    cells: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> str | None:
    """Why this call may read secrets (see ``tools.paths``), or ``None``; a relative path is read in ``cwd``.

    A built-in tool is judged by the arguments it declares (``SecretKind``); any other tool (and a built-in
    that declares none) by every string in its arguments, however nested: one that names a file holding
    secrets asks; for an MCP tool (whose strings may be commands run elsewhere) one that reads the
    environment or names such a file in a command asks too.
    """
    values = args.model_dump() if hasattr(args, "model_dump") else args
    if not isinstance(values, dict):
        return None
    declared = declared_secret_arguments(tool)
    folder = os.fspath(cwd) if cwd is not None else None
    if declared:
        reasons = (_argument_reason(kind, values.get(argument), cells, folder) for argument, kind in declared.items())
    else:
        commands = origin_of(tool) == "mcp"
        reasons = (
            # a user's or an MCP tool may open a relative path in the turn's folder or the process's: both judged
            secret_path_reason(text, folder)
            or secret_path_reason(text, None)
            or (secret_mention_reason(text) if commands else None)
            for text in _strings(values)
        )
    return next((reason for reason in reasons if reason is not None), None)


def deny_reason(state: PolicyState, tool_name: str, secret: str | None = None) -> str:
    """What the model is told when the policy (not a person) denied a call."""
    cell_mode, mode = state.cell_mode, state.effective_mode
    if secret is not None and cell_mode != "deny" and mode == "deny":
        return f'Tool "{tool_name}" was not run: {secret}, and this session denies such calls (approval: deny).'
    if cell_mode == "deny":
        return f'Tool "{tool_name}" was not run: this cell denies every tool call (%%pi --approve deny).'
    if override_for(state.overrides, tool_name) == "deny":
        return f'Tool "{tool_name}" is disabled by the approval policy of this session (deny).'
    if mode == "read-only":
        return f'Tool "{tool_name}" was not run: this session is read-only.'
    if mode == "deny":
        return f'Tool "{tool_name}" needs approval and this session denies such calls (approval policy: deny).'
    return f'Tool "{tool_name}" refused this call: its own approval rule denies it.'


def _strings(value: Any) -> list[str]:
    """Every string in ``value`` (nested dicts and lists, keys too), found by ``messages.map_strings``."""
    found: list[str] = []

    def note(text: str) -> str:
        found.append(text)
        return text

    map_strings(value, note, note)
    return found


# -- the tool's own rule --------------------------------------------------------------------------

TOOL_MODES: tuple[str, ...] = ("ask", "auto", "deny")
"""What a per-tool override may say, and a tool's own ``approval`` as a word."""
MODE_VERDICTS: dict[str, Verdict] = {"auto": "run", "ask": "ask", "deny": "deny"}
"""What each word of a tool's ``approval`` means for a call."""


def check_approval_option(approval: Any, tool_name: str) -> None:
    """Raise a clear error for an ``approval`` option that cannot work (when the tool is defined)."""
    expected = f'Tool "{tool_name}": approval must be "ask", "auto", "deny" or a function of the arguments; got'
    if isinstance(approval, str):
        if approval not in TOOL_MODES:
            raise ValueError(f"{expected} {approval!r}")
        return
    if not callable(approval):
        raise TypeError(f"{expected} {type(approval).__name__}")
    if is_async_callable(approval):
        raise TypeError(
            f'@tool "{tool_name}": the approval function must be a plain (not async) function of the arguments'
        )


def approval_verdict(definition: Any, args: Any) -> Verdict:
    """``run``, ``ask`` or ``deny`` for a call of ``definition`` with validated ``args`` (its own option,
    ``definition.ToolApproval``). Any other answer (an exception, an awaitable) asks: an option that cannot
    decide must not let a risky call run unseen, nor break the turn."""
    policy = definition.approval
    if isinstance(policy, str):
        return MODE_VERDICTS.get(policy, "ask")  # an unknown word asks: fail closed
    if not callable(policy):
        return "ask"
    try:
        answer = policy(args)
    except Exception:  # noqa: BLE001 - a failing policy asks a person instead of running or crashing the turn
        return "ask"
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if callable(close):
            close()  # never awaited: close it so no "never awaited" warning leaks into the notebook
        return "ask"
    if isinstance(answer, str):
        return MODE_VERDICTS.get(answer, "ask")
    return "run" if _is_boolean(answer) and bool(answer) else "ask"


def needs_approval(definition: Any, args: Any) -> bool:
    """Whether a call of ``definition`` with validated ``args`` may not simply run (verdict ``ask`` or ``deny``)."""
    return approval_verdict(definition, args) != "run"


def _is_boolean(value: Any) -> bool:
    # numpy's bool (``numpy.bool_``) is what ``args.x > threshold`` gives for numpy numbers.
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


# -- the session's policy ---------------------------------------------------------------------------

SessionMode = Literal["ask", "auto", "deny", "read-only"]
SESSION_MODES: tuple[str, ...] = ("ask", "auto", "deny", "read-only")


@dataclass
class ApprovalPolicy:
    mode: SessionMode = "ask"
    overrides: dict[str, str] = field(default_factory=dict)
    """Tool name → ``ask`` | ``auto`` | ``deny``."""
    always_allowed: set[str] = field(default_factory=set)
    """Tools the person allowed for the session ("always allow")."""

    def state(self, mode: str | None = None) -> PolicyState:
        """The policy as ``decide`` reads it; ``mode``: the cell's ``--approve``."""
        return PolicyState(self.mode, dict(self.overrides), frozenset(self.always_allowed), mode)

    def decide(self, definition: Any, args: Any, name: str | None = None, mode: str | None = None) -> Verdict:
        """``decide``'s verdict under this policy; ``mode``: the cell's ``--approve``."""
        return decide(definition, name, args, self.state(mode)).verdict

    def allow_always(self, tool_name: str) -> None:
        self.always_allowed.add(tool_name)

    def set_mode(self, mode: str) -> None:
        if mode not in SESSION_MODES:
            raise ValueError(f"Approval mode must be one of {', '.join(SESSION_MODES)}; got {mode!r}")
        self.mode = cast(SessionMode, mode)  # one of SESSION_MODES, checked above

    def set_override(self, tool_name: str, mode: str) -> None:
        if mode not in TOOL_MODES:
            raise ValueError(f"A per-tool approval must be one of {', '.join(TOOL_MODES)}; got {mode!r}")
        self.overrides[tool_name] = mode

    def apply_spec(self, words: Iterable[str]) -> None:
        """Apply ``ask`` / ``auto`` / ``deny`` / ``read-only`` and ``name=mode`` words, all or nothing."""
        mode: str | None = None
        overrides: dict[str, str] = {}
        for word in words:
            if "=" in word:
                name, _, value = word.partition("=")
                if not name or value not in TOOL_MODES:
                    raise ValueError(f"Expected TOOL=ask|auto|deny, got {word!r}")
                overrides[name] = value
            elif word in SESSION_MODES:
                mode = word
            else:
                raise ValueError(f"Unknown approval setting {word!r}: use {', '.join(SESSION_MODES)} or TOOL=MODE")
        if mode is not None:
            self.set_mode(mode)
            if mode != "auto":  # a stricter mode wins over per-tool overrides set before it that are looser
                dropped = ("auto", "ask") if mode in STRICT_MODES else ("auto",)
                self.overrides = {name: value for name, value in self.overrides.items() if value not in dropped}
        self.overrides.update(overrides)

    def describe(self) -> str:
        parts = [f"mode: {self.mode}"]
        if self.overrides:
            parts.append("per tool: " + ", ".join(f"{name}={mode}" for name, mode in sorted(self.overrides.items())))
        if self.always_allowed:
            parts.append("always allowed: " + ", ".join(sorted(self.always_allowed)))
        return "; ".join(parts)


# -- the broker, and what a person sees of a call --------------------------------------------------

DecisionKind = Literal["approve", "always", "deny"]
INTERRUPTED = "Interrupted by the user"


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
_SHOWN_AS_SPACES = str.maketrans(_SHOWN_AS_IS, "  ")
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
    printable = text.isprintable() or text.translate(_SHOWN_AS_SPACES).isprintable()
    if printable and not _INVISIBLE_EXTRA.intersection(text):
        return text, 0  # the common case, also for text of many lines, without a step per character
    parts = [_escape(char, json_text) if _is_invisible(char) else char for char in text]
    return "".join(parts), sum(len(part) > 1 for part in parts)


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
    _waiting: dict[str, tuple[ApprovalRequest, Future[ApprovalDecision]]] = field(default_factory=dict, repr=False)
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
            return [request for request, _ in self._waiting.values()]

    async def request(self, request: ApprovalRequest, signal: AbortSignal | None = None) -> ApprovalDecision:
        """Wait for a decision on ``request``; never raises on timeout or abort."""
        future: Future[ApprovalDecision] = Future()
        with self._lock:
            self._waiting[request.tool_call_id] = (request, future)
        interrupted = ApprovalDecision("deny", INTERRUPTED, source="interrupt")
        remove_abort = (
            signal.add_listener(lambda _: self.resolve(request.tool_call_id, interrupted)) if signal else None
        )
        self._notify("requested", request)
        try:
            decision = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.timeout)
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
            request, future = entry
            request.decision = decision  # set once, under the lock: the future is set once
        future.set_result(decision)
        self._notify("resolved", request)
        return True

    def announce(self, request: ApprovalRequest) -> None:
        """Tell the listeners of a request that was decided without waiting (the policy denied it),
        so a view shows the call as denied rather than failed."""
        self._notify("resolved", request)

    def deny_all(self, reason: str = INTERRUPTED, source: str = "interrupt") -> int:
        """Deny every waiting request (kernel interrupt); returns how many."""
        denied = ApprovalDecision("deny", reason, source=source)
        return sum(self.resolve(request.tool_call_id, denied) for request in self.pending())

    def _notify(self, event: str, request: ApprovalRequest) -> None:
        for listener in list(self._listeners):
            try:
                listener(event, request)
            except Exception:  # noqa: BLE001 - a broken view must not break the approval
                pass
