"""Which tool calls run, which ask a person, which are denied: the tool's own rule and the session's policy.

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
origin, so a notebook tool that happens to be called ``read`` is not trusted
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

import fnmatch
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from pi_kernel.agent.invoke import is_async_callable
from pi_kernel.ai.sanitize import map_strings
from pi_kernel.tools.secret_paths import secret_mention_reason, secret_path_reason


class PolicyTool(Protocol):
    """What the policy reads of a tool (``definition.ToolDefinition`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def approval(self) -> object:
        """The tool's own approval option (``definition.ToolApproval``)."""

    @property
    def execute(self) -> Callable[..., Any]: ...

    @property
    def read_only(self) -> bool | None: ...


Verdict = Literal["run", "ask", "deny"]
SessionMode = Literal["ask", "auto", "deny", "read-only"]
SESSION_MODES: tuple[str, ...] = ("ask", "auto", "deny", "read-only")
TOOL_MODES: tuple[str, ...] = ("ask", "auto", "deny")
"""What a per-tool override may say, and a tool's own ``approval`` as a word."""
_STRICTNESS = {"auto": 0, "ask": 1, "deny": 2}
"""Among the patterns matching a tool, the strictest mode wins."""
STRICT_MODES: tuple[str, ...] = ("deny", "read-only")
"""Modes that refuse calls by themselves: an earlier ``ask`` override or "always allow" never lifts that."""

# -- the tool's own rule --------------------------------------------------------------------------

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


def approval_verdict(definition: PolicyTool, args: Any) -> Verdict:
    """``run``, ``ask`` or ``deny`` for a call of ``definition`` with validated ``args``."""
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


def needs_approval(definition: PolicyTool, args: Any) -> bool:
    """Whether a call of ``definition`` with validated ``args`` may not simply run (verdict ``ask`` or ``deny``)."""
    return approval_verdict(definition, args) != "run"


def _is_boolean(value: Any) -> bool:
    # numpy's bool (``numpy.bool_``) is what ``args.x > threshold`` gives for numpy numbers.
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


# -- the session's policy -------------------------------------------------------------------------

READ_ONLY_TOOLS = frozenset({"read"})
"""Built-in tools that only read (a definition may also declare ``read_only``)."""
BUILTIN_PACKAGE = "pi_kernel.tools.builtin"
MCP_PACKAGE = "pi_kernel.tools.mcp"
SCANNED_TOOLS = {"bash": "command", "python": "code"}
"""Built-in tools whose text argument is scanned for secrets (``secret_paths.secret_mention_reason``)."""


CELL_CODE_TOOLS = frozenset({"edit_cell", "insert_cells"})
"""Built-in tools that write code into cells (``source``, ``edits[].new_text``, ``cells[].source``): that code
is scanned like ``python``'s, since ``run_cells`` runs it next (``run_cells`` itself is scanned by the approval
gate, which reads the cells' sources from the notebook)."""


def cell_code_reason(sources: list[str]) -> str | None:
    """Why code that will run in cells (``python``-like) may read secrets, or ``None``."""
    for source in sources:
        reason = secret_mention_reason(source)
        if reason is not None:
            return reason
    return None


def _cell_texts(values: dict[str, Any]) -> list[str]:
    texts = [values.get("source")]
    texts += [edit.get("new_text") for edit in values.get("edits") or [] if isinstance(edit, dict)]
    texts += [cell.get("source") for cell in values.get("cells") or [] if isinstance(cell, dict)]
    return [text for text in texts if isinstance(text, str)]


def inspect_path_reason(name: Any) -> str | None:
    """Why an ``inspect`` of this dotted path may read the environment (``os.environ``), or ``None``."""
    if not isinstance(name, str):
        return None
    parts = set(name.strip().split("."))
    if parts & {"environ", "getenv", "__globals__", "__dict__", "__builtins__"}:
        return "it may read the environment, which holds the API keys"
    return None


def _definition_verdict(definition: PolicyTool | None, args: Any) -> Verdict:
    """What the tool itself asks for: ``run`` (auto), ``ask`` or ``deny`` (see ``approval_verdict``)."""
    if definition is None:
        return "ask"
    return approval_verdict(definition, args)


def _strings(value: Any) -> list[str]:
    """Every string in ``value`` (nested dicts and lists, keys too), found by ``sanitize.map_strings``."""
    found: list[str] = []

    def note(text: str) -> str:
        found.append(text)
        return text

    map_strings(value, note, note)
    return found


def _is_mcp(definition: PolicyTool | None) -> bool:
    """Whether ``definition`` is a tool of an MCP server (``tools.mcp``, by the module of its ``execute``)."""
    origin = getattr(definition.execute, "__module__", "") if definition is not None else ""
    return bool(origin) and (origin == MCP_PACKAGE or origin.startswith(MCP_PACKAGE + "."))


def _is_builtin(definition: PolicyTool | None) -> bool:
    """Whether ``definition`` is one of pi-kernel's built-in tools (by the module of its ``execute``)."""
    if definition is None:
        return False
    origin = getattr(definition.execute, "__module__", "") or ""
    return origin == BUILTIN_PACKAGE or origin.startswith(BUILTIN_PACKAGE + ".")


def is_read_only(definition: PolicyTool | None, name: str) -> bool:
    """Whether calls of this tool only read: its declared ``read_only``, else a built-in read-only tool."""
    declared = getattr(definition, "read_only", None)
    if declared is not None:
        return bool(declared)
    return name in READ_ONLY_TOOLS and _is_builtin(definition)


@dataclass
class ApprovalPolicy:
    mode: SessionMode = "ask"
    overrides: dict[str, str] = field(default_factory=dict)
    """Tool name → ``ask`` | ``auto`` | ``deny``."""
    always_allowed: set[str] = field(default_factory=set)
    """Tools the person allowed for the session ("always allow")."""

    def decide(
        self, definition: PolicyTool | None, args: Any, name: str | None = None, mode: str | None = None
    ) -> Verdict:
        """``run``, ``ask`` or ``deny`` for a call of ``definition`` with validated ``args``.

        ``mode`` replaces the session mode for this decision (a cell's ``--approve``);
        a cell's ``deny`` denies every call (see the module docstring).
        """
        if mode == "deny":
            return "deny"
        tool_name = name or (definition.name if definition is not None else "")
        verdict = self._verdict(definition, args, tool_name, mode)
        if verdict != "deny" and self.secret_reason(definition, args, tool_name) is not None:
            return "deny" if (mode or self.mode) == "deny" else "ask"  # secrets: never unseen, whatever allowed it
        allowed = tool_name in self.always_allowed and not self._mode_refuses(definition, tool_name, mode)
        if verdict == "ask" and allowed:
            return "run"  # "always allow" answers the question, it never lifts a deny nor a stricter mode
        return verdict

    def _mode_refuses(self, definition: PolicyTool | None, tool_name: str, cell_mode: str | None) -> bool:
        """Whether the effective mode alone refuses this tool: ``deny``, or ``read-only`` for a writing tool."""
        mode = cell_mode or self.mode
        return mode == "deny" or (mode == "read-only" and not is_read_only(definition, tool_name))

    def _verdict(self, definition: PolicyTool | None, args: Any, tool_name: str, cell_mode: str | None) -> Verdict:
        """The decision before "always allow" is applied."""
        mode = cell_mode or self.mode
        override = self.override_for(tool_name)
        if override == "auto" and cell_mode not in (None, "auto"):
            override = None  # a cell's stricter mode wins over an earlier session-wide auto
        if override == "ask" and cell_mode in STRICT_MODES:
            override = None  # ... and over a session-wide ask (asking could still let it write)
        if override is not None:
            return "run" if override == "auto" else cast(Verdict, override)  # the rest of TOOL_MODES: ask, deny
        if mode == "auto":
            return "run"
        if mode == "read-only" and not is_read_only(definition, tool_name):
            return "deny"
        verdict = _definition_verdict(definition, args)
        if verdict == "ask" and mode == "deny":
            return "deny"
        return verdict

    def secret_reason(self, definition: PolicyTool | None, args: Any, tool_name: str) -> str | None:
        """Why this call may read secrets (see ``secret_paths``), or ``None``.

        ``bash`` / ``python`` (built-in) are judged by their command or code text; any other tool by every
        string in its arguments, however nested (a list of paths, an object holding one): one that names a
        file holding secrets asks; for an MCP tool (whose strings may be commands run elsewhere) one that
        reads the environment or names such a file in a command asks too.
        """
        values = args.model_dump() if hasattr(args, "model_dump") else args
        if not isinstance(values, dict):
            return None
        builtin = _is_builtin(definition)
        if tool_name in SCANNED_TOOLS and builtin:
            return secret_mention_reason(values.get(SCANNED_TOOLS[tool_name]))
        if tool_name == "inspect" and builtin:
            return inspect_path_reason(values.get("name"))
        if tool_name in CELL_CODE_TOOLS and builtin:
            reason = cell_code_reason(_cell_texts(values))
            if reason is not None:
                return reason
        commands = _is_mcp(definition)
        for text in _strings(values):
            reason = secret_path_reason(text) or (secret_mention_reason(text) if commands else None)
            if reason is not None:
                return reason
        return None

    def deny_reason(self, tool_name: str, mode: str | None = None, secret: str | None = None) -> str:
        """What the model is told when the policy (not a person) denied a call."""
        if secret is not None and mode != "deny" and (mode or self.mode) == "deny":
            return f'Tool "{tool_name}" was not run: {secret}, and this session denies such calls (approval: deny).'
        if mode == "deny":
            return f'Tool "{tool_name}" was not run: this cell denies every tool call (%%pi --approve deny).'
        if self.override_for(tool_name) == "deny":
            return f'Tool "{tool_name}" is disabled by the approval policy of this session (deny).'
        if (mode or self.mode) == "read-only":
            return f'Tool "{tool_name}" was not run: this session is read-only.'
        if (mode or self.mode) == "deny":
            return f'Tool "{tool_name}" needs approval and this session denies such calls (approval policy: deny).'
        return f'Tool "{tool_name}" refused this call: its own approval rule denies it.'

    def override_for(self, tool_name: str) -> str | None:
        """The per-tool mode for ``tool_name``: its exact entry, else the strictest matching pattern's."""
        exact = self.overrides.get(tool_name)
        if exact is not None:
            return exact
        modes = [mode for key, mode in self.overrides.items() if "*" in key and fnmatch.fnmatchcase(tool_name, key)]
        return max(modes, key=_STRICTNESS.__getitem__) if modes else None

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
