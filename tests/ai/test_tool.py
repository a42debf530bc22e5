"""``Tool``: the spellings of ``constrained_sampling``, and schemas handed out as copies."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pi_kernel.ai import ToolCall
from pi_kernel.ai.models import Compat
from pi_kernel.ai.providers.openai_format import convert_tools
from pi_kernel.ai.tool import ConstrainedSampling, Tool, ToolSchemaError, validate_tool_arguments


class Bag(BaseModel):
    counts: dict[str, int]  # additionalProperties: not expressible in the strict subset


class Read(BaseModel):
    path: str
    limit: int = 10


STRICT = Compat(supports_strict_mode=True)


def test_pi_dict_form_is_converted_to_the_dataclass() -> None:
    tool = Tool("read", "Read.", Read, constrained_sampling={"type": "json_schema", "strict": "require"})
    assert tool.constrained_sampling == ConstrainedSampling("require")
    assert tool.strict_mode == "require" and tool.uses_strict_mode(provider_supports_strict=True)
    prefer = Tool("read", "Read.", Read, constrained_sampling={"type": "json_schema"})
    assert prefer.constrained_sampling == ConstrainedSampling("prefer")


def test_dict_form_require_with_an_unconvertible_schema_fails_at_definition() -> None:
    with pytest.raises(ValueError, match=r'Tool "bag" requires strict constrained sampling'):
        Tool("bag", "Counts.", Bag, constrained_sampling={"type": "json_schema", "strict": "require"})


def test_off_spellings() -> None:
    for off in (False, None):
        tool = Tool("read", "Read.", Read, constrained_sampling=off)
        assert tool.constrained_sampling is False and tool.strict_mode is None


@pytest.mark.parametrize(
    "value",
    [
        "require",
        1,
        ["json_schema"],
        {"type": "regex", "strict": "require"},
        {"type": "json_schema", "strict": "always"},
        {"type": "json_schema", "strict": "require", "schema": {}},
        ConstrainedSampling("sometimes"),  # type: ignore[arg-type]
    ],
)
def test_unsupported_values_are_a_type_error_not_ignored(value: Any) -> None:
    with pytest.raises(TypeError, match="constrained_sampling"):
        Tool("read", "Read.", Read, constrained_sampling=value)


def test_mutating_the_returned_schema_does_not_change_the_next_call() -> None:
    tool = Tool("read", "Read.", Read, constrained_sampling=True)
    first = tool.json_schema()
    first["properties"]["path"]["type"] = "integer"
    first["required"].append("limit")
    first["injected"] = True
    assert tool.json_schema() == {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"default": 10, "type": "integer"}},
        "required": ["path"],
    }
    strict, _ = tool.strict_json_schema()
    assert strict is not None
    strict["properties"].clear()
    again, _ = tool.strict_json_schema()
    assert again is not None and set(again["properties"]) == {"path", "limit"}
    # What the provider sends and what validation checks are untouched too.
    [sent] = convert_tools([tool], STRICT)
    assert set(sent["function"]["parameters"]["properties"]) == {"path", "limit"}
    assert validate_tool_arguments(tool, ToolCall("c", "read", {"path": "a"})) == Read(path="a")


def test_a_schema_that_json_cannot_round_trip_is_still_copied() -> None:
    schema = {"type": "object", "properties": {"mode": {"enum": ("a", "b")}}}  # a tuple: JSON would make it a list
    tool = Tool("t", "d", schema)
    first = tool.json_schema()
    assert first["properties"]["mode"]["enum"] == ("a", "b")
    first["properties"]["mode"]["enum"] = ("z",)
    assert tool.json_schema()["properties"]["mode"]["enum"] == ("a", "b")


def test_shared_schema_is_one_object_for_cheap_internal_reads() -> None:
    tool = Tool("read", "Read.", Read)
    assert tool.shared_json_schema() is tool.shared_json_schema()
    assert tool.json_schema() is not tool.shared_json_schema()
    assert tool.json_schema() == tool.shared_json_schema()


def test_a_tool_text_that_is_not_valid_unicode_is_cleaned_or_refused_where_defined() -> None:
    """A lone surrogate in a description becomes U+FFFD; one in the schema is refused with the tool's name."""
    tool = Tool("odd", "Odd \ud800 tool.", {"type": "object", "properties": {}})
    assert tool.description == "Odd \ufffd tool."
    bad = {"type": "object", "properties": {"x": {"type": "string", "description": "bad \udce9"}}}
    with pytest.raises(ToolSchemaError, match=r'Tool "odd".*not valid Unicode'):
        Tool("odd", "Odd tool.", bad)
