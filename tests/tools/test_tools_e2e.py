"""Tools defined as in a notebook, round-tripped through the real ``Agent`` and the fake OpenAI server.

The registry rebuilds both channels every turn: the request's ``tools`` array
carries each tool's schema, the system prompt carries the snippets; the model
(scripted) calls the tools, they run, and their results go back in the next
request as ``role: tool`` messages before the final answer arrives.

Review of issue #4: behaviours the other tool tests leave open.

Render hooks from ``@tool``; a tool's exception through the loop; ``write``
holding the file queue; 100 parallel edits through symlink aliases; the
channels rebuilt before every request of one prompt; ``bash``'s non-zero exit
with truncated output.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any, Literal

import pytest
from builtin_helpers import call_tool, make_ctx
from fake_openai import FakeOpenAI, ToolCallSpec, text_chunks, tool_call_chunks
from pydantic import BaseModel, Field
from scripted_model import ScriptedModel, run_loop, text_message, tool_call, tool_call_message, tool_results, user

from pi_kernel.agent import Agent
from pi_kernel.ai import Model, ToolResultMessage
from pi_kernel.tools import PromptConfig, ToolRegistry, ToolRetry, tool, wrap_tool_definition
from pi_kernel.tools.builtin import create_bash_tool, create_edit_tool, create_write_tool
from pi_kernel.tools.file_queue import hold_file_mutation_queue


class CityQuery(BaseModel):
    """Look up facts about a city."""

    name: str = Field(description="The city's name, e.g. Paris")
    fields: list[Literal["population", "country"]] = Field(
        default_factory=lambda: ["population"], description="Which facts to return"
    )


def notebook_tools(registry: ToolRegistry) -> None:
    """What a user's cells would define."""

    @tool(registry=registry, snippet="Facts about a city (population, country)")
    def lookup_city(query: CityQuery) -> dict[str, Any]:
        facts = {"Paris": {"population": 2_102_650, "country": "France"}}[query.name]
        return {field: facts[field] for field in query.fields}

    @tool(registry=registry, snippet="Convert Celsius to Fahrenheit or Kelvin", guidelines="Convert before answering")
    def convert_temperature(celsius: float, unit: Literal["f", "k"] = "f") -> str:
        """Convert a temperature.

        Args:
            celsius: Degrees Celsius.
            unit: Target unit, f or k.
        """
        return f"{celsius * 9 / 5 + 32:.1f} F" if unit == "f" else f"{celsius + 273.15:.2f} K"

    @tool(registry=registry, snippet="Never offered: disabled")
    def secret() -> str:
        """Disabled tool."""
        return "should not run"

    registry.disable("secret")


def agent_for(server: FakeOpenAI, registry: ToolRegistry) -> Agent:
    model = Model("fake-model", provider="llamacpp", base_url=server.base_url)
    return Agent(model, prepare_next_turn=registry.prepare_next_turn)


def api_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["function"]["name"]: entry["function"] for entry in body["tools"]}


def system_text(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] in ("system", "developer")
    return first["content"]


async def test_model_and_function_tools_round_trip_through_the_agent(fake_openai: FakeOpenAI) -> None:
    registry = ToolRegistry(prompt=PromptConfig(cwd="/notebooks", date="2025-05-06"))
    notebook_tools(registry)
    fake_openai.enqueue(
        tool_call_chunks(
            [
                ToolCallSpec("lookup_city", {"name": "Paris", "fields": ["population", "country"]}, "call_city"),
                ToolCallSpec("convert_temperature", {"celsius": 21}, "call_temp"),
            ]
        ),
        text_chunks("Paris, France: 2,102,650 people; it is 69.8 F."),
    )
    agent = agent_for(fake_openai, registry)
    await agent.prompt("Tell me about Paris and convert 21 C.")

    first, second = fake_openai.bodies
    # The structured channel: exactly the active tools, with the schemas the registry holds.
    tools = api_tools(first)
    assert list(tools) == ["lookup_city", "convert_temperature"]
    wrapped = {t.name: t for t in registry.active_tools()}
    for name, function in tools.items():
        assert function["parameters"] == wrapped[name].json_schema()
    assert tools["lookup_city"]["description"] == "Look up facts about a city."
    assert tools["lookup_city"]["parameters"]["properties"]["name"]["description"] == "The city's name, e.g. Paris"
    assert tools["convert_temperature"]["description"] == "Convert a temperature."
    assert tools["convert_temperature"]["parameters"]["properties"]["celsius"] == {
        "type": "number",
        "description": "Degrees Celsius.",
    }
    assert "snippet" not in json.dumps(first["tools"]) and "Facts about a city" not in json.dumps(first["tools"])

    # The text channel: snippets and guidelines of the active tools only.
    prompt = system_text(first)
    assert (
        "Available tools:\n"
        "- lookup_city: Facts about a city (population, country)\n"
        "- convert_temperature: Convert Celsius to Fahrenheit or Kelvin\n"
    ) in prompt
    assert "- Convert before answering\n" in prompt
    assert "secret" not in prompt and "Never offered" not in prompt
    assert prompt.endswith("Current date: 2025-05-06\nCurrent working directory: /notebooks")

    # The results went back as role: tool messages, in call order, then the answer arrived.
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_city", "call_temp"]
    contents = [m["content"] for m in tool_messages]
    assert json.loads(contents[0]) == {"population": 2_102_650, "country": "France"}
    assert contents[1] == "69.8 F"
    assert system_text(second) == prompt
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False, False]
    assert agent.state.messages[-1].text == "Paris, France: 2,102,650 people; it is 69.8 F."


