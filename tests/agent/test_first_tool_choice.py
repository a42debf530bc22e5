"""``Agent.first_tool_choice`` (``%%pi --tool``): the run's first request forces the tool, later ones do not.

The real provider (``openai`` client, HTTP + SSE) against the scripted server: what is asserted is the
request body each request sent.
"""

from __future__ import annotations

from typing import Any

from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from pydantic import BaseModel

from pi_kernel.agent import Agent, AgentTool, AgentToolResult
from pi_kernel.ai import Model, StreamOptions, TextContent


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
