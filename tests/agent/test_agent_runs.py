"""``Agent`` runs: hook wiring, state set during a run, prompt/continue rules,
max_turns, should_stop_after_turn, reset, wait_for_idle, failures outside tools.

Ports of pi's ``agent.test.ts`` behaviours, with the in-process ``ScriptedModel``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scripted_model import (
    ScriptedModel,
    echo_tool,
    error_response,
    gated_response,
    make_tool,
    roles,
    text_message,
    tool_call,
    tool_call_message,
)

from pi_kernel.agent import (
    AfterToolCallResult,
    Agent,
    AgentToolResult,
)
from pi_kernel.ai import TextContent, UserMessage

# --------------------------------------------------------------------------- hooks and state during a run


async def test_hooks_and_conversions_are_wired_in_order() -> None:
    order: list[str] = []

    async def execute(*args: Any) -> AgentToolResult:
        order.append("execute")
        return AgentToolResult([TextContent("raw")], terminate=True)

    def prepare(context: Any) -> None:
        order.append("prepare")

    async def transform(messages: list[Any], signal: Any) -> list[Any]:
        order.append("transform")
        return messages

    def convert(messages: list[Any]) -> list[Any]:
        order.append("convert")
        return list(messages)

    async def before(ctx: Any, signal: Any) -> None:
        order.append("before")

    async def after(ctx: Any, signal: Any) -> AfterToolCallResult:
        order.append("after")
        return AfterToolCallResult(content=[TextContent("patched")])

    model = ScriptedModel([tool_call_message(tool_call("t", {"value": 1}))])
    agent = Agent(
        model.model,
        stream_fn=model,
        tools=[make_tool("t", execute)],
        prepare_next_turn=prepare,
        transform_context=transform,
        convert_to_llm=convert,
        before_tool_call=before,
        after_tool_call=after,
    )
    await agent.prompt("go")
    assert order == ["prepare", "transform", "convert", "before", "execute", "after"]
    assert agent.state.messages[-1].text == "patched"


def test_custom_initial_state_and_setters_copy_the_lists() -> None:
    model = ScriptedModel()
    tools = [echo_tool()]
    history = [UserMessage("earlier"), text_message("answer")]
    agent = Agent(model.model, stream_fn=model, system_prompt="You are terse.", tools=tools, messages=history)
    assert (agent.state.system_prompt, agent.state.tools, agent.state.messages) == ("You are terse.", tools, history)
    assert agent.state.tools is not tools and agent.state.messages is not history
    agent.state.tools = tools
    assert agent.state.tools == tools and agent.state.tools is not tools
    messages = [UserMessage("x")]
    agent.state.messages = messages
    assert agent.state.messages == messages and agent.state.messages is not messages
    agent.replace_messages([UserMessage("y")])
    assert agent.state.messages[0].content == "y"


async def test_state_changes_during_a_run_apply_from_the_next_request() -> None:
    added = make_tool("added")

    def first_response(context: Any, options: Any) -> Any:
        agent.state.tools = [*agent.state.tools, added]
        agent.state.system_prompt = "updated"
        return tool_call_message(tool_call("echo", {"value": 1}))

    model = ScriptedModel([first_response, tool_call_message(tool_call("added", {"value": 2})), text_message("done")])
    agent = Agent(model.model, stream_fn=model, tools=[echo_tool()], system_prompt="original")
    await agent.prompt("go")
    assert [r.tool_names for r in model.requests] == [["echo"], ["echo", "added"], ["echo", "added"]]
    assert [r.system_prompt for r in model.requests] == ["original", "updated", "updated"]
    results = [m for m in agent.state.messages if m.role == "tool_result"]
    assert [(r.text, r.is_error) for r in results] == [("echoed: 1", False), ("echoed: 2", False)]


# --------------------------------------------------------------------------- run rules


async def test_prompt_continue_and_reset_refuse_while_a_run_is_active() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    model = ScriptedModel([gated_response(started, release)])
    agent = Agent(model.model, stream_fn=model)
    run = asyncio.create_task(agent.prompt("first"))
    await started.wait()
    assert agent.state.is_streaming and agent.is_running
    with pytest.raises(
        RuntimeError,
        match=r"^Agent is already processing a prompt\. Use steer\(\) or follow_up\(\) to queue messages, "
        r"or wait for completion\.$",
    ):
        await agent.prompt("second")
    with pytest.raises(RuntimeError, match=r"^Agent is already processing\. Wait for completion before continuing\.$"):
        await agent.continue_()
    with pytest.raises(RuntimeError, match=r"^Agent is already processing\. Wait for completion before resetting\.$"):
        agent.reset()
    assert roles(agent) == ["user"]
    release.set()
    await run
    assert roles(agent) == ["user", "assistant"] and not agent.state.is_streaming


async def test_continue_needs_messages_and_a_non_assistant_tail() -> None:
    model = ScriptedModel([text_message("done")])
    agent = Agent(model.model, stream_fn=model)
    with pytest.raises(ValueError, match=r"^No messages to continue from$"):
        await agent.continue_()
    await agent.prompt("hi")
    with pytest.raises(ValueError, match=r"^Cannot continue from message role: assistant$"):
        await agent.continue_()


async def test_continue_after_a_terminating_batch() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": "hi"}, id="c1")), text_message("after tools")])
    agent = Agent(model.model, stream_fn=model, tools=[echo_tool(terminate=True)])
    await agent.prompt("use tool")
    assert roles(agent) == ["user", "assistant", "tool_result"]
    await agent.continue_()
    assert roles(agent) == ["user", "assistant", "tool_result", "assistant"]
    assert agent.state.messages[-1].text == "after tools"


async def test_max_turns_then_continue() -> None:
    calls = [tool_call_message(tool_call("echo", {"value": index})) for index in range(5)]
    model = ScriptedModel([*calls, text_message("done")])
    agent = Agent(model.model, stream_fn=model, tools=[echo_tool()], max_turns=2)
    await agent.prompt("go")
    assert roles(agent) == ["user", "assistant", "tool_result", "assistant", "tool_result"]
    await agent.continue_()  # two more requests at most
    assert model.call_count == 4 and roles(agent)[-2:] == ["assistant", "tool_result"]
    agent.max_turns = None
    await agent.continue_()
    assert model.call_count == 6 and agent.state.messages[-1].text == "done"


async def test_should_stop_after_turn() -> None:
    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": 1})), text_message("never")])
    agent = Agent(model.model, stream_fn=model, tools=[echo_tool()], should_stop_after_turn=lambda turn_end: True)
    await agent.prompt("go")
    assert model.call_count == 1 and roles(agent) == ["user", "assistant", "tool_result"]


async def test_reset_clears_transcript_state_and_queues() -> None:
    model = ScriptedModel([error_response("bad")])
    agent = Agent(model.model, stream_fn=model)
    await agent.prompt("x")
    agent.steer("s")
    agent.follow_up("f")
    assert agent.has_queued_messages() and agent.state.error_message == "bad"
    agent.reset()
    assert agent.state.messages == [] and agent.state.error_message is None
    assert not agent.has_queued_messages()


async def test_wait_for_idle_waits_for_async_agent_end_listeners() -> None:
    barrier = asyncio.Event()
    done = False
    model = ScriptedModel([text_message("ok")])
    agent = Agent(model.model, stream_fn=model)

    async def listener(event: Any) -> None:
        nonlocal done
        if event.type == "agent_end":
            await barrier.wait()
            done = True

    agent.subscribe(listener)
    await agent.wait_for_idle()  # idle: returns at once
    run = asyncio.create_task(agent.prompt("hi"))
    await asyncio.sleep(0.02)
    assert agent.state.is_streaming and not done
    waiter = asyncio.create_task(agent.wait_for_idle())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    barrier.set()
    await waiter
    assert done and not agent.state.is_streaming
    await run


async def test_a_failing_hook_outside_tools_ends_the_run_with_a_failed_message() -> None:
    def transform(messages: list[Any], signal: Any) -> list[Any]:
        raise RuntimeError("context store offline")

    model = ScriptedModel([text_message("never")])
    agent = Agent(model.model, stream_fn=model, transform_context=transform)
    types: list[str] = []
    agent.subscribe(lambda event: types.append(event.type))
    await agent.prompt("x")
    assert types[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    failed = agent.state.messages[-1]
    assert failed.role == "assistant" and failed.stop_reason == "error"
    assert agent.state.error_message == "context store offline"
    assert not agent.state.is_streaming and model.call_count == 0


async def test_prompt_without_a_model_is_refused() -> None:
    agent = Agent()
    with pytest.raises(ValueError, match="No model configured"):
        await agent.prompt("x")
