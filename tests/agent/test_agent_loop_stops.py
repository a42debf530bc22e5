"""How tool batches end a run: truncated messages, failed messages, ``terminate``."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_model import (
    EchoParams,
    ScriptedModel,
    assistant_message,
    echo_tool,
    event_types,
    make_tool,
    run_loop,
    text_message,
    tool_call,
    tool_call_message,
    tool_results,
    user,
)

from pi_kernel.agent import (
    AfterToolCallResult,
    AgentToolResult,
    truncated_call_text,
)
from pi_kernel.ai import TextContent

# --------------------------------------------------------------------------- truncation and failed messages


async def test_a_truncated_message_runs_none_of_its_tool_calls() -> None:
    hooks: list[str] = []
    executed: list[str] = []

    def prepare(args: Any) -> Any:
        hooks.append("prepare_arguments")
        return args

    truncated = tool_call_message(
        tool_call("echo", {"value": "hel"}, id="c1"), tool_call("missing", {"x": 1}, id="c2"), stop_reason="length"
    )
    model = ScriptedModel([truncated, text_message("done")])
    events, messages = await run_loop(
        model,
        [user("x")],
        tools=[echo_tool(executed=executed, prepare_arguments=prepare)],
        before_tool_call=lambda ctx, signal: hooks.append("before"),
        after_tool_call=lambda ctx, signal: hooks.append("after"),
    )
    assert executed == [] and hooks == []
    results = tool_results(messages)
    assert [result.text for result in results] == [
        'Tool call "echo" was not executed: the response hit the output token limit, so its arguments may be '
        "truncated. Re-issue the tool call with complete arguments.",
        truncated_call_text("missing"),
    ]
    assert all(result.is_error for result in results)
    assert [(e.type, e.tool_call_id) for e in events if e.type.startswith("tool_execution")] == [
        ("tool_execution_start", "c1"),
        ("tool_execution_end", "c1"),
        ("tool_execution_start", "c2"),
        ("tool_execution_end", "c2"),
    ]
    assert model.call_count == 2  # the model is asked again
    assert messages[-1].text == "done"


async def test_a_truncated_text_answer_ends_the_run() -> None:
    model = ScriptedModel([text_message("cut of", stop_reason="length"), text_message("never")])
    _, messages = await run_loop(model, [user("x")])
    assert model.call_count == 1 and messages[-1].stop_reason == "length"


@pytest.mark.parametrize("stop_reason", ["error", "aborted"])
async def test_an_error_or_aborted_message_ends_the_run_without_running_tools(stop_reason: str) -> None:
    executed: list[str] = []
    failed = assistant_message(
        tool_call("echo", {"value": "x"}),
        stop_reason=stop_reason,  # type: ignore[arg-type]
        error_message="upstream 500",
    )
    model = ScriptedModel([failed, text_message("never")])
    events, messages = await run_loop(model, [user("x")], tools=[echo_tool(executed=executed)])
    assert executed == [] and model.call_count == 1
    assert [message.role for message in messages] == ["user", "assistant"]
    assert messages[-1].stop_reason == stop_reason and messages[-1].error_message == "upstream 500"
    assert event_types(events, updates=False)[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    turn_end = next(event for event in events if event.type == "turn_end")
    assert turn_end.tool_results == [] and not any(e.type.startswith("tool_execution") for e in events)


# --------------------------------------------------------------------------- terminate


async def test_terminate_stops_when_every_result_asks() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "a"}), tool_call("echo", {"value": "b"}))])
    events, messages = await run_loop(model, [user("x")], tools=[echo_tool(terminate=True)])
    assert model.call_count == 1
    assert [message.role for message in messages] == ["user", "assistant", "tool_result", "tool_result"]
    assert event_types(events).count("turn_end") == 1


async def test_terminate_is_ignored_when_only_some_results_ask() -> None:
    def execute(tool_call_id: str, params: EchoParams, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(params.value)], terminate=params.value == "first")

    model = ScriptedModel(
        [
            tool_call_message(tool_call("t", {"value": "first"}), tool_call("t", {"value": "second"})),
            text_message("done"),
        ]
    )
    _, messages = await run_loop(model, [user("x")], tools=[make_tool("t", execute)])
    assert model.call_count == 2
    assert [message.role for message in messages] == ["user", "assistant", "tool_result", "tool_result", "assistant"]


async def test_after_hook_can_mark_the_batch_as_terminating() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "a"})), text_message("never")])
    await run_loop(
        model, [user("x")], tools=[echo_tool()], after_tool_call=lambda ctx, signal: AfterToolCallResult(terminate=True)
    )
    assert model.call_count == 1
