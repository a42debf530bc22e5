"""The session's approval policy (``ApprovalPolicy``): its state and the magics that change it.

The decision itself is ``approval_rules.decide`` (one pure function over an
ordered rule table); ``ApprovalPolicy.decide`` hands it the policy's state.
What the rules say, in words:

A tool's own ``approval`` (``ToolDefinition.approval``, ``@tool(approval=...)``)
says whether its calls are risky: ``"auto"`` (run at once), ``"ask"`` (a person
approves each call), ``"deny"``, or a callable that decides from the call's
*validated* arguments (a pydantic model instance for a model or ``@tool``
function, a dict for a JSON-schema tool)::

    @tool(approval=lambda args: "auto" if args.path.startswith("/tmp/") else "ask")
    def delete(path: str) -> str: ...

The callable answers ``True`` / ``"auto"`` (run), ``False`` / ``"ask"`` (ask
a person) or ``"deny"`` (refuse). Anything else — another value, an
exception, an awaitable — is read as ``"ask"``: a policy that cannot decide
must not let a risky call run unseen, nor break the turn
(``approval_verdict``; ``check_approval_option`` rejects an option that
cannot work when the tool is defined).

The session mode (``ApprovalPolicy``) says what happens to a risky call:

- ``ask``: a person decides (widget, comm, stdin); safe calls run;
- ``auto``: everything runs without asking;
- ``deny``: risky calls are denied, safe calls run (for unattended runs);
- ``read-only``: calls of tools that are not read-only are denied; read-only
  tools are treated as in ``ask`` mode (their own ``approval`` still applies),
  so ``read-only`` never allows more than ``ask``.

Which tools are read-only: a definition that declares ``read_only`` (an
attribute, ``True`` or ``False``) decides for itself; otherwise only the
built-in ``read`` tool counts (``READ_ONLY_TOOLS``, matched by name *and*
declared origin, ``ToolDefinition.origin``, so a notebook tool that happens to be called ``read`` is not trusted
by its name). ``bash``, ``python``, ``write`` and ``edit`` are never read-only
(``bash`` and ``python`` can do anything).

A call that may read secrets (``secret_paths``: ``/proc/self/environ``, a
``.env``, ``~/.aws/credentials``, a private key, ``bash`` printing the
environment, ``inspect`` of an ``os.environ`` path, ...) always asks a person, whatever the mode, override or
"always allow" said; in ``deny`` mode (nobody to ask) it is refused.

Per-tool overrides (``bash=ask python=auto``; a name with ``*`` is a pattern,
so ``time__*=auto`` sets every tool of the MCP server ``time``, and an exact
name wins over a pattern; among the patterns that match, the strictest wins,
``deny`` over ``ask`` over ``auto``, so ``shell__*=deny`` is never undone by
another rule such as ``*read_file=auto``) win over the
mode (also over ``read-only``: ``%pi approve read-only mytool=auto`` lets one
more tool run).

A stricter mode chosen later wins over what was allowed earlier (read-only
means nothing writes):

- "Always allow" only answers the question a person would have been asked:
  it turns an ``ask`` into ``run``, never a ``deny``. Under ``read-only`` or
  ``deny`` an always-allowed tool is refused like any other, also when a
  per-tool ``ask`` override would have asked (back in ``ask`` mode, it runs
  without asking again).
- ``%pi approve MODE`` (any mode but ``auto``) drops the per-tool ``auto``
  overrides set before it, and ``read-only`` / ``deny`` also the ``ask``
  ones; those restated in the same command stay.
- A cell's own ``%%pi --approve MODE`` (any mode but ``auto``) ignores
  per-tool ``auto`` overrides (``read-only`` also the ``ask`` ones), and its
  ``deny`` denies every call of that cell: whoever writes it wants this cell
  to run nothing, whatever was clicked earlier in the session.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pi_kernel.tools.approval_rules import (
    READ_ONLY_BUILTINS,
    STRICT_MODES,
    TOOL_MODES,
    PolicyState,
    RuleTool,
    Verdict,
    approval_verdict,
    check_approval_option,
    decide,
    deny_reason,
    inspect_path_reason,
    is_read_only,
    needs_approval,
    override_for,
    secret_reason,
)

__all__ = [
    "READ_ONLY_TOOLS",
    "SESSION_MODES",
    "STRICT_MODES",
    "TOOL_MODES",
    "ApprovalPolicy",
    "PolicyTool",
    "SessionMode",
    "Verdict",
    "approval_verdict",
    "check_approval_option",
    "inspect_path_reason",
    "is_read_only",
    "needs_approval",
]

PolicyTool = RuleTool
"""What the policy reads of a tool (``definition.ToolDefinition`` has it)."""
SessionMode = Literal["ask", "auto", "deny", "read-only"]
SESSION_MODES: tuple[str, ...] = ("ask", "auto", "deny", "read-only")
READ_ONLY_TOOLS = READ_ONLY_BUILTINS
"""Built-in tools that only read (a definition may also declare ``read_only``)."""


@dataclass
class ApprovalPolicy:
    mode: SessionMode = "ask"
    overrides: dict[str, str] = field(default_factory=dict)
    """Tool name → ``ask`` | ``auto`` | ``deny``."""
    always_allowed: set[str] = field(default_factory=set)
    """Tools the person allowed for the session ("always allow")."""

    def state(self, mode: str | None = None) -> PolicyState:
        """The policy as ``approval_rules.decide`` reads it; ``mode``: the cell's ``--approve``."""
        return PolicyState(self.mode, dict(self.overrides), frozenset(self.always_allowed), mode)

    def decide(self, definition: Any, args: Any, name: str | None = None, mode: str | None = None) -> Verdict:
        """``run``, ``ask`` or ``deny`` for a call of ``definition`` with validated ``args``
        (``approval_rules.decide``); ``mode`` replaces the session mode for this decision (a cell's
        ``--approve``); a cell's ``deny`` denies every call (see the module docstring)."""
        return decide(definition, name, args, self.state(mode)).verdict

    def secret_reason(self, definition: Any, args: Any, tool_name: str) -> str | None:
        """Why this call may read secrets (``approval_rules.secret_reason``), or ``None``."""
        return secret_reason(definition, args, tool_name)

    def deny_reason(self, tool_name: str, mode: str | None = None, secret: str | None = None) -> str:
        """What the model is told when the policy (not a person) denied a call."""
        return deny_reason(self.state(mode), tool_name, secret)

    def override_for(self, tool_name: str) -> str | None:
        """The per-tool mode for ``tool_name``: its exact entry, else the strictest matching pattern's."""
        return override_for(self.overrides, tool_name)

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
