"""``@tool`` descriptions and schemas: from pydantic models, docstrings (Google, NumPy, Sphinx),
``Annotated``/``Field`` metadata, and the signatures it refuses.

``@tool`` at run time: sync and async ``execute``, injected parameters, options reaching the
definition and the wrapped tool, calling the decorated function, default registries, and
hand-written definitions through ``wrap_tool_definition``.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Annotated, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from pi_kernel.agent.types import AgentTool, AgentToolResult
from pi_kernel.ai import AbortController, AbortSignal, TextContent
from pi_kernel.tools import (
    FunctionTool,
    ToolContext,
    ToolDefinition,
    ToolRegistry,
    get_default_registry,
    set_default_registry,
    tool,
    wrap_tool_definition,
)
from pi_kernel.tools.decorator import parse_docstring
from pi_kernel.tools.definition import DefinedTool

# --------------------------------------------------------------------------- pydantic-model tools


class WeatherQuery(BaseModel):
    """Get the current weather for a city."""

    city: str = Field(description="City name, e.g. Paris")
    unit: Literal["c", "f"] = Field("c", description="Temperature unit")


def test_model_tool_takes_description_from_model_docstring_and_fields_from_the_model() -> None:
    @tool(registry=False)
    def weather(query: WeatherQuery) -> str:
        """The function's own text, not used when the model has a docstring."""
        return f"{query.city}: 21 {query.unit}"

    assert isinstance(weather, ToolDefinition)
    assert weather.description == "Get the current weather for a city."
    assert weather.parameters is WeatherQuery
    schema = wrap_tool_definition(weather).json_schema()
    assert schema["properties"]["city"] == {"type": "string", "description": "City name, e.g. Paris"}
    assert schema["properties"]["unit"]["description"] == "Temperature unit"
    assert schema["required"] == ["city"]


def test_model_tool_without_model_docstring_uses_the_function_docstring() -> None:
    class Bare(BaseModel):
        n: int

    @tool(registry=False)
    def double(args: Bare) -> int:
        """Double a number.

        Args:
            args: ignored for the description.
        """
        return args.n * 2

    assert double.description == "Double a number."
    assert wrap_tool_definition(double).execute("c1", Bare(n=4)).content == [TextContent("8")]


# --------------------------------------------------------------------------- plain functions and docstrings


def google_style(
    city: str,
    days: int = 3,
    tags: Optional[list[int]] = None,  # noqa: UP045 - typing.Optional must work as well as `| None`
    unit: Literal["c", "f"] = "c",
) -> str:
    """Forecast the weather.

    Looks a few days ahead.

    Args:
        city (str): The city to forecast.
        days: How many days,
            counted from today.
        tags: Labels to attach.
        unit: Temperature unit.

    Returns:
        The forecast text.
    """
    return f"{city} {days} {tags} {unit}"


def numpy_style(city: str, days: int = 3, tags: list[int] | None = None, unit: Literal["c", "f"] = "c") -> str:
    """Forecast the weather.

    Looks a few days ahead.

    Parameters
    ----------
    city : str
        The city to forecast.
    days : int, optional
        How many days,
        counted from today.
    tags : list of int
        Labels to attach.
    unit : {"c", "f"}
        Temperature unit.

    Returns
    -------
    str
        The forecast text.
    """
    return f"{city} {days} {tags} {unit}"


def sphinx_style(city: str, days: int = 3, tags: list[int] | None = None, unit: Literal["c", "f"] = "c") -> str:
    """Forecast the weather.

    Looks a few days ahead.

    :param city: The city to forecast.
    :param int days: How many days,
        counted from today.
    :param tags: Labels to attach.
    :type tags: list[int]
    :param unit: Temperature unit.
    :returns: The forecast text.
    """
    return f"{city} {days} {tags} {unit}"


@pytest.mark.parametrize("function", [google_style, numpy_style, sphinx_style], ids=["google", "numpy", "sphinx"])
def test_plain_function_docstring_styles_describe_parameters_in_the_schema(function) -> None:
    defn = tool(registry=False)(function)
    assert defn.description == "Forecast the weather.\n\nLooks a few days ahead."
    schema = wrap_tool_definition(defn).json_schema()
    properties = schema["properties"]
    assert properties["city"] == {"type": "string", "description": "The city to forecast."}
    assert properties["days"] == {
        "type": "integer",
        "default": 3,
        "description": "How many days, counted from today.",
    }
    assert properties["tags"]["anyOf"] == [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]
    assert properties["tags"]["default"] is None
    assert properties["tags"]["description"] == "Labels to attach."
    assert properties["unit"]["enum"] == ["c", "f"]
    assert properties["unit"]["description"] == "Temperature unit."
    assert schema["required"] == ["city"]


