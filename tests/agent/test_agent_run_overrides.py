"""``Agent.prompt`` / ``continue_`` per-run overrides: ``model``, ``max_turns``, ``before_tool_call``,
``prepare_next_turn`` hold for that run only and never change the agent's own settings."""

from __future__ import annotations

import dataclasses
from typing import Any

from scripted_model import ScriptedModel, echo_tool, roles, text_message, tool_call, tool_call_message

from pi_kernel.agent import Agent, BeforeToolCallResult
from pi_kernel.ai import Context, Model


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
