"""Conversion of tool schemas to the strict subset used for constrained sampling."""

from __future__ import annotations

import copy
import datetime
import json
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field

from pi_kernel.ai.strict_schema import StrictSchemaError, to_strict_schema
from pi_kernel.ai.tool import ConstrainedSampling, Tool, schema_of


def _object_nodes(schema: Any) -> list[dict[str, Any]]:
    """Every object schema in the tree (properties, items, anyOf, $defs)."""
    found: list[dict[str, Any]] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if node.get("type") == "object" or "properties" in node:
            found.append(node)
        stack.extend((node.get("properties") or {}).values())
        stack.extend((node.get("$defs") or {}).values())
        stack.extend(node.get("anyOf") or [])
        if isinstance(node.get("items"), dict):
            stack.append(node["items"])
    return found


class Replace(BaseModel):
    old_text: str = Field(description="Exact text to find.")
    new_text: str
    count: int = Field(1, ge=1, description="How many.")


class Owner(BaseModel):
    name: str
    email: Optional[str] = None  # noqa: UP045 - the classic spelling on purpose


class EditParams(BaseModel):
    path: str = Field(description="File to edit.", min_length=1)
    edits: list[Replace] = Field(description="Replacements.", max_length=5)
    owner: Owner = Field(default_factory=lambda: Owner(name="me"), description="Who edits.")
    mode: Literal["fast", "safe"] = "safe"
    when: Optional[datetime.date] = None  # noqa: UP045


def test_every_object_is_closed_and_lists_all_properties() -> None:
    strict = to_strict_schema(schema_of(EditParams))
    objects = _object_nodes(strict)
    assert len(objects) == 3  # root, Replace, Owner
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    Draft202012Validator.check_schema(strict)


def test_optional_properties_become_nullable() -> None:
    strict = to_strict_schema(schema_of(EditParams))
    properties = strict["properties"]
    # A simple type gains "null"; a $ref or an enum is wrapped in anyOf; a nullable one is left alone.
    assert strict["$defs"]["Replace"]["properties"]["count"] == {
        "description": "How many. (default: 1, minimum: 1)",
        "type": ["integer", "null"],
    }
    assert properties["owner"] == {
        "description": "Who edits.",
        "anyOf": [{"$ref": "#/$defs/Owner"}, {"type": "null"}],
    }
    assert properties["mode"] == {
        "description": 'default: "safe"',
        "anyOf": [{"enum": ["fast", "safe"], "type": "string"}, {"type": "null"}],
    }
    assert properties["when"] == {"anyOf": [{"type": "string", "description": 'format: "date"'}, {"type": "null"}]}
    assert strict["$defs"]["Owner"]["properties"]["email"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    # Required properties are not widened.
    assert properties["path"] == {"description": "File to edit. (minLength: 1)", "type": "string"}
    assert strict["$defs"]["Replace"]["properties"]["new_text"] == {"type": "string"}


def test_nested_models_stay_as_refs_into_defs() -> None:
    strict = to_strict_schema(schema_of(EditParams))
    assert strict["properties"]["edits"] == {
        "description": "Replacements. (maxItems: 5)",
        "items": {"$ref": "#/$defs/Replace"},
        "type": "array",
    }
    assert set(strict["$defs"]) == {"Replace", "Owner"}


def test_unsupported_keywords_are_described() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who.", "minLength": 1, "maxLength": 10, "pattern": "^[a-z]+$"},
            "n": {"type": "number", "minimum": 0, "exclusiveMaximum": 1.5, "multipleOf": 0.5},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
            "when": {"type": "string", "format": "date-time", "examples": ["2024-01-01T00:00:00Z"]},
        },
        "required": ["name", "n", "tags", "when"],
    }
    properties = to_strict_schema(schema)["properties"]
    assert properties["name"] == {
        "type": "string",
        "description": 'Who. (minLength: 1, maxLength: 10, pattern: "^[a-z]+$")',
    }
    assert properties["n"] == {"type": "number", "description": "minimum: 0, exclusiveMaximum: 1.5, multipleOf: 0.5"}
    assert properties["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "minItems: 1, uniqueItems: true",
    }
    assert properties["when"]["description"] == 'format: "date-time", examples: ["2024-01-01T00:00:00Z"]'