def test_parse_docstring_returns_text_and_multi_name_numpy_entries() -> None:
    parsed = parse_docstring(
        """Move.

        Parameters
        ----------
        x, y : float
            Target point.
        """
    )
    assert parsed.description == "Move."
    assert parsed.params == {"x": "Target point.", "y": "Target point."}
    assert parse_docstring(google_style.__doc__).returns == "The forecast text."
    assert parse_docstring(sphinx_style.__doc__).returns == "The forecast text."
    assert parse_docstring(None).description == ""


def test_annotated_field_description_wins_over_the_docstring_and_field_defaults_are_kept() -> None:
    @tool(registry=False)
    def pick(
        color: Annotated[str, Field(description="From Annotated")],
        size: int = Field(2, description="From a Field default", ge=1),
    ) -> str:
        """Pick.

        Args:
            color: From the docstring.
            size: Also from the docstring.
        """
        return f"{color}{size}"

    properties = wrap_tool_definition(pick).json_schema()["properties"]
    assert properties["color"]["description"] == "From Annotated"
    assert properties["size"] == {"type": "integer", "default": 2, "minimum": 1, "description": "From a Field default"}
    assert pick.execute("c1", {"color": "red"}, None, None, None).content == [TextContent("red2")]


def test_validated_arguments_reach_the_function() -> None:
    from pi_kernel.ai import ToolCall, validate_tool_arguments

    wrapped = wrap_tool_definition(tool(registry=False)(google_style))
    params = validate_tool_arguments(wrapped, ToolCall("c1", "google_style", {"city": "Oslo", "days": "2"}))
    result = wrapped.execute("c1", params)
    assert result.content == [TextContent("Oslo 2 None c")]


def test_parameter_names_that_clash_with_pydantic_keep_their_name_in_the_schema() -> None:
    @tool(registry=False)
    def dump(json: str, copy: bool = False) -> str:
        """Dump."""
        return f"{json}|{copy}"

    schema = wrap_tool_definition(dump).json_schema()
    assert set(schema["properties"]) == {"json", "copy"}
    params = dump.parameters.model_validate({"json": "x", "copy": True})
    assert dump.execute("c1", params, None, None, None).content == [TextContent("x|True")]


def test_positional_only_parameters_are_passed_positionally() -> None:
    @tool(registry=False)
    def add(a: int, b: int, /) -> int:
        """Add."""
        return a + b

    assert add.execute("c1", {"a": 2, "b": 3}, None, None, None).content == [TextContent("5")]


def test_star_args_and_kwargs_are_rejected_with_a_clear_error() -> None:
    with pytest.raises(TypeError, match=r"\*args / \*\*args cannot be described"):

        @tool(registry=False)
        def spread(*args: int) -> int:
            return sum(args)

    with pytest.raises(TypeError, match=r"declare each argument explicitly"):

        @tool(registry=False)
        def options(**kwargs: str) -> str:
            return ""


def test_unsupported_parameter_types_and_names_are_rejected_with_a_clear_error() -> None:
    with pytest.raises(TypeError, match=r'@tool "takes_lock": its parameters cannot be described as JSON schema'):

        @tool(registry=False)
        def takes_lock(lock: asyncio.Lock) -> None:
            """Nope."""

    with pytest.raises(ValueError, match="Invalid tool name"):
        tool(registry=False)(lambda x: x)

    with pytest.raises(TypeError, match="generator functions are not supported"):

        @tool(registry=False)
        def numbers(n: int):
            yield n


# --------------------------------------------------------------------------- tool decorator runtime


# --------------------------------------------------------------------------- sync, async, injected parameters


def test_async_function_gives_async_execute_and_sync_stays_sync() -> None:
    @tool(registry=False)
    async def slow(n: int) -> int:
        """Slow."""
        await asyncio.sleep(0)
        return n + 1

    @tool(registry=False)
    def fast(n: int) -> int:
        """Fast."""
        return n + 1

    slow_tool, fast_tool = wrap_tool_definition(slow), wrap_tool_definition(fast)
    assert inspect.iscoroutinefunction(slow.execute) and inspect.iscoroutinefunction(slow_tool.execute)
    assert not inspect.iscoroutinefunction(fast.execute) and not inspect.iscoroutinefunction(fast_tool.execute)
    assert asyncio.run(slow_tool.execute("c1", {"n": 1})).content == [TextContent("2")]
    assert fast_tool.execute("c1", {"n": 1}).content == [TextContent("2")]


