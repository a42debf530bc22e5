"""Preflight: tool lookup, argument validation, ``prepare_arguments``; ``AgentTool`` itself."""

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
    AgentTool,
    AgentToolResult,
)
from pi_kernel.ai import TextContent

# --------------------------------------------------------------------------- preflight


async def test_unknown_tool_gets_an_error_result_listing_the_available_tools() -> None:
    model = ScriptedModel([tool_call_message(tool_call("nope", {}, id="c1")), text_message("sorry")])
    events, messages = await run_loop(model, [user("x")], tools=[echo_tool(), make_tool("read")])
    result = messages[2]
    assert result.is_error
    assert result.text.startswith("Tool nope not found")
    assert "echo" in result.text and "read" in result.text
    assert model.requests[1].messages[-1].text == result.text  # the model reads it
    end = next(event for event in events if event.type == "tool_execution_end")
    assert end.is_error and end.result.content[0].text == result.text


async def test_unknown_tool_when_there_are_no_tools_says_so() -> None:
    model = ScriptedModel([tool_call_message(tool_call("nope", {})), text_message("sorry")])
    _, messages = await run_loop(model, [user("x")], tools=[])
    result = tool_results(messages)[0]
    assert (result.text, result.is_error) == ("Tool nope not found. No tools are available.", True)


async def test_validation_error_reaches_the_model_which_fixes_the_call() -> None:
    class CountParams(BaseModel):
        count: int

    calls: list[int] = []

    def execute(tool_call_id: str, params: CountParams, signal: Any, on_update: Any) -> AgentToolResult:
        calls.append(params.count)
        return AgentToolResult([TextContent(f"counted {params.count}")])

    tool = AgentTool(name="count", description="count", parameters=CountParams, execute=execute)
    model = ScriptedModel(
        [
            tool_call_message(tool_call("count", {"count": "many"}, id="bad")),
            tool_call_message(tool_call("count", {"count": "3"}, id="good")),
            text_message("done"),
        ]
    )
    _, messages = await run_loop(model, [user("count")], tools=[tool])

    first, second = tool_results(messages)
    assert first.is_error
    assert first.text.startswith('Validation failed for tool "count":\n  - count: ')
    assert '"count": "many"' in first.text  # the received arguments are shown
    assert model.requests[1].messages[-1] is first
    assert not second.is_error and second.text == "counted 3"
    assert calls == [3]  # "3" coerced; the bad call never ran


async def test_prepare_arguments_rewrites_an_old_argument_shape() -> None:
    class Edit(BaseModel):
        old_text: str
        new_text: str

    class EditParams(BaseModel):
        edits: list[Edit]

    executed: list[Any] = []

    def prepare(args: Any) -> Any:
        if isinstance(args, dict) and "old_text" in args:
            return {"edits": [{"old_text": args["old_text"], "new_text": args["new_text"]}]}
        return args

    def execute(tool_call_id: str, params: EditParams, signal: Any, on_update: Any) -> AgentToolResult:
        executed.append([edit.model_dump() for edit in params.edits])
        return AgentToolResult([TextContent(f"edited {len(params.edits)}")])

    tool = AgentTool(name="edit", description="e", parameters=EditParams, prepare_arguments=prepare, execute=execute)
    model = ScriptedModel(
        [tool_call_message(tool_call("edit", {"old_text": "before", "new_text": "after"})), text_message("done")]
    )
    events, messages = await run_loop(model, [user("edit")], tools=[tool])
    assert executed == [[{"old_text": "before", "new_text": "after"}]]
    # The event and the transcript keep what the model sent.
    assert next(event for event in events if event.type == "tool_execution_start").args == {
        "old_text": "before",
        "new_text": "after",
    }
    assert messages[1].tool_calls[0].arguments == {"old_text": "before", "new_text": "after"}


async def test_prepare_arguments_returning_none_keeps_the_arguments() -> None:
    seen: list[Any] = []

    def prepare(args: Any) -> None:
        seen.append(args)

    tool = echo_tool(prepare_arguments=prepare)
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "kept"})), text_message("done")])
    _, messages = await run_loop(model, [user("x")], tools=[tool])
    assert seen == [{"value": "kept"}]
    assert tool_results(messages)[0].text == "echoed: kept"


# --------------------------------------------------------------------------- AgentTool


class Counter(AgentTool):
    """A tool defined by subclassing: ``execute`` is a method, not a field."""

    def execute(self, tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(f"{self.name} counted {params.value}")])


async def test_a_subclass_with_an_execute_method_runs() -> None:
    counter = Counter(name="count", description="Counts", parameters=EchoParams)
    model = ScriptedModel([tool_call_message(tool_call("count", {"value": 3})), text_message("ok")])
    _, messages = await run_loop(model, [user("x")], tools=[counter])
    assert (tool_results(messages)[0].text, tool_results(messages)[0].is_error) == ("count counted 3", False)


def test_an_agent_tool_without_execute_is_refused() -> None:
    with pytest.raises(TypeError, match='AgentTool "idle" needs an execute function'):
        AgentTool(name="idle", description="Does nothing", parameters=EchoParams)


def test_label_defaults_to_the_name() -> None:
    assert make_tool("read").label == "read"
    assert make_tool("read", label="Read file").label == "Read file"
