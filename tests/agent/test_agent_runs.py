"""``Agent`` runs: hook wiring, state set during a run, prompt/continue rules,
max_turns, should_stop_after_turn, reset, wait_for_idle, failures outside tools.

Ports of pi's ``agent.test.ts`` behaviours, with the in-process ``ScriptedModel``.

``Agent.prompt`` / ``continue_`` per-run overrides: ``model``, ``max_turns``, ``before_tool_call``,
``prepare_next_turn`` hold for that run only and never change the agent's own settings.

``Agent.first_tool_choice`` (``%%pi --tool``): the run's first request forces the tool, later ones do not.

The real provider (``openai`` client, HTTP + SSE) against the scripted server: what is asserted is the
request body each request sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from pydantic import BaseModel
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
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
)
from pi_kernel.ai import Context, Model, StreamOptions, TextContent, UserMessage

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


# --------------------------------------------------------------------------- agent run overrides


def recording(scripted: ScriptedModel, seen: list[str]) -> Any:
    """The scripted model as a stream function that notes which model each request went to."""

    def stream(model: Model, context: Context, options: Any = None) -> Any:
        seen.append(model.id)
        return scripted(model, context, options)

    return stream


async def test_a_run_uses_the_model_it_is_given_and_the_agent_keeps_its_own() -> None:
    scripted = ScriptedModel([text_message("one"), text_message("two"), text_message("three")])
    other = dataclasses.replace(scripted.model, id="other-model")
    seen: list[str] = []
    agent = Agent(scripted.model, stream_fn=recording(scripted, seen))
    await agent.prompt("first", model=other)
    assert agent.state.model is scripted.model  # never swapped
    await agent.prompt("second")
    await agent.prompt("third", model=other)
    assert seen == ["other-model", scripted.model.id, "other-model"]


async def test_max_turns_for_one_run_only() -> None:
    calls = [tool_call_message(tool_call("echo", {"value": index})) for index in range(4)]
    scripted = ScriptedModel([*calls, text_message("done")])
    agent = Agent(scripted.model, stream_fn=scripted, tools=[echo_tool()])
    await agent.prompt("go", max_turns=1)
    assert scripted.call_count == 1 and agent.max_turns is None
    assert roles(agent) == ["user", "assistant", "tool_result"]
    await agent.continue_(max_turns=2)
    assert scripted.call_count == 3
    await agent.continue_()  # the agent's own: no limit
    assert scripted.call_count == 5 and agent.state.messages[-1].text == "done"


async def test_hooks_given_to_a_run_replace_the_agents_for_that_run() -> None:
    scripted = ScriptedModel(
        [
            tool_call_message(tool_call("echo", {"value": 1})),
            text_message("after a block"),
            tool_call_message(tool_call("echo", {"value": 2})),
            text_message("after a run"),
        ]
    )
    prepared: list[str] = []

    def own_prepare(context: Context) -> None:
        prepared.append("own")

    def run_prepare(context: Context) -> None:
        prepared.append("run")
        context.system_prompt = "for this run"

    def block(ctx: Any, signal: Any = None) -> BeforeToolCallResult:
        return BeforeToolCallResult(block=True, reason="blocked for this run")

    agent = Agent(scripted.model, stream_fn=scripted, tools=[echo_tool()], prepare_next_turn=own_prepare)
    await agent.prompt("go", before_tool_call=block, prepare_next_turn=run_prepare)
    assert agent.state.messages[2].text == "blocked for this run"  # the tool result
    assert prepared == ["run", "run"] and scripted.requests[0].system_prompt == "for this run"
    assert agent.before_tool_call is None and agent.prepare_next_turn is own_prepare
    await agent.prompt("again")
    assert agent.state.messages[-2].text != "blocked for this run"  # the echo ran
    assert prepared[2:] == ["own", "own"] and scripted.requests[2].system_prompt == ""


# --------------------------------------------------------------------------- first tool choice


class CityParams(BaseModel):
    city: str


def weather_tool() -> AgentTool:
    def execute(tool_call_id: str, params: CityParams, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(f"{params.city}: 21 °C")])

    return AgentTool(name="weather", description="The weather in a city", parameters=CityParams, execute=execute)


def agent_for(server: FakeOpenAI, **options: Any) -> Agent:
    return Agent(Model("fake-model", provider="llamacpp", base_url=server.base_url), tools=[weather_tool()], **options)


def script(server: FakeOpenAI) -> None:
    server.enqueue(
        tool_call_chunks([{"name": "weather", "arguments": {"city": "Oslo"}, "id": "call_w"}]),
        text_chunks("Oslo: 21 °C."),
    )


async def test_a_named_tool_is_forced_on_the_first_request_only(fake_openai: FakeOpenAI) -> None:
    script(fake_openai)
    agent = agent_for(fake_openai)
    agent.first_tool_choice = "weather"

    await agent.prompt("How warm is Oslo?")

    first, second = fake_openai.bodies
    assert first["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert "tool_choice" not in second  # the model answers freely after the result
    assert agent.state.messages[-1].text == "Oslo: 21 °C."


async def test_any_tool_is_required_and_later_requests_keep_the_agents_own_choice(fake_openai: FakeOpenAI) -> None:
    script(fake_openai)
    agent = agent_for(fake_openai, stream_options=StreamOptions(tool_choice="auto", temperature=0))
    agent.first_tool_choice = "required"

    await agent.prompt("How warm is Oslo?")

    first, second = fake_openai.bodies
    assert first["tool_choice"] == "required" and first["temperature"] == 0
    assert second["tool_choice"] == "auto"


async def test_each_run_forces_its_first_request_again(fake_openai: FakeOpenAI) -> None:
    script(fake_openai)
    script(fake_openai)
    agent = agent_for(fake_openai)
    agent.first_tool_choice = "weather"

    await agent.prompt("How warm is Oslo?")
    await agent.prompt("And now?")

    forced = ["tool_choice" in body for body in fake_openai.bodies]
    assert forced == [True, False, True, False]


async def test_a_runs_own_tool_choice_forces_that_run_only(fake_openai: FakeOpenAI) -> None:
    """``prompt(..., first_tool_choice=...)`` (what a ``%%pi --tool`` cell passes): the agent's own stays unset."""
    script(fake_openai)
    script(fake_openai)
    agent = agent_for(fake_openai)

    await agent.prompt("How warm is Oslo?", first_tool_choice="weather")
    await agent.prompt("And now?")

    assert agent.first_tool_choice is None
    forced = ["tool_choice" in body for body in fake_openai.bodies]
    assert forced == [True, False, False, False]
