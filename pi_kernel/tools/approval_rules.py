"""The approval decision, in one place: ``decide()`` walks an ordered rule table.

A tool declares where it comes from (``ToolDefinition.origin``: ``builtin``,
``user``, ``mcp`` with ``mcp_server``) and, for built-ins, which of its arguments may name secrets
(``ToolDefinition.secret_arguments``: a path, a command, code, an attribute
path), next to its definition. ``decide(tool, name, args, state)`` is a pure
function of that declaration, the validated arguments and the policy state
(``PolicyState``: session mode, per-tool rules, "always allow", the cell's
``--approve``): it returns ``run``, ``ask`` or ``deny``, the rule that
decided and, for a denial, what the model is told.

The rules, first match wins (``RULES``; docs/security.md, "Approvals"):

1. ``cell-deny``: the cell's ``%%pi --approve deny`` denies every call.
2. ``tool-deny``: a per-tool ``deny`` (exact name, or the strictest matching
   pattern such as ``shell__*=deny``).
3. ``read-only``: in ``read-only`` mode a tool that is not read-only is denied
   (unless a per-tool rule still in force names it).
4. ``own-deny``: the tool's own ``approval`` says ``deny`` (not in ``auto`` mode).
5. ``deny-mode``: in ``deny`` mode a call that would ask is denied.
6. ``secret-read``: a call that may read secrets asks, in every mode, after
   every ``auto`` and "always allow"; in ``deny`` mode it is refused.
7. ``tool-auto``: a per-tool ``auto`` runs.
8. ``auto-mode``: ``auto`` mode runs the rest.
9. ``always-allowed``: a tool the person allowed for the session runs, unless
   the mode refuses it by itself (``deny``, ``read-only`` for a writing tool).
10. ``tool-ask``: a per-tool ``ask`` asks.
11. ``own-rule``: the tool's own ``approval`` (``approval_verdict``).

A per-tool rule the cell's mode overrides is not in force: a cell's stricter
``--approve`` (anything but ``auto``) ignores per-tool ``auto``, and its
``read-only`` also ``ask``. Read-only tools: a tool's declared ``read_only``;
else only the built-in ``read``; an MCP tool's ``readOnlyHint`` counts only
for a server the user trusts (the MCP wrapper sets ``read_only`` then).
"""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pi_kernel.agent.invoke import is_async_callable
from pi_kernel.ai.messages import map_strings
from pi_kernel.tools.secret_paths import secret_mention_reason, secret_path_reason

Verdict = Literal["run", "ask", "deny"]
OriginKind = Literal["builtin", "user", "mcp"]
"""Where a tool comes from (``ToolDefinition.origin``), declared by whoever makes its definition."""
SecretKind = Literal["path", "command", "code", "attribute"]
"""How an argument may name secrets: a file path; a shell command or Python code (read for paths and for
reads of the environment, ``secret_mention_reason``); a dotted attribute path (``inspect``)."""

STRICTNESS = {"auto": 0, "ask": 1, "deny": 2}
"""Among the patterns matching a tool, the strictest mode wins."""
STRICT_MODES: tuple[str, ...] = ("deny", "read-only")
"""Modes that refuse calls by themselves: an earlier ``ask`` override or "always allow" never lifts that."""
READ_ONLY_BUILTINS = frozenset({"read"})
"""Built-in tools that only read when they do not declare ``read_only`` themselves."""


