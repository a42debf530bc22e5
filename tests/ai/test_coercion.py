"""Lenient coercion of tool arguments (``coerce_with_schema``): the table of what becomes what."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from coercion_helpers import coerce_with_schema

INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
STR = {"type": "string"}
NULL = {"type": "null"}

# (schema, input, expected output). Unconvertible inputs come back unchanged.
COERCION_TABLE: list[tuple[Any, Any, Any]] = [
    (INT, "42", 42),
    (INT, " 7 ", 7),
    (INT, "42.0", 42),
    (INT, "-3", -3),
    (INT, "4.5", "4.5"),
    (INT, "abc", "abc"),
    (INT, 42, 42),
    (NUM, "4.5", 4.5),
    (NUM, "1e3", 1000.0),
    (NUM, "42", 42),
    (NUM, "-.5", -0.5),
    (NUM, "nan", "nan"),
    (NUM, "inf", "inf"),
    (NUM, "1_000", "1_000"),
    (BOOL, "true", True),
    (BOOL, "FALSE", False),
    (BOOL, " True ", True),
    (BOOL, "1", True),
    (BOOL, "0", False),
    (BOOL, 1, True),
    (BOOL, 0, False),
    (BOOL, "yes", "yes"),
    (BOOL, 2, 2),
    (STR, 42, "42"),
    (STR, 4.5, "4.5"),
    (STR, True, "true"),
    (STR, None, None),
    (NULL, "null", None),
    ({"type": ["integer", "null"]}, "5", 5),
    ({"type": ["integer", "null"]}, "null", None),
    ({"type": ["integer", "string"]}, "42", "42"),
    ({"enum": [1, 2, 3]}, "2", 2),
    ({"enum": ["a", "b"]}, "c", "c"),
    ({"const": True}, "true", True),
    # A JSON string holding the array / object that was asked for.
    ({"type": "array", "items": STR}, '["a", "b"]', ["a", "b"]),
    ({"type": "array", "items": INT}, '["1", 2]', [1, 2]),
    ({"type": "array", "items": STR}, '{"a": 1}', '{"a": 1}'),
    ({"type": "array", "items": STR}, "[1,", "[1,"),
    ({"type": "object", "properties": {"a": INT}}, '{"a": "1"}', {"a": 1}),
    ({"type": "object", "properties": {"a": INT}}, "[1]", "[1]"),
    # Unions: a value that already fits is kept; otherwise the first branch that validates after coercion.
    ({"anyOf": [INT, BOOL]}, "true", True),
    ({"anyOf": [INT, BOOL]}, "42", 42),
    ({"anyOf": [STR, INT]}, "42", "42"),
    ({"anyOf": [INT, NULL]}, None, None),
    ({"anyOf": [INT, NULL]}, "x", "x"),
    ({"oneOf": [BOOL, {"type": "array", "items": INT}]}, '["1"]', [1]),
    ({"allOf": [INT]}, "5", 5),
    # Arrays, nested objects, tuples.
    (
        {"type": "array", "items": {"type": "object", "properties": {"n": INT, "ok": BOOL}}},
        [{"n": "1", "ok": "true"}, {"n": 2, "ok": "false"}],
        [{"n": 1, "ok": True}, {"n": 2, "ok": False}],
    ),
    ({"type": "array", "items": {"type": "array", "items": NUM}}, [["1", "2.5"], ["3"]], [[1, 2.5], [3]]),
    ({"type": "array", "prefixItems": [INT, BOOL]}, ["1", "true", "x"], [1, True, "x"]),
    ({"type": "array", "items": [INT, BOOL]}, ["1", "true"], [1, True]),
    ({"type": "object", "additionalProperties": INT}, {"x": "1", "y": "2"}, {"x": 1, "y": 2}),
    ({"type": "object", "patternProperties": {"^n_": INT}}, {"n_a": "1", "s": "1"}, {"n_a": 1, "s": "1"}),
    # Optional property sent as null: dropped (or its default) unless its schema accepts null.
    ({"type": "object", "properties": {"a": INT}}, {"a": None}, {}),
    ({"type": "object", "properties": {"a": {"type": "integer", "default": 3}}}, {"a": None}, {"a": 3}),
    ({"type": "object", "properties": {"a": {"type": ["integer", "null"], "default": 3}}}, {"a": None}, {"a": None}),
    ({"type": "object", "properties": {"a": {"anyOf": [INT, NULL]}}}, {"a": None}, {"a": None}),
    ({"type": "object", "properties": {"a": INT}, "required": ["a"]}, {"a": None}, {"a": None}),
    ({"type": "object", "properties": {"a": INT}}, {"b": None}, {"b": None}),
    # Schemas that say nothing: nothing to do.
    ({}, "42", "42"),
    (True, {"a": "1"}, {"a": "1"}),
]


@pytest.mark.parametrize(("schema", "value", "expected"), COERCION_TABLE)
def test_coercion_table(schema: Any, value: Any, expected: Any) -> None:
    before = copy.deepcopy(value)
    result = coerce_with_schema(value, schema, schema)
    assert result == expected
    assert type(result) is type(expected)
    assert value == before  # the input is never mutated


def test_coercion_follows_refs_into_defs() -> None:
    root: dict[str, Any] = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "$defs": {
            "Item": {"type": "object", "properties": {"n": {"$ref": "#/$defs/Count"}, "opt": STR}},
            "Count": {"type": "integer", "default": 1},
        },
    }
    value = {"items": [{"n": "4"}, {"n": None, "opt": None}]}
    assert coerce_with_schema(value, root) == {"items": [{"n": 4}, {"n": 1}]}
    # A sub-schema coerced on its own still resolves $refs against the root.
    assert coerce_with_schema({"n": "5"}, root["$defs"]["Item"], root) == {"n": 5}


def test_coercion_does_not_mutate_or_alias_the_input() -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": INT}, "meta": {"type": "object"}}}
    value = {"xs": ["1", "2"], "meta": {"deep": ["kept"]}, "extra": {"free": [1]}}
    before = copy.deepcopy(value)
    result = coerce_with_schema(value, schema)
    assert result == {"xs": [1, 2], "meta": {"deep": ["kept"]}, "extra": {"free": [1]}}
    result["meta"]["deep"].append("changed")
    result["extra"]["free"].append(2)
    assert value == before


def test_coercion_stops_on_a_ref_cycle() -> None:
    root = {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}
    assert coerce_with_schema("1", root) == "1"