async def test_redefining_a_tool_between_prompts_changes_the_next_request(fake_openai: FakeOpenAI) -> None:
    registry = ToolRegistry(prompt=PromptConfig(cwd="/w", date="2025-05-06"))
    notebook_tools(registry)
    agent = agent_for(fake_openai, registry)
    fake_openai.enqueue(text_chunks("First."), text_chunks("Second."))
    await agent.prompt("hi")

    # The user re-runs the cell with a new signature and snippet, and enables `secret`.
    @tool(registry=registry, snippet="Convert Celsius to any unit")
    def convert_temperature(celsius: float, unit: Literal["f", "k", "r"] = "k") -> str:
        """Convert a temperature (v2)."""
        return str(celsius)

    registry.enable("secret")
    await agent.prompt("again")

    before, after = fake_openai.bodies
    assert list(api_tools(before)) == ["lookup_city", "convert_temperature"]
    assert list(api_tools(after)) == ["lookup_city", "convert_temperature", "secret"]
    unit = api_tools(after)["convert_temperature"]["parameters"]["properties"]["unit"]
    assert unit["enum"] == ["f", "k", "r"] and unit["default"] == "k"
    prompt = system_text(after)
    assert prompt.count("- convert_temperature:") == 1
    assert "- convert_temperature: Convert Celsius to any unit\n" in prompt
    assert "- secret: Never offered: disabled\n" in prompt
    assert "Convert before answering" not in prompt  # the old definition's guideline left with it


async def test_tool_retry_reaches_the_model_and_the_retry_succeeds(fake_openai: FakeOpenAI) -> None:
    registry = ToolRegistry(prompt=PromptConfig(cwd="/w", date="2025-05-06"))
    calls: list[str] = []

    @tool(registry=registry, snippet="Look up a country's capital")
    async def capital(country: str) -> str:
        """The capital of a country."""
        calls.append(country)
        if country != "France":
            raise ToolRetry(f"Unknown country {country!r}; use the English name, e.g. 'France'")
        return "Paris"

    fake_openai.enqueue(
        tool_call_chunks([ToolCallSpec("capital", {"country": "Frankreich"}, "call_1")]),
        tool_call_chunks([ToolCallSpec("capital", {"country": "France"}, "call_2")]),
        text_chunks("The capital is Paris."),
    )
    agent = agent_for(fake_openai, registry)
    await agent.prompt("Capital of Frankreich?")

    assert calls == ["Frankreich", "France"]
    _, second, third = fake_openai.bodies
    retry_message = next(m for m in second["messages"] if m["role"] == "tool")
    assert retry_message["content"] == (
        "Unknown country 'Frankreich'; use the English name, e.g. 'France'\n\n"
        "Fix the arguments and call capital again (retry 1 of 3)."
    )
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [True, False]
    assert [m["content"] for m in third["messages"] if m["role"] == "tool"][-1] == "Paris"
    assert agent.state.messages[-1].text == "The capital is Paris."


# --------------------------------------------------------------------------- tools through the loop


def test_render_hooks_given_to_tool_stay_on_the_definition_the_ui_finds() -> None:
    def show_call(args: Any) -> str:
        return f"querying {args['city']}"

    def show_result(result: Any) -> str:
        return "rendered"

    @tool(registry=False, render_call=show_call, render_result=show_result)
    def weather(city: str) -> str:
        """Weather."""
        return city

    assert (weather.render_call, weather.render_result) == (show_call, show_result)
    wrapped = wrap_tool_definition(weather)
    assert wrapped.definition is weather and wrapped.definition.render_call is show_call
    assert not hasattr(wrapped, "render_call")  # UI-only: not part of what the agent or providers see
    assert weather.fn is not None
    plain = tool(registry=False)(weather.fn)
    assert (plain.render_call, plain.render_result) == (None, None)


