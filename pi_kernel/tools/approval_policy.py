"""The session's approval policy (``ApprovalPolicy``): its state and the magics that change it.

The decision itself is ``approval_rules.decide``, one pure function over an
ordered rule table (its docstring and docs/security.md "Approvals" give the
precedence); ``ApprovalPolicy.decide`` hands it the policy's state.

The session mode says what happens to a risky call: ``ask`` (a person decides),
``auto`` (everything runs), ``deny`` (risky calls are denied, for unattended
runs), ``read-only`` (tools that are not read-only are denied; the others as in
``ask``, so it never allows more than ``ask``). Per-tool overrides
(``bash=ask python=auto``; a name with ``*`` is a pattern, ``time__*=auto``;
an exact name wins over a pattern, among patterns the strictest) win over the
mode, also over ``read-only`` (``%pi approve read-only mytool=auto``).

A stricter mode chosen later wins over what was allowed earlier:
``%pi approve MODE`` (any mode but ``auto``) drops the per-tool ``auto``
overrides set before it, and ``read-only`` / ``deny`` also the ``ask`` ones;
those restated in the same command stay (``apply_spec``). "Always allow"
(``allow_always``) only answers the question a person would have been asked.
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
