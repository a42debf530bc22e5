"""A tool's own ``approval`` option: words, a callable judging the validated arguments, checks at definition time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, Field
from scripted_model import ScriptedModel, run_loop, text_message, tool_call, tool_call_message, tool_results, user

from pi_kernel.agent.types import BeforeToolCallContext, BeforeToolCallResult
from pi_kernel.ai import ToolCall, validate_tool_arguments
from pi_kernel.tools import (
    ToolDefinition,
    approval_verdict,
    builtin_tools,
    needs_approval,
    tool,
    wrap_tool_definition,
)
from pi_kernel.tools.definition import DefinedTool


def validated(defn: ToolDefinition, arguments: dict[str, Any]) -> Any:
    """The arguments as the loop hands them to the approval hook: coerced and validated."""
    return validate_tool_arguments(wrap_tool_definition(defn), ToolCall("c1", defn.name, arguments))


def test_plain_function_tool_policy_sees_the_validated_model_of_its_parameters() -> None:
    seen: list[Any] = []

    def only_small(args: Any) -> bool:
        seen.append(args)
        return args.n < 10

    @tool(registry=False, approval=only_small)
    def count(n: int) -> int:
        """Count."""
        return n

    small, large = validated(count, {"n": "3"}), validated(count, {"n": 50})
    assert [approval_verdict(count, small), approval_verdict(count, large)] == ["run", "ask"]
    assert [needs_approval(count, small), needs_approval(count, large)] == [False, True]
    assert seen[0].n == 3  # the string "3" arrived coerced to an int


class DeleteArgs(BaseModel):
    """Delete a file."""

    path: str = Field(description="The file")


def test_model_tool_policy_and_json_schema_policy_get_their_validated_values() -> None:
    @tool(registry=False, approval=lambda args: "auto" if args.path.startswith("/tmp/") else "ask")
    def delete(args: DeleteArgs) -> str:
        return args.path

    assert approval_verdict(delete, validated(delete, {"path": "/tmp/x"})) == "run"
    assert approval_verdict(delete, validated(delete, {"path": "/etc/passwd"})) == "ask"

    by_schema = ToolDefinition(
        name="drop",
        description="Drop a table.",
        parameters={"type": "object", "properties": {"table": {"type": "string"}}, "required": ["table"]},
        execute=lambda *args: "",
        approval=lambda args: "deny" if args["table"] == "users" else True,
    )
    assert approval_verdict(by_schema, validated(by_schema, {"table": "users"})) == "deny"
    assert needs_approval(by_schema, {"table": "users"})
    assert approval_verdict(by_schema, {"table": "scratch"}) == "run"


def judged_by(approval: Any) -> ToolDefinition:
    definition = ToolDefinition(name="t", description="t", parameters={"type": "object"}, execute=lambda *args: "")
    definition.approval = approval  # set after construction: the constructor refuses options that cannot work
    return definition


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        (True, "run"),
        ("auto", "run"),
        (np.bool_(True), "run"),
        (False, "ask"),
        ("ask", "ask"),
        (np.bool_(False), "ask"),
        ("deny", "deny"),
        (None, "ask"),
        ("maybe", "ask"),
        (1, "ask"),
    ],
    ids=repr,
)
def test_callable_answers_map_to_verdicts_and_anything_unclear_asks(answer: Any, verdict: str) -> None:
    defn = judged_by(lambda args: answer)
    assert approval_verdict(defn, {}) == verdict


def test_a_failing_or_async_policy_asks_instead_of_running_or_raising() -> None:
    def broken(args: Any) -> bool:
        raise KeyError("path")

    async def later(args: Any) -> bool:
        return True

    failing = judged_by(broken)
    assert approval_verdict(failing, {}) == "ask"
    # Set by hand (the constructor refuses it): the coroutine is closed, never left un-awaited.
    deferred = judged_by(later)
    assert approval_verdict(deferred, {}) == "ask"
    assert approval_verdict(judged_by("Ask"), {}) == "ask"  # an unknown word asks


def test_definition_rejects_approval_options_that_cannot_work() -> None:
    with pytest.raises(TypeError, match="plain"):
        ToolDefinition(name="t", description="t", parameters={"type": "object"}, execute=print, approval=_async_policy)


async def _async_policy(args: Any) -> bool:
    return True


def test_tool_rejects_approval_options_that_cannot_work() -> None:
    with pytest.raises(ValueError, match=r'Tool "f": approval must be "ask", "auto", "deny" or a function'):

        @tool(registry=False, approval="sometimes")  # type: ignore[call-overload]
        def f() -> str:
            return ""

    with pytest.raises(TypeError, match="got int"):
        tool(registry=False, name="h", approval=3)(lambda: "")  # type: ignore[call-overload]

    async def judge(args: Any) -> bool:
        return True

    with pytest.raises(TypeError, match="plain \\(not async\\) function"):

        @tool(registry=False, approval=judge)
        def g() -> str:
            return ""


def test_defaults_user_tools_run_and_builtins_other_than_read_ask() -> None:
    @tool(registry=False)
    def harmless() -> str:
        """Harmless."""
        return ""

    assert approval_verdict(harmless, validated(harmless, {})) == "run"
    verdicts = {defn.name: approval_verdict(defn, None) for defn in builtin_tools()}
    assert verdicts == {
        "read": "run", "inspect": "run", "cells": "run", "bash": "ask", "edit": "ask", "write": "ask", "python": "ask",
        "edit_cell": "ask", "insert_cells": "ask", "run_cells": "ask", "delete_cells": "ask",
    }  # fmt: skip


async def test_a_before_tool_call_hook_built_on_needs_approval_blocks_only_the_risky_call() -> None:
    ran: list[int] = []

    @tool(registry=False, approval=lambda args: args.n < 10)
    def count(n: int) -> str:
        """Count."""
        ran.append(n)
        return f"counted {n}"

    def gate(ctx: BeforeToolCallContext, signal: Any = None) -> BeforeToolCallResult | None:
        assert isinstance(ctx.args, BaseModel)  # the validated model, not the raw JSON
        definition = next(t.definition for t in tools if t.name == ctx.tool_call.name)
        assert definition is not None
        if needs_approval(definition, ctx.args):
            return BeforeToolCallResult(block=True, reason="needs a person")
        return None

    tools: list[DefinedTool] = [wrap_tool_definition(count)]
    calls = [tool_call("count", {"n": "5"}), tool_call("count", {"n": 500})]
    model = ScriptedModel([tool_call_message(*calls), text_message("done")])
    _events, messages = await run_loop(model, [user("go")], tools=tools, before_tool_call=gate)
    small, large = tool_results(messages)
    assert (small.is_error, small.content[0].text) == (False, "counted 5")  # type: ignore[union-attr]
    assert (large.is_error, large.content[0].text) == (True, "needs a person")  # type: ignore[union-attr]
    assert ran == [5]