async def test_a_tools_exception_becomes_an_error_result_with_its_message() -> None:
    @tool(registry=False)
    def divide(a: float, b: float) -> float:
        """Divide."""
        if b == 0:
            raise ZeroDivisionError("b must not be zero")
        return a / b

    calls = [tool_call("divide", {"a": 1, "b": 0}), tool_call("divide", {"a": 6, "b": 3})]
    model = ScriptedModel([tool_call_message(*calls), text_message("ok")])
    _events, messages = await run_loop(model, [user("go")], tools=[wrap_tool_definition(divide)])
    failed, ok = tool_results(messages)
    assert failed.is_error and failed.content[0].text == "b must not be zero"  # type: ignore[union-attr]
    assert not ok.is_error and ok.content[0].text == "2.0"  # type: ignore[union-attr]


async def test_write_waits_for_the_files_queue(tmp_path: Path) -> None:
    target = tmp_path / "held.txt"
    target.write_text("before")
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with hold_file_mutation_queue(target):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    await asyncio.to_thread(held.wait, 10)
    write = asyncio.create_task(
        call_tool(create_write_tool(), {"path": "held.txt", "content": "after"}, make_ctx(tmp_path))
    )
    for _ in range(20):  # give the write every chance to run if it ignored the queue
        await asyncio.sleep(0.01)
    assert not write.done() and target.read_text() == "before"
    release.set()
    await write
    assert target.read_text() == "after"
    await asyncio.to_thread(thread.join, 10)


async def test_100_parallel_edits_through_symlink_aliases_lose_no_update(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    (real_dir / "shared.txt").write_text("".join(f"value {i} = old\n" for i in range(100)))
    (tmp_path / "alias.txt").symlink_to(real_dir / "shared.txt")
    (tmp_path / "linkdir").symlink_to(real_dir, target_is_directory=True)
    spellings = ["real/shared.txt", "alias.txt", "linkdir/shared.txt", str(real_dir / "shared.txt")]
    calls = [
        tool_call(
            "edit",
            {"path": spellings[i % 4], "edits": [{"old_text": f"value {i} = old", "new_text": f"value {i} = new"}]},
        )
        for i in range(100)
    ]
    model = ScriptedModel([tool_call_message(*calls), text_message("done")])
    tools = [wrap_tool_definition(create_edit_tool(), make_ctx(tmp_path))]
    _events, messages = await run_loop(model, [user("edit")], tools=tools)
    assert [result.is_error for result in tool_results(messages)] == [False] * 100
    assert (real_dir / "shared.txt").read_text() == "".join(f"value {i} = new\n" for i in range(100))
    assert (tmp_path / "alias.txt").is_symlink()


async def test_both_channels_are_rebuilt_before_every_request_of_one_prompt() -> None:
    registry = ToolRegistry(prompt=PromptConfig(cwd="/w", date="2025-01-01"))

    @tool(registry=registry, snippet="Unlock the export tool")
    def unlock() -> str:
        """Unlock."""
        registry.enable("export")
        registry.disable("unlock")
        return "unlocked"

    @tool(registry=registry, snippet="Export the results", guidelines="Export only when asked")
    def export() -> str:
        """Export."""
        return "exported"

    registry.disable("export")
    model = ScriptedModel([tool_call_message(tool_call("unlock")), text_message("done")])
    await run_loop(model, [user("go")], prepare_next_turn=registry.prepare_next_turn)
    first, second = model.requests
    assert first.tool_names == ["unlock"] and second.tool_names == ["export"]
    before, after = first.system_prompt or "", second.system_prompt or ""
    assert "- unlock: Unlock the export tool" in before
    assert "- export:" not in before and "Export only when asked" not in before
    assert "- export: Export the results" in after and "- Export only when asked" in after
    assert "- unlock:" not in after


async def test_bash_non_zero_exit_with_long_output_reports_the_tail_trailer_and_code(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as failed:
        await call_tool(create_bash_tool(), {"command": "seq 1 3000; exit 4"}, make_ctx(tmp_path))
    text = str(failed.value)
    assert text.startswith("1002\n")
    trailer = "\n\n[Showing lines 1002-3001 of 3001. Full output: "
    assert trailer in text and text.endswith("]\n\nCommand exited with code 4")
    saved = text.split("Full output: ")[1].split("]")[0]
    assert Path(saved).read_text() == "".join(f"{i}\n" for i in range(1, 3001))
    os.unlink(saved)
