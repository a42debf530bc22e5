"""Two details of validation the model relies on: error paths name places in
what it sent (never pydantic's union-branch tags), and in strict mode a
``null`` for a parameter with a default means "use the default"."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import pytest
from pydantic import BaseModel, BeforeValidator, Field

from pi_kernel.ai.messages import ToolCall
from pi_kernel.ai.tool import Tool, ToolArgumentsError, validate_tool_arguments


def _errors(tool: Tool, arguments: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, ToolCall(id="c1", name=tool.name, arguments=arguments))
    return caught.value.errors


def _valid(tool: Tool, arguments: dict[str, Any]) -> Any:
    return validate_tool_arguments(tool, ToolCall(id="c1", name=tool.name, arguments=arguments))


# --- union fields: paths into the arguments -----------------------------------------------------


class Replace(BaseModel):
    old_text: str
    new_text: str


class Insert(BaseModel):
    line: int
    text: str


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    name: str


class Scalar(BaseModel):
    x: int | bool


class Edits(BaseModel):
    edits: list[Replace | Insert]


class Pets(BaseModel):
    pet: Annotated[Union[Cat, Dog], Field(discriminator="kind")]  # noqa: UP007 - the classic spelling on purpose


def test_scalar_union_error_is_at_the_field_not_at_a_branch_name() -> None:
    errors = _errors(Tool("t", "d", Scalar), {"x": "abc"})
    assert [path for path, _ in errors] == ["x", "x"]
    assert "valid integer" in errors[0][1] and "valid boolean" in errors[1][1]


def test_union_of_models_in_a_list_points_at_the_missing_field() -> None:
    errors = _errors(Tool("t", "d", Edits), {"edits": [{"old_text": "a", "new_text": "b"}, {"new_text": "y"}]})
    paths = [path for path, _ in errors]
    assert "edits.1.old_text" in paths
    assert all(path.startswith("edits.1.") for path in paths)
    assert not any("Replace" in path or "Insert" in path for path in paths)


def test_union_error_text_matches_the_contract_template() -> None:
    tool = Tool("t", "d", Edits)
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, ToolCall(id="c1", name="t", arguments={"edits": [{"new_text": "y"}]}))
    assert "  - edits.0.old_text: Field required\n" in str(caught.value)


def test_discriminated_union_error_skips_the_tag() -> None:
    assert _errors(Tool("t", "d", Pets), {"pet": {"kind": "cat", "lives": "many"}}) == [
        ("pet.lives", "Input should be a valid integer, unable to parse string as an integer")
    ]


def test_a_key_that_looks_like_a_branch_name_is_kept() -> None:
    class Box(BaseModel):
        item: dict[str, int] | int

    errors = _errors(Tool("t", "d", Box), {"item": {"int": "x"}})
    assert errors == [
        ("item.int", "Input should be a valid integer, unable to parse string as an integer"),  # the dict branch
        ("item", "Input should be a valid integer"),  # the int branch, about the whole value: not "item.int"
    ]


STR = {"type": "string"}
EDIT_ITEM = {
    "type": "object",
    "properties": {"old_text": {"type": "string"}, "new_text": {"type": "string"}},
    "required": ["old_text", "new_text"],
}


@pytest.mark.parametrize(
    "items",
    [{"anyOf": [EDIT_ITEM, {"type": "null"}]}, {"oneOf": [{"type": "string"}, EDIT_ITEM]}],
    ids=["object-or-null", "string-or-object"],
)
def test_json_schema_union_names_the_missing_field_of_the_branch_that_fits(items: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"edits": {"type": "array", "items": items}}}
    assert _errors(Tool("t", "d", schema), {"edits": [{"new_text": "y"}]}) == [("edits.0.old_text", "Field required")]


def test_json_schema_union_of_scalars_keeps_the_generic_message() -> None:
    schema = {"type": "object", "properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}}}
    assert _errors(Tool("t", "d", schema), {"x": "abc"}) == [("x", "'abc' is not valid under any of the given schemas")]


# --- strict mode: null for a parameter with a default ------------------------------------------


class Depth(BaseModel):
    n: int | None = 5


class Walk(BaseModel):
    depth: int | None = 3
    label: str | None = None
    child: Depth | None = None
    children: list[Depth] = []


WALK_SCHEMA = {
    "type": "object",
    "properties": {
        "depth": {"type": ["integer", "null"], "default": 3},
        "label": {"type": ["string", "null"], "default": None},
    },
}


def test_strict_model_tool_null_for_a_nullable_parameter_gives_its_default() -> None:
    tool = Tool("walk", "d", Walk, constrained_sampling=True)
    assert tool.uses_strict_mode(provider_supports_strict=True)
    arguments = {"depth": None, "label": None, "child": {"n": None}, "children": [{"n": None}]}
    result = _valid(tool, arguments)
    assert (result.depth, result.label, result.child.n, result.children[0].n) == (3, None, 5, 5)
    assert arguments["depth"] is None  # the call itself is untouched


def test_strict_json_schema_tool_null_for_a_nullable_parameter_gives_its_default() -> None:
    tool = Tool("walk", "d", WALK_SCHEMA, constrained_sampling=True)
    assert _valid(tool, {"depth": None, "label": None}) == {"depth": 3, "label": None}


def test_strict_null_gives_the_default_factory_value_too() -> None:
    class Listed(BaseModel):
        numbers: list[int] | None = Field(default_factory=lambda: [1, 2])

    tool = Tool("listed", "d", Listed, constrained_sampling=True)
    assert tool.uses_strict_mode(provider_supports_strict=True)
    assert _valid(tool, {"numbers": None}).numbers == [1, 2]


def test_without_strict_mode_an_explicit_null_stays_null() -> None:
    assert _valid(Tool("walk", "d", Walk), {"depth": None}).depth is None
    assert _valid(Tool("walk", "d", WALK_SCHEMA), {"depth": None}) == {"depth": None}


def test_strict_requested_but_not_convertible_keeps_null() -> None:
    class Open(BaseModel):
        depth: int | None = 3
        extra: dict[str, int] = {}

    tool = Tool("walk", "d", Open, constrained_sampling=True)
    assert not tool.uses_strict_mode(provider_supports_strict=True)
    assert _valid(tool, {"depth": None}).depth is None


def test_json_schema_union_skips_the_branch_whose_tag_does_not_match() -> None:
    cat = {"type": "object", "properties": {"kind": {"const": "cat"}, "meow": STR}, "required": ["kind", "meow"]}
    dog = {"type": "object", "properties": {"kind": {"const": "dog"}, "bark": STR}, "required": ["kind", "bark"]}
    schema = {"type": "object", "properties": {"pet": {"oneOf": [cat, dog]}}}
    assert _errors(Tool("t", "d", schema), {"pet": {"kind": "cat"}}) == [("pet.meow", "Field required")]


def test_json_schema_union_of_closed_objects_reports_the_closest_branch_only() -> None:
    replace = {**EDIT_ITEM, "additionalProperties": False}
    insert = {
        "type": "object",
        "properties": {"line": {"type": "integer"}, "text": STR},
        "required": ["line", "text"],
        "additionalProperties": False,
    }
    schema = {"type": "object", "properties": {"edits": {"type": "array", "items": {"anyOf": [replace, insert]}}}}
    assert _errors(Tool("t", "d", schema), {"edits": [{"old_text": "a"}]}) == [("edits.0.new_text", "Field required")]


def test_union_tags_stay_out_even_when_a_validator_changed_the_value() -> None:
    class A(BaseModel):
        a: int

    class B(BaseModel):
        b: int

    class Wrapped(BaseModel):
        w: Annotated[A | B, BeforeValidator(lambda value: {**value, "extra": 1})]

    assert _errors(Tool("t", "d", Wrapped), {"w": {"zz": 1}}) == [("w.a", "Field required"), ("w.b", "Field required")]


def test_an_enum_or_const_inside_the_branch_that_fits_is_still_reported() -> None:
    cat = {"type": "object", "properties": {"kind": {"const": "cat"}, "color": {"enum": ["red", "blue"]}}}
    dog = {"type": "object", "properties": {"kind": {"const": "dog"}, "bark": STR}, "required": ["kind", "bark"]}
    pets = {"type": "object", "properties": {"pet": {"oneOf": [cat, dog]}}}
    assert _errors(Tool("t", "d", pets), {"pet": {"kind": "cat", "color": "green"}}) == [
        ("pet.color", "'green' is not one of ['red', 'blue']")
    ]
    only = {
        "type": "object",
        "properties": {"x": {"anyOf": [{"type": "object", "properties": {"v": {"const": 1}}}, {"type": "null"}]}},
    }
    assert _errors(Tool("t", "d", only), {"x": {"v": 2}}) == [("x.v", "1 was expected")]
