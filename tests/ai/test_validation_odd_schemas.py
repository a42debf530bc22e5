"""Regressions found by review r14b in the rebuilt validation (issue 14 point 1).

Each test passes at 57bea52 and fails on w/lead (b2a4a39), except the cache cost one (see its docstring).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import BaseModel

from pi_kernel.ai import tool as validation
from pi_kernel.ai.messages import ToolCall
from pi_kernel.ai.tool import Tool, ToolArgumentsError, validate_tool_arguments

D3 = "http://json-schema.org/draft-03/schema#"
D7 = "http://json-schema.org/draft-07/schema#"


def _call(arguments: dict[str, Any], name: str = "t") -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


# --- 1. dotted paths: a key spelt like a union tag, mid-path ------------------------------------


class Replace(BaseModel):
    old_text: str
    new_text: str


class Insert(BaseModel):
    line: int
    text: str


class EditParams(BaseModel):
    edits: list[Replace | Insert]


@pytest.mark.parametrize("stray", [1, {"old_text": "a"}])
def test_a_key_spelt_like_a_branch_tag_does_not_capture_the_error_path(stray: Any) -> None:
    """docs/validation.md: tags are removed, "every branch's complaint points at the place in the arguments".
    The model also wrote a key "Replace" (the variant's name); the bad value is edits.0.old_text, not
    edits.0.Replace (which is fine) nor edits.0.Replace.old_text (which does not exist)."""
    tool = Tool("edit", "d", EditParams)
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call({"edits": [{"Replace": stray, "old_text": ["x"], "new_text": "b"}]}))
    assert ("edits.0.old_text", "Input should be a valid string") in caught.value.errors


# --- 2. a schema without `type` still gets its JSON string repaired -----------------------------


@pytest.mark.parametrize(
    ("sub", "sent", "wanted"),
    [
        ({"properties": {"name": {"type": "string"}}, "required": ["name"]}, '{"name": "x"}', {"name": "x"}),
        ({"items": {"type": "integer"}}, '["1", 2]', [1, 2]),
    ],
)
def test_a_json_string_for_a_typeless_object_or_array_schema_is_parsed(sub: Any, sent: str, wanted: Any) -> None:
    """docs step 2: "a JSON *string* holding the array or object that was asked for" is repaired. MCP servers
    often leave out ``type`` in nested schemas; ``properties`` / ``items`` ask for an object / array.
    (Coercion runs here because ``limit`` needs it.)"""
    tool = Tool("t", "d", {"type": "object", "properties": {"f": sub, "limit": {"type": "integer"}}})
    assert validate_tool_arguments(tool, _call({"f": sent, "limit": "5"})) == {"f": wanted, "limit": 5}


# --- 3. schemas of older drafts (valid, accepted by Tool) crash the repair -----------------------


@pytest.mark.parametrize(
    ("schema", "arguments"),
    [
        ({"$schema": D3, "type": "object", "properties": {"x": {"type": [{"type": "integer"}, "string"]}}}, {"x": 5.5}),
        ({"$schema": D3, "type": "object", "properties": {"x": {"type": "integer", "required": True}}}, {}),
        ({"$schema": D7, "type": "object", "properties": {"x": {"type": "array", "prefixItems": 5}}}, {"x": "[1]"}),
    ],
)
def test_an_old_draft_schema_gives_a_result_not_a_crash(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    """``Tool`` accepts these (valid under their draft's metaschema); the repair must not raise TypeError
    (bool ``required`` in draft 3, schemas inside ``type`` in draft 3, an unknown keyword's odd value)."""
    tool = Tool("t", "d", schema)
    try:
        validate_tool_arguments(tool, _call(arguments))
    except ToolArgumentsError:
        pass


def test_a_missing_draft3_required_property_is_reported() -> None:
    """Pre-existing at 57bea52 too (there the error was silently dropped and ``{}`` accepted); now a
    TypeError. Draft 3 ``required: true`` sits in the property: its error's ``validator_value`` is ``True``."""
    tool = Tool("t", "d", {"$schema": D3, "type": "object", "properties": {"x": {"type": "integer", "required": True}}})
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call({}))
    assert [path for path, _ in caught.value.errors] == ["x"]


# --- 4. a schema changed after its definition: the author's error, named -------------------------


@pytest.mark.parametrize(
    "broken",
    [
        {"type": "object", "required": "x"},
        {"type": "object", "properties": {"x": {"type": "integr"}}},
        {"type": "object", "properties": {"x": 5}},
    ],
)
def test_a_schema_broken_after_definition_is_a_value_error_naming_the_tool(broken: dict[str, Any]) -> None:
    """docs: "A broken schema is the tool author's error, not the model's: it raises a plain ValueError naming
    the tool" (tests/test_ai_stream.py changes a tool after its definition the same way). Now: "x: Field
    required" blamed on the model, jsonschema's UnknownType, AttributeError."""
    tool = Tool("late", "d", {"type": "object"})
    tool.parameters, tool._schema_cache = copy.deepcopy(broken), None
    with pytest.raises(ValueError, match='Tool "late"') as caught:
        validate_tool_arguments(tool, _call({"x": "1"}, name="late"))
    assert not isinstance(caught.value, ToolArgumentsError)


# --- 5. the copy shares what the caller shared ---------------------------------------------------


def test_arguments_sharing_one_object_are_repaired_per_place() -> None:
    """Arguments built in Python (a prepare_arguments hook) may hold one dict twice; ``copy_json`` made two,
    ``copy.deepcopy`` keeps one: ``a.n`` is repaired to ``5``, then ``b``'s schema turns the same ``n`` back into
    ``"5"``, and ``a.n`` fails ("'5' is not of type 'integer'")."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "b": {"type": "object", "properties": {"n": {"type": "string"}}},
        },
    }
    shared = {"n": "5"}
    result = validate_tool_arguments(Tool("t", "d", schema), _call({"a": shared, "b": shared}))
    assert result == {"a": {"n": 5}, "b": {"n": "5"}}


# --- 6. per-call cost of the content-keyed cache -------------------------------------------------


def test_a_cached_schema_is_not_serialised_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Base: one identity check per call. Now ``json.dumps`` of the whole schema on every call: 15 ms per
    call for an MCP tool with a 200 000-member enum (0.01 ms at base), +45 % on a small schema."""
    tool = Tool("t", "d", {"type": "object", "properties": {"c": {"enum": [f"m{i}" for i in range(1000)]}}})
    call = _call({"c": "m5"})
    validate_tool_arguments(tool, call)
    dumped: list[int] = []
    real = json.dumps

    def counting(obj: Any, *args: Any, **kwargs: Any) -> str:
        dumped.append(1)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(validation.json, "dumps", counting)
    for _ in range(3):
        validate_tool_arguments(tool, call)
    assert dumped == []


# --- 7. (pre-existing at 57bea52) a recursive two-branch union makes the repair exponential -----------


def test_repair_under_a_recursive_union_is_not_exponential_in_the_value_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    """An MCP filter schema (``node: anyOf[{k: node, n}, {k: node, m}]``) and a 12-deep value with one bad
    leaf: ``_coerce_union`` trial-coerces every branch at every level and re-validates each trial, ~2^depth
    work (depth 10: 4.7 s, 12: 17 s, 20: hours, on the event loop). Counted, not timed: a check per union
    branch per level is ~60 checks; this allows 5000."""
    from pi_kernel.ai.tool import SchemaCoercer

    def branch(required: str) -> dict[str, Any]:
        properties = {"k": {"$ref": "#/$defs/node"}, "n": {"type": "integer"}, "m": {"type": "integer"}}
        return {"type": "object", "properties": properties, "required": [required]}

    schema = {
        "type": "object",
        "$defs": {"node": {"anyOf": [branch("n"), branch("m")]}},
        "properties": {"root": {"$ref": "#/$defs/node"}},
    }
    node: dict[str, Any] = {"n": "x"}
    for _ in range(12):
        node = {"k": node}
    checks = [0]
    real = SchemaCoercer._valid

    def counting(self: SchemaCoercer, value: Any, sub: Any) -> bool:
        checks[0] += 1
        assert checks[0] <= 5000, "exponential repair"
        return real(self, value, sub)

    monkeypatch.setattr(SchemaCoercer, "_valid", counting)
    with pytest.raises(ToolArgumentsError):
        validate_tool_arguments(Tool("t", "d", schema), _call({"root": node}))
