"""What a tool itself says about running a call: its ``approval`` option, evaluated.

``ToolDefinition.approval`` (``@tool(approval=...)``) is ``"auto"`` (run at
once), ``"ask"`` (a person approves each call) or a callable that decides
from the call's *validated* arguments (a pydantic model instance for a model
or ``@tool`` function, a dict for a JSON-schema tool)::

    @tool(approval=lambda args: "auto" if args.path.startswith("/tmp/") else "ask")
    def delete(path: str) -> str: ...

The callable answers ``True`` / ``"auto"`` (run), ``False`` / ``"ask"`` (ask
a person) or ``"deny"`` (refuse). Anything else — another value, an
exception, an awaitable — is read as ``"ask"``: a policy that cannot decide
must not let a risky call run unseen, nor break the turn.

This module judges the tool only; the session's mode, per-tool overrides and
"always allow" are layered on top by ``approval_policy.ApprovalPolicy``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Literal

from pi_kernel.agent.invoke import is_async_callable

if TYPE_CHECKING:
    from pi_kernel.tools.definition import ToolDefinition

ToolVerdict = Literal["run", "ask", "deny"]
APPROVAL_WORDS: tuple[str, ...] = ("ask", "auto", "deny")
"""The non-callable values ``approval`` accepts."""
_ANSWERS: dict[str, ToolVerdict] = {"auto": "run", "ask": "ask", "deny": "deny"}


def check_approval_option(approval: Any, tool_name: str) -> None:
    """Raise a clear error for an ``approval`` option that cannot work (when the tool is defined)."""
    if isinstance(approval, str):
        if approval not in APPROVAL_WORDS:
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


def approval_verdict(definition: ToolDefinition, args: Any) -> ToolVerdict:
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


def needs_approval(definition: ToolDefinition, args: Any) -> bool:
    """Whether a call of ``definition`` with validated ``args`` may not simply run (verdict ``ask`` or ``deny``)."""
    return approval_verdict(definition, args) != "run"


def _is_boolean(value: Any) -> bool:
    # numpy's bool (``numpy.bool_``) is what ``args.x > threshold`` gives for numpy numbers.
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))
