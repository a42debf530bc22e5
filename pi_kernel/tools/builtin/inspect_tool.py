"""The ``inspect`` tool: the agent looks at the notebook's variables without running code.

Without a name it lists the user's variables (type, shape or length, a
one-line preview); with a name or dotted attribute path (``df.columns``,
``model.coef_``) it gives a bounded, type-aware description (see
``describe``). It only reads, so it never asks for approval and runs in the
``read-only`` approval mode.

Where it looks: ``ctx.namespace`` (the kernel's user namespace); the host
sets ``ctx.hidden_names`` (names to leave out, such as IPython's own) and
``ctx.describe_limit`` (characters per description).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.tools.builtin.attribute_path import RefusedPath, RunsUserCode, resolve
from pi_kernel.tools.builtin.describe import (
    CallTimeout,
    Describer,
    SafeCaller,
    close_matches,
    describe_limit,
    list_variables,
)
from pi_kernel.tools.definition import ToolContext, ToolDefinition


class InspectParams(BaseModel):
    name: str | None = Field(
        default=None,
        description="A variable or dotted attribute path (df, df.columns, model.coef_); leave it out to list the "
        "notebook's variables.",
    )


def hidden_names(ctx: ToolContext) -> set[str]:
    return set(ctx.hidden_names or ())


def run_inspect(name: str | None, namespace: dict[str, Any], *, limit: int, hidden: set[str]) -> str:
    """The text ``inspect`` returns; ``ValueError`` (the tool's error result) for an unknown or bad name."""
    caller = SafeCaller()
    try:
        if not name or not name.strip():
            return list_variables(namespace, caller, limit, hidden)
        path = name.strip()
        head = path.split(".")[0]
        if head in hidden:
            raise ValueError(
                f"{head!r} is the kernel's own (IPython's input and output history and the like), not a notebook "
                "variable; inspect without a name lists the variables, cells shows what ran."
            )
        try:
            value = caller.call(lambda: resolve(namespace, path, hidden))
        except KeyError:
            matches = close_matches(head, namespace, hidden)
            hint = f" Close matches: {', '.join(matches)}." if matches else " Call inspect without a name to list them."
            raise ValueError(f"No variable named {head!r} in the notebook.{hint}") from None
        except CallTimeout as error:
            raise ValueError(f"Reading {path} {error}.") from None
        except (RefusedPath, RunsUserCode) as error:
            raise ValueError(str(error)) from None
        except (AttributeError, ValueError) as error:
            raise ValueError(str(error)) from None
        except Exception as error:  # noqa: BLE001 - a property that raises
            raise ValueError(f"Reading {path} failed: {type(error).__name__}: {error}") from None
        return Describer(caller, limit).describe(path, value)
    finally:
        caller.close()


def create_inspect_tool() -> ToolDefinition:
    """The ``inspect`` tool (read-only, runs without asking)."""

    def execute(
        tool_call_id: str,
        params: InspectParams,
        signal: AbortSignal | None,
        on_update: Callable[[AgentToolResult], None] | None,
        ctx: ToolContext,
    ) -> AgentToolResult:
        namespace = ctx.namespace if ctx.namespace is not None else {}
        text = run_inspect(params.name, namespace, limit=describe_limit(ctx), hidden=hidden_names(ctx))
        return AgentToolResult([TextContent(text)], details={"name": params.name})

    return ToolDefinition(
        origin="builtin",
        secret_arguments={"name": "attribute"},  # what of a call may name secrets (approval.secret_reason)
        name="inspect",
        label="inspect",
        description=(
            "Look at the notebook's live variables without running code. Without a name: every user variable with "
            "its type, shape or length and a preview. With a name or dotted attribute path (df, df.columns, "
            "model.coef_; no calls or indexing): a short description (DataFrame columns, dtypes, nulls, head and "
            "numeric summary; array shape and stats; signature and docstring of functions)."
        ),
        parameters=InspectParams,
        execute=execute,
        prompt_snippet="Look at the notebook's variables (list them, or describe one: columns, dtypes, shape)",
        prompt_guidelines=("Use inspect before python to learn what a variable holds (it needs no approval)",),
        approval="auto",
        read_only=True,
    )