class RuleTool(Protocol):
    """What the rules read of a tool (``definition.ToolDefinition`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def approval(self) -> object: ...

    @property
    def read_only(self) -> bool | None: ...


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

    tool: Any
    name: str
    args: Any
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
    verdict: Callable[[Call], Verdict]
    doc: str


def _mode_refuses(call: Call) -> bool:
    mode = call.state.effective_mode
    return mode == "deny" or (mode == "read-only" and not call.read_only)


RULES: tuple[Rule, ...] = (
    Rule("cell-deny", lambda c: c.state.cell_mode == "deny", lambda c: "deny", "a cell's --approve deny denies all"),
    Rule("tool-deny", lambda c: c.override == "deny", lambda c: "deny", "a per-tool deny"),
    Rule(
        "read-only",
        lambda c: c.override is None and c.state.effective_mode == "read-only" and not c.read_only,
        lambda c: "deny",
        "read-only mode denies tools that are not read-only",
    ),
    Rule(
        "own-deny",
        lambda c: c.override is None and c.state.effective_mode != "auto" and c.own == "deny",
        lambda c: "deny",
        "the tool's own approval denies",
    ),
    Rule(
        "deny-mode",
        lambda c: c.override is None and c.state.effective_mode == "deny" and c.own == "ask",
        lambda c: "deny",
        "deny mode denies what would ask",
    ),
    Rule(
        "secret-read",
        lambda c: c.secret is not None,
        lambda c: "deny" if c.state.effective_mode == "deny" else "ask",
        "a call that may read secrets asks in every mode (refused in deny mode)",
    ),
    Rule("tool-auto", lambda c: c.override == "auto", lambda c: "run", "a per-tool auto runs"),
    Rule("auto-mode", lambda c: c.override is None and c.state.effective_mode == "auto", lambda c: "run", "auto runs"),
    Rule(
        "always-allowed",
        lambda c: c.name in c.state.always_allowed and not _mode_refuses(c),
        lambda c: "run",
        '"always allow" answers the question; it never lifts a deny or a stricter mode',
    ),
    Rule("tool-ask", lambda c: c.override == "ask", lambda c: "ask", "a per-tool ask asks"),
    Rule("own-rule", lambda c: True, lambda c: c.own, "the tool's own approval option"),
)
"""The ordered rule table ``decide`` walks; the first rule that applies decides."""


def decide(tool: Any, name: str | None, args: Any, state: PolicyState) -> Decision:
    """``run``, ``ask`` or ``deny`` for a call of ``tool`` (a ``ToolDefinition``, or ``None`` when unknown)
    with validated ``args`` under ``state``: the first rule of ``RULES`` that applies."""
    tool_name = name or (tool.name if tool is not None else "")
    call = Call(
        tool=tool,
        name=tool_name,
        args=args,
        state=state,
        override=override_in_force(state, tool_name),
        read_only=is_read_only(tool, tool_name),
        own=approval_verdict(tool, args) if tool is not None else "ask",
        secret=secret_reason(tool, args, tool_name),
    )
    for rule in RULES:
        if rule.applies(call):
            verdict = rule.verdict(call)
            reason = deny_reason(state, tool_name, call.secret) if verdict == "deny" else None
            return Decision(verdict, rule.name, reason, call.secret)
    raise AssertionError("the last rule always applies")  # pragma: no cover


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


def is_read_only(tool: Any, name: str) -> bool:
    """Whether calls of this tool only read: its declared ``read_only``, else a built-in read-only tool."""
    declared = getattr(tool, "read_only", None)
    if declared is not None:
        return bool(declared)
    return name in READ_ONLY_BUILTINS and origin_of(tool) == "builtin"


def inspect_path_reason(name: Any) -> str | None:
    """Why an ``inspect`` of this dotted path may read the environment (``os.environ``), or ``None``."""
    if not isinstance(name, str):
        return None
    parts = set(name.strip().split("."))
    if parts & {"environ", "getenv", "__globals__", "__dict__", "__builtins__"}:
        return "it may read the environment, which holds the API keys"
    return None


def _argument_reason(kind: str, value: Any) -> str | None:
    if kind == "attribute":
        return inspect_path_reason(value)
    if kind in ("command", "code"):
        if isinstance(value, str):
            return secret_mention_reason(value)
        # code inside a structure (``edits[].new_text``, ``cells[].source``): each string like ``python``'s code
        return cell_code_reason(_strings(value))
    return next((r for text in _strings(value) if (r := secret_path_reason(text)) is not None), None)


def cell_code_reason(sources: list[str]) -> str | None:
    """Why code that will run (``python``-like: a cell's source) may read secrets, or ``None``."""
    return next((reason for source in sources if (reason := secret_mention_reason(source)) is not None), None)


def secret_reason(tool: Any, args: Any, tool_name: str) -> str | None:
    """Why this call may read secrets (see ``secret_paths``), or ``None``.

    A built-in tool is judged by the arguments it declares (``secret_arguments``: a command or code by its
    text, a path as a path, an attribute path by its parts); any other tool (and a built-in that declares
    none) by every string in its arguments, however nested: one that names a file holding secrets asks;
    for an MCP tool (whose strings may be commands run elsewhere) one that reads the environment or names
    such a file in a command asks too.
    """
    values = args.model_dump() if hasattr(args, "model_dump") else args
    if not isinstance(values, dict):
        return None
    origin = origin_of(tool)
    declared = getattr(tool, "secret_arguments", None) if origin == "builtin" else None
    if declared:
        for argument, kind in declared.items():
            reason = _argument_reason(kind, values.get(argument))
            if reason is not None:
                return reason
        return None
    commands = origin == "mcp"
    for text in _strings(values):
        reason = secret_path_reason(text) or (secret_mention_reason(text) if commands else None)
        if reason is not None:
            return reason
    return None


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
_ANSWERS: dict[str, Verdict] = {"auto": "run", "ask": "ask", "deny": "deny"}
"""What each word of a tool's ``approval`` means for a call."""


def check_approval_option(approval: Any, tool_name: str) -> None:
    """Raise a clear error for an ``approval`` option that cannot work (when the tool is defined)."""
    if isinstance(approval, str):
        if approval not in TOOL_MODES:
            raise ValueError(
                f'Tool "{tool_name}": approval must be "ask", "auto", "deny" or a function of the arguments; '
                f"got {approval!r}"
            )
        return
    if not callable(approval):
        raise TypeError(
            f'Tool "{tool_name}": approval must be "ask", "auto", "deny" or a function of the arguments; '
            f"got {type(approval).__name__}"
        )
    if is_async_callable(approval):
        raise TypeError(
            f'@tool "{tool_name}": the approval function must be a plain (not async) function of the arguments'
        )


def approval_verdict(definition: Any, args: Any) -> Verdict:
    """``run``, ``ask`` or ``deny`` for a call of ``definition`` with validated ``args`` (its own option).

    A callable option answers ``True`` / ``"auto"`` (run), ``False`` / ``"ask"`` or ``"deny"``; anything
    else (another value, an exception, an awaitable) is read as ``ask``: an option that cannot decide
    must not let a risky call run unseen, nor break the turn."""
    policy = definition.approval
    if isinstance(policy, str):
        return _ANSWERS.get(policy, "ask")  # an unknown word asks: fail closed
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
        return _ANSWERS.get(answer, "ask")
    if _is_boolean(answer):
        return "run" if bool(answer) else "ask"
    return "ask"


def needs_approval(definition: Any, args: Any) -> bool:
    """Whether a call of ``definition`` with validated ``args`` may not simply run (verdict ``ask`` or ``deny``)."""
    return approval_verdict(definition, args) != "run"


def _is_boolean(value: Any) -> bool:
    # numpy's bool (``numpy.bool_``) is what ``args.x > threshold`` gives for numpy numbers.
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))
