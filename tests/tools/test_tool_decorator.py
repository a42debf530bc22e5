"""``@tool`` descriptions and schemas: from pydantic models, docstrings (Google, NumPy, Sphinx),
``Annotated``/``Field`` metadata, and the signatures it refuses.

Runtime behaviour (sync/async execute, injected parameters, options, registries,
hand-written definitions) is in ``test_tool_decorator_runtime.py``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from pi_kernel.ai import TextContent
from pi_kernel.tools import ToolDefinition, tool, wrap_tool_definition
from pi_kernel.tools.decorator import parse_docstring

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