def test_metadata_is_dropped_and_const_becomes_enum() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:x",
        "title": "Args",
        "type": "object",
        "properties": {"kind": {"const": "cat", "$comment": "fixed", "x-internal": True}},
        "required": ["kind"],
    }
    assert to_strict_schema(schema) == {
        "type": "object",
        "properties": {"kind": {"enum": ["cat"]}},
        "required": ["kind"],
        "additionalProperties": False,
    }


def test_unions_refs_and_all_of() -> None:
    schema = {
        "type": "object",
        "properties": {
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "single": {"allOf": [{"$ref": "#/$defs/Point"}], "description": "A point."},
            "merged": {
                "allOf": [
                    {"$ref": "#/$defs/Point"},
                    {"type": "object", "properties": {"z": {"type": "number"}}, "required": ["z"]},
                ]
            },
            "described": {"$ref": "#/$defs/Point", "description": "Inlined, because $ref has a sibling."},
        },
        "required": ["either", "single", "merged", "described"],
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            }
        },
    }
    original = copy.deepcopy(schema)
    strict = to_strict_schema(schema)
    assert schema == original
    properties = strict["properties"]
    assert properties["either"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    point = {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert properties["single"] == {**point, "description": "A point."}
    assert properties["described"] == {**point, "description": "Inlined, because $ref has a sibling."}
    assert properties["merged"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"}},
        "required": ["x", "y", "z"],
        "additionalProperties": False,
    }
    assert strict["$defs"]["Point"] == point


def test_discriminated_and_recursive_models_convert() -> None:
    class Cat(BaseModel):
        kind: Literal["cat"]
        lives: int = 9

    class Dog(BaseModel):
        kind: Literal["dog"]

    class Node(BaseModel):
        value: int
        children: list[Node] = []
        pet: Annotated[Union[Cat, Dog], Field(discriminator="kind")]  # noqa: UP007

    strict = to_strict_schema(schema_of(Node))
    node = strict["$defs"]["Node"] if "$defs" in strict and "Node" in strict["$defs"] else strict
    assert node["properties"]["pet"]["anyOf"] == [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]
    assert "oneOf" not in node["properties"]["pet"]
    assert "discriminator" not in node["properties"]["pet"]
    assert node["properties"]["children"]["anyOf"][0]["items"] == {"$ref": "#/$defs/Node"}
    Draft202012Validator.check_schema(strict)


def test_input_is_not_mutated_and_output_shares_nothing() -> None:
    schema = schema_of(EditParams)
    original = copy.deepcopy(schema)
    strict = to_strict_schema(schema)
    assert schema == original
    strict["$defs"]["Replace"]["properties"]["new_text"]["type"] = "integer"
    assert schema == original


class Bag(BaseModel):
    counts: dict[str, int]


class Pair(BaseModel):
    pair: tuple[int, str]


class Loose(BaseModel):
    anything: Any


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "additionalProperties": True}, "allows additional properties"),
        (schema_of(Bag), r"at root\.properties\.counts: the object allows additional properties"),
        (
            {
                "type": "object",
                "properties": {"m": {"type": "object", "patternProperties": {"^x": {}}}},
                "required": ["m"],
            },
            "patternProperties",
        ),
        (schema_of(Pair), "prefixItems"),
        (schema_of(Loose), r"root\.properties\.anything: a schema without a type accepts any value"),
        ({"type": "array", "items": {"type": "string"}}, "root schema must be an object"),
        ({"type": "object", "properties": {"x": {"not": {"type": "string"}}}, "required": ["x"]}, "not cannot"),
        ({"type": "object", "properties": {"x": True}, "required": ["x"]}, "accepts any value"),
        (
            {
                "type": "object",
                "properties": {"x": {"allOf": [{"type": "string"}, {"type": "integer"}]}},
                "required": ["x"],
            },
            "allOf parts disagree on 'type'",
        ),
        ({"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope", "description": "d"}}}, "points to nothing"),
    ],
)
def test_unconvertible_schemas_raise(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(StrictSchemaError, match=reason):
        to_strict_schema(schema)


def test_parameter_named_title_survives() -> None:
    class Note(BaseModel):
        title: str = Field(description="The note's title.")
        body: str

    tool = Tool("note", "Write a note.", Note)
    schema = tool.json_schema()
    assert schema["properties"]["title"] == {"description": "The note's title.", "type": "string"}
    assert "title" not in schema  # the model's own title is gone
    strict, problem = tool.strict_json_schema()
    assert problem is None and strict is not None
    assert strict["properties"]["title"] == {"description": "The note's title.", "type": "string"}
    assert strict["required"] == ["title", "body"]


def test_require_strict_with_unconvertible_schema_fails_at_definition() -> None:
    with pytest.raises(ValueError, match=r'Tool "bag" requires strict constrained sampling.*additional properties'):
        Tool("bag", "Counts.", Bag, constrained_sampling=ConstrainedSampling(strict="require"))


def test_prefer_strict_falls_back_when_unconvertible() -> None:
    tool = Tool("bag", "Counts.", Bag, constrained_sampling=ConstrainedSampling(strict="prefer"))
    strict, problem = tool.strict_json_schema()
    assert strict is None and problem is not None and "additional properties" in problem
    assert tool.uses_strict_mode(provider_supports_strict=True) is False
    convertible = Tool("note", "d", Replace, constrained_sampling=True)
    assert convertible.uses_strict_mode(provider_supports_strict=True) is True


def test_conversion_is_idempotent() -> None:
    strict = to_strict_schema(schema_of(EditParams))
    assert to_strict_schema(strict) == strict


def test_titles_are_removed_structurally_from_a_json_schema_dict() -> None:
    schema = {
        "title": "Args",
        "type": "object",
        "properties": {
            "title": {"type": "string", "title": "Title"},
            "items": {"type": "array", "items": {"title": "Item", "$ref": "#/$defs/Item"}},
            "choice": {"anyOf": [{"title": "A", "type": "string"}, {"type": "null"}], "default": {"title": "kept"}},
        },
        "required": ["title"],
        "$defs": {"Item": {"title": "Item", "type": "object", "properties": {"title": {"type": "string"}}}},
        "examples": [{"title": "an example value, not a keyword"}],
    }
    original = copy.deepcopy(schema)
    stripped = Tool("t", "d", schema).json_schema()
    assert schema == original  # the tool's own parameters are untouched
    assert stripped == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "choice": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": {"title": "kept"}},
        },
        "required": ["title"],
        "$defs": {"Item": {"type": "object", "properties": {"title": {"type": "string"}}}},
        "examples": [{"title": "an example value, not a keyword"}],
    }


def test_titles_are_removed_in_every_schema_position() -> None:
    titled = {"title": "T", "type": "string"}
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",  # array-form "items" is draft 7
        "type": "object",
        "unevaluatedProperties": dict(titled),
        "dependencies": {"a": dict(titled), "b": ["a"]},
        "properties": {
            "tuple": {"type": "array", "items": [dict(titled)], "additionalItems": dict(titled)},
            "rest": {"type": "array", "unevaluatedItems": dict(titled)},
            "blob": {"type": "string", "contentMediaType": "application/json", "contentSchema": dict(titled)},
        },
    }
    stripped = json.dumps(Tool("t", "d", schema).json_schema())
    assert '"title"' not in stripped and '["a"]' in stripped
