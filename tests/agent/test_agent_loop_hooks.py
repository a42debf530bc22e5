"""The agent loop's tool hooks.

``before_tool_call`` (block, terminate, edited arguments), errors of ``execute``
and of hooks, ``after_tool_call`` patches.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from scripted_model import (
    EchoParams,
    ScriptedModel,
    echo_tool,
    make_tool,
    run_loop,
    text_message,
    tool_call,
    tool_call_message,
    tool_results,
    user,
)

from pi_kernel.agent import (
    AbortController,
    AfterToolCallContext,
    AfterToolCallResult,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from pi_kernel.ai import TextContent, Usage

# --------------------------------------------------------------------------- before_tool_call


@pytest.mark.parametrize(("reason", "expected"), [("Blocked by policy", "Blocked by policy"), (None, None)])
async def test_before_hook_block(reason: str | None, expected: str | None) -> None:
    executed: list[str] = []
    contexts: list[BeforeToolCallContext] = []
    roles: list[list[str]] = []

    async def before(ctx: BeforeToolCallContext, signal: Any) -> BeforeToolCallResult:
        contexts.append(ctx)
        roles.append([message.role for message in ctx.context.messages])  # the live context, as it is now
        return BeforeToolCallResult(block=True, reason=reason)

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "x"}, id="c1")), text_message("ok")])
    _, messages = await run_loop(model, [user("x")], tools=[echo_tool(executed=executed)], before_tool_call=before)
    result = tool_results(messages)[0]
    assert executed == []
    assert result.is_error
    assert result.text == (expected or "Tool execution was blocked")
    assert model.call_count == 2  # a block alone does not stop the run
    ctx = contexts[0]
    assert isinstance(ctx.args, EchoParams) and ctx.args.value == "x"
    assert ctx.tool_call.id == "c1" and ctx.assistant_message is messages[1]
    assert roles == [["user", "assistant"]]


async def test_before_hook_block_with_terminate_stops_the_run() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "x"})), text_message("should not run")])
    _, messages = await run_loop(
        model,
        [user("x")],
        tools=[echo_tool()],
        before_tool_call=lambda ctx, signal: BeforeToolCallResult(block=True, reason="No", terminate=True),
    )
    assert model.call_count == 1
    assert [message.role for message in messages] == ["user", "assistant", "tool_result"]
    assert messages[-1].text == "No" and messages[-1].is_error


async def test_before_hook_terminate_without_a_block_is_ignored() -> None:
    # As in pi, ``terminate`` rides on a block only; an approved call's own result decides.
    executed: list[str] = []
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "x"})), text_message("done")])
    events, messages = await run_loop(
        model,
        [user("x")],
        tools=[echo_tool(executed=executed)],
        before_tool_call=lambda ctx, signal: BeforeToolCallResult(terminate=True),
    )
    assert executed == ["x"] and model.call_count == 2
    end = next(event for event in events if event.type == "tool_execution_end")
    assert end.result.terminate is False and not end.is_error
    assert messages[-1].text == "done"


async def test_a_mixed_batch_with_one_terminating_block_continues() -> None:
    executed: list[str] = []

    def before(ctx: BeforeToolCallContext, signal: Any) -> BeforeToolCallResult | None:
        return (
            BeforeToolCallResult(block=True, reason="Blocked first", terminate=True)
            if ctx.args.value == "first"
            else None
        )

    model = ScriptedModel(
        [
            tool_call_message(tool_call("echo", {"value": "first"}), tool_call("echo", {"value": "second"})),
            text_message("done"),
        ]
    )
    await run_loop(model, [user("x")], tools=[echo_tool(executed=executed)], before_tool_call=before)
    assert executed == ["second"]
    assert model.call_count == 2


async def test_before_hook_can_approve_edited_arguments_which_are_validated_again() -> None:
    executed: list[str] = []

    def before(ctx: BeforeToolCallContext, signal: Any) -> BeforeToolCallResult:
        if ctx.tool_call.id == "ok":
            return BeforeToolCallResult(args={"value": "edited"})
        return BeforeToolCallResult(args={"value": 42, "extra": True})  # an edit that does not validate

    class StrictParams(BaseModel, extra="forbid"):
        value: str

    tool = make_tool("echo", executed=executed, parameters=StrictParams)
    model = ScriptedModel(
        [
            tool_call_message(
                tool_call("echo", {"value": "orig"}, id="ok"), tool_call("echo", {"value": "o"}, id="bad")
            ),
            text_message("done"),
        ]
    )
    events, messages = await run_loop(model, [user("x")], tools=[tool], before_tool_call=before)
    ok, bad = tool_results(messages)
    assert executed == ["edited"]
    assert ok.text == "echoed: edited" and not ok.is_error
    assert bad.is_error and bad.text.startswith('Validation failed for tool "echo"')
    assert '"extra": true' in bad.text  # the edited arguments are what was checked
    assert next(event for event in events if event.type == "tool_execution_start").args == {"value": "orig"}


async def test_arguments_mutated_in_place_by_the_before_hook_run_without_revalidation() -> None:
    # pi: "should execute mutated beforeToolCall args without revalidation"
    executed: list[Any] = []

    def before(ctx: BeforeToolCallContext, signal: Any) -> None:
        ctx.args.value = 123  # pydantic does not validate on assignment by default

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "hello"})), text_message("done")])
    await run_loop(model, [user("x")], tools=[echo_tool(executed=executed)], before_tool_call=before)
    assert executed == [123]


async def test_a_raising_prepare_arguments_becomes_an_error_result() -> None:
    executed: list[Any] = []

    def prepare(args: Any) -> Any:
        raise ValueError("cannot read this old shape")

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "x"})), text_message("done")])
    _, messages = await run_loop(model, [user("x")], tools=[echo_tool(executed=executed, prepare_arguments=prepare)])
    result = tool_results(messages)[0]
    assert (result.text, result.is_error) == ("cannot read this old shape", True)
    assert executed == [] and model.call_count == 2


# --------------------------------------------------------------------------- execute and after_tool_call


@pytest.mark.parametrize(("error", "text"), [(RuntimeError("disk full"), "disk full"), (KeyError(), "KeyError")])
async def test_a_raising_tool_becomes_an_error_result(error: Exception, text: str) -> None:
    def execute(*args: Any) -> AgentToolResult:
        raise error

    model = ScriptedModel([tool_call_message(tool_call("boom", {"value": "x"})), text_message("noted")])
    _, messages = await run_loop(model, [user("x")], tools=[make_tool("boom", execute)])
    result = tool_results(messages)[0]
    assert result.is_error and result.text == text
    assert model.call_count == 2


async def test_after_hook_patches_field_by_field() -> None:
    tool_usage = Usage(input=1, output=2, total_tokens=3)
    patched_usage = Usage(input=5, output=6, total_tokens=11)
    observed: list[AfterToolCallContext] = []

    def execute(*args: Any) -> AgentToolResult:
        return AgentToolResult([TextContent("raw")], details={"a": 1, "nested": {"x": 1}}, usage=tool_usage)

    def after(ctx: AfterToolCallContext, signal: Any) -> AfterToolCallResult:
        observed.append(ctx)
        if ctx.tool_call.id == "keep":
            return AfterToolCallResult()  # every field None: nothing changes
        return AfterToolCallResult(details={"nested": {"y": 2}}, usage=patched_usage, is_error=True)

    model = ScriptedModel(
        [
            tool_call_message(tool_call("t", {"value": "1"}, id="keep"), tool_call("t", {"value": "2"}, id="patch")),
            text_message("done"),
        ]
    )
    _, messages = await run_loop(model, [user("x")], tools=[make_tool("t", execute)], after_tool_call=after)
    keep, patch = tool_results(messages)
    assert (keep.text, keep.details, keep.usage, keep.is_error) == (
        "raw",
        {"a": 1, "nested": {"x": 1}},
        tool_usage,
        False,
    )
    assert patch.text == "raw"  # content None: kept
    assert patch.details == {"nested": {"y": 2}}  # replaced whole, no deep merge
    assert patch.usage == patched_usage and patch.is_error is True
    assert observed[0].result.usage == tool_usage and observed[0].is_error is False
    assert isinstance(observed[0].args, EchoParams)


async def test_after_hook_content_patch_replaces_the_content() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "secret"})), text_message("done")])
    _, messages = await run_loop(
        model,
        [user("x")],
        tools=[echo_tool()],
        after_tool_call=lambda ctx, signal: AfterToolCallResult(content=[TextContent("[redacted]")]),
    )
    assert tool_results(messages)[0].content == [TextContent("[redacted]")]


async def test_after_hook_sees_the_exception_of_execute_and_may_recover() -> None:
    seen: list[tuple[bool, str]] = []

    def execute(*args: Any) -> AgentToolResult:
        raise ValueError("no such file")

    async def after(ctx: AfterToolCallContext, signal: Any) -> AfterToolCallResult:
        seen.append((ctx.is_error, getattr(ctx.result.content[0], "text", "")))
        return AfterToolCallResult(content=[TextContent("recovered")], is_error=False)

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("done")])
    _, messages = await run_loop(model, [user("x")], tools=[make_tool("t", execute)], after_tool_call=after)
    assert seen == [(True, "no such file")]
    result = tool_results(messages)[0]
    assert (result.text, result.is_error) == ("recovered", False)


@pytest.mark.parametrize("hook", ["before", "after"])
async def test_a_raising_hook_becomes_an_error_result(hook: str) -> None:
    executed: list[str] = []

    async def failing(ctx: Any, signal: Any) -> None:
        raise RuntimeError(f"{hook} hook broke")

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "x"})), text_message("done")])
    hooks: dict[str, Any] = {f"{hook}_tool_call": failing}
    _, messages = await run_loop(model, [user("x")], tools=[echo_tool(executed=executed)], **hooks)
    result = tool_results(messages)[0]
    assert result.is_error and result.text == f"{hook} hook broke"
    assert executed == ([] if hook == "before" else ["x"])
    assert model.call_count == 2


async def test_tool_results_given_as_text_without_content_or_of_a_wrong_type() -> None:
    calls = [tool_call(name, {"value": "x"}) for name in ("text", "empty", "wrong")]
    model = ScriptedModel([tool_call_message(*calls), text_message("ok")])
    tools = [
        make_tool("text", lambda *a: "plain text"),
        make_tool("empty", lambda *a: AgentToolResult(content=None, details={"n": 1})),  # type: ignore[arg-type]
        make_tool("wrong", lambda *a: 42),
    ]
    _, messages = await run_loop(model, [user("x")], tools=tools)
    text, empty, wrong = tool_results(messages)
    assert (text.text, text.is_error) == ("plain text", False)
    assert (empty.content, empty.details, empty.is_error) == ([], {"n": 1}, False)  # pi: an empty array stands in
    assert wrong.is_error and wrong.text == "execute returned int, expected an AgentToolResult"


# --------------------------------------------------------------------------- the run's signal


async def test_hooks_transform_context_and_tools_receive_the_runs_own_signal() -> None:
    controller = AbortController()
    seen: dict[str, Any] = {}

    def transform(messages: list[Any], signal: Any) -> list[Any]:
        seen["transform_context"] = signal
        return messages

    def before(ctx: BeforeToolCallContext, signal: Any) -> None:
        seen["before_tool_call"] = signal

    def after(ctx: AfterToolCallContext, signal: Any) -> None:
        seen["after_tool_call"] = signal

    def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen["execute"] = signal
        return AgentToolResult([TextContent("ok")])

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": "x"})), text_message("done")])
    await run_loop(
        model,
        [user("x")],
        tools=[make_tool("t", execute)],
        signal=controller.signal,
        transform_context=transform,
        before_tool_call=before,
        after_tool_call=after,
    )
    assert sorted(seen) == ["after_tool_call", "before_tool_call", "execute", "transform_context"]
    assert all(signal is controller.signal for signal in seen.values())