def test_injected_parameters_stay_out_of_the_schema_and_receive_the_runtime_values(tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    @tool(registry=False)
    def probe(text: str, tool_call_id: str, signal: AbortSignal, on_update, ctx: ToolContext) -> str:
        """Probe."""
        seen.update(tool_call_id=tool_call_id, signal=signal, ctx=ctx)
        on_update(f"working on {text}")
        return "done"

    schema = wrap_tool_definition(probe).json_schema()
    assert set(schema["properties"]) == {"text"}
    assert schema["required"] == ["text"]

    context = ToolContext(cwd=tmp_path)
    wrapped = wrap_tool_definition(probe, context)
    controller = AbortController()
    updates: list[AgentToolResult] = []
    result = wrapped.execute("call_7", {"text": "x"}, controller.signal, updates.append)
    assert result.content == [TextContent("done")]
    assert seen == {"tool_call_id": "call_7", "signal": controller.signal, "ctx": context}
    assert [update.content for update in updates] == [[TextContent("working on x")]]

    # Without a signal, context or update callback the tool still gets usable objects.
    seen.clear()
    wrapped_bare = wrap_tool_definition(probe)
    assert wrapped_bare.execute("call_8", {"text": "y"}).content == [TextContent("done")]
    assert isinstance(seen["signal"], AbortSignal) and not seen["signal"].aborted
    assert isinstance(seen["ctx"], ToolContext)


# --------------------------------------------------------------------------- options, callable, registry


def test_options_land_on_the_definition_and_the_wrapped_tool() -> None:
    registry = ToolRegistry()

    def approve_small(args) -> bool:
        return args.n < 10

    def upgrade(raw):
        return {"n": raw["number"]} if "number" in raw else raw

    @tool(
        name="count_up",
        label="Count up",
        description="Counts.",
        snippet="Count up from n",
        guidelines="Use count_up for counting",
        execution_mode="sequential",
        approval=approve_small,
        max_retries=5,
        registry=registry,
        prepare_arguments=upgrade,
    )
    def count(n: int) -> list[int]:
        return list(range(n))

    assert isinstance(count, FunctionTool)
    assert (count.name, count.label, count.description) == ("count_up", "Count up", "Counts.")
    assert count.prompt_snippet == "Count up from n"
    assert list(count.prompt_guidelines) == ["Use count_up for counting"]
    assert count.execution_mode == "sequential"
    assert count.approval is approve_small
    assert count.max_retries == 5
    assert registry.get("count_up") is count

    wrapped = wrap_tool_definition(count)
    assert isinstance(wrapped, AgentTool) and isinstance(wrapped, DefinedTool)
    assert wrapped.definition is count
    assert (wrapped.name, wrapped.label, wrapped.execution_mode) == ("count_up", "Count up", "sequential")
    assert wrapped.prepare_arguments is upgrade
    assert wrapped.retry_budget is not None and wrapped.retry_budget.max_retries == 5
    # Prompt metadata never reaches what providers see.
    assert "Count up from n" not in repr(wrapped.json_schema()) + wrapped.description
    assert not hasattr(wrapped, "prompt_snippet") and not hasattr(wrapped, "prompt_guidelines")


def test_decorated_object_is_still_callable_like_the_function() -> None:
    @tool(registry=False)
    def greet(name: str, punctuation: str = "!") -> str:
        """Say hello."""
        return f"hello {name}{punctuation}"

    assert greet("Ada") == "hello Ada!"
    assert greet(name="Bob", punctuation="?") == "hello Bob?"
    assert greet.__wrapped__(name="Cy") == "hello Cy!"
    assert greet.__name__ == "greet" and greet.__doc__ == "Say hello."
    assert list(inspect.signature(greet).parameters) == ["name", "punctuation"]


def test_tool_without_registry_registers_into_the_default_registry_when_set() -> None:
    registry = ToolRegistry()
    previous = get_default_registry()
    set_default_registry(registry)
    try:

        @tool
        def ping() -> str:
            """Ping."""
            return "pong"

        @tool(registry=False)
        def hidden() -> str:
            """Not registered."""
            return ""

    finally:
        set_default_registry(previous)
    assert registry.names() == ["ping"]
    assert registry.get("ping") is ping


def test_bare_decorator_without_default_registry_registers_nowhere() -> None:
    previous = get_default_registry()
    set_default_registry(None)
    try:

        @tool
        def lonely() -> str:
            """Alone."""
            return "x"

    finally:
        set_default_registry(previous)
    assert isinstance(lonely, FunctionTool) and lonely() == "x"


def test_hand_written_definition_wraps_with_its_context_and_result_conversion(tmp_path: Path) -> None:
    received = {}

    def execute(tool_call_id, params, signal, on_update, ctx):
        received["ctx"] = ctx
        return {"path": str(ctx.cwd), "n": params["n"]}

    defn = ToolDefinition(
        name="where",
        description="Where am I.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        execute=execute,
    )
    context = ToolContext(cwd=tmp_path)
    result = wrap_tool_definition(defn, context).execute("c1", {"n": 1}, None, None)
    assert received["ctx"] is context
    assert result.content == [TextContent(f'{{"path": "{tmp_path}", "n": 1}}')]
