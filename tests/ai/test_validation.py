"""Tool-argument validation: lenient coercion, strict check, readable errors, caching.

The coercion table itself is in test_coercion.py.

Regressions found by review r14b in the rebuilt validation (issue 14 point 1).

Each test passes at 57bea52 and fails on w/lead (b2a4a39), except the cache cost one (see its docstring).

Two details of validation the model relies on: error paths name places in
what it sent (never pydantic's union-branch tags), and in strict mode a
``null`` for a parameter with a default means "use the default".
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from pi_kernel.ai import tool as validation
from pi_kernel.ai.messages import ToolCall
from pi_kernel.ai.strict_schema import to_strict_schema
from pi_kernel.ai.tool import ConstrainedSampling, Tool, ToolArgumentsError, compiled_schema, validate_tool_arguments

INT = {"type": "integer"}
BOOL = {"type": "boolean"}
STR = {"type": "string"}


# --- validate_tool_arguments with JSON-schema tools ---------------------------------------------

EDIT_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "edits": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"old_text": STR, "new_text": STR, "all": {"type": "boolean", "default": False}},
                "required": ["old_text", "new_text"],
                "additionalProperties": False,
            },
        },
        "limit": {"type": "integer", "default": 10},
    },
    "required": ["path", "edits"],
    "additionalProperties": False,
}


def _call(arguments: Any, name: str = "edit", raw: str | None = None) -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments=arguments, raw_arguments=raw)


def test_json_schema_tool_returns_a_coerced_dict_without_touching_the_call() -> None:
    tool = Tool("edit", "Edit a file.", EDIT_SCHEMA)
    arguments = {"path": "a.py", "edits": '[{"old_text": "x", "new_text": 1, "all": "true"}]', "limit": "5"}
    call = _call(arguments)
    before = copy.deepcopy(arguments)
    result = validate_tool_arguments(tool, call)
    assert result == {"path": "a.py", "edits": [{"old_text": "x", "new_text": "1", "all": True}], "limit": 5}
    assert call.arguments == before


def test_valid_arguments_come_back_as_a_copy() -> None:
    tool = Tool("edit", "Edit a file.", EDIT_SCHEMA)
    call = _call({"path": "a.py", "edits": [{"old_text": "x", "new_text": "y"}]})
    result = validate_tool_arguments(tool, call)
    assert result == call.arguments
    result["edits"][0]["old_text"] = "changed"
    assert call.arguments["edits"][0]["old_text"] == "x"


def test_error_text_is_exact_with_dotted_paths() -> None:
    tool = Tool("edit", "Edit a file.", EDIT_SCHEMA)
    arguments = {"edits": [{"new_text": "y", "bogus": 1}], "limit": "4.5"}
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call(arguments))
    expected = (
        'Validation failed for tool "edit":\n'
        "  - edits.0.old_text: Field required\n"
        "  - edits.0.bogus: Extra inputs are not permitted\n"
        "  - limit: '4.5' is not of type 'integer'\n"
        "  - path: Field required\n"
        "\n"
        "Received arguments:\n"
        "{\n"
        '  "edits": [\n'
        "    {\n"
        '      "new_text": "y",\n'
        '      "bogus": 1\n'
        "    }\n"
        "  ],\n"
        '  "limit": "4.5"\n'
        "}"
    )
    assert str(caught.value) == expected
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.tool_name == "edit"
    assert error.received == arguments
    assert ("path", "Field required") in error.errors


def test_root_path_for_errors_about_the_whole_object() -> None:
    tool = Tool("t", "d", {"type": "object", "properties": {"a": INT}, "minProperties": 1})
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call({}, name="t"))
    assert str(caught.value) == (
        'Validation failed for tool "t":\n  - root: {} should be non-empty\n\nReceived arguments:\n{}'
    )


def test_error_inside_a_union_points_into_the_structure() -> None:
    schema = {
        "type": "object",
        "properties": {
            "ops": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"type": "object", "properties": {"old_text": STR}, "required": ["old_text"]},
                        {"type": "null"},
                    ]
                },
            }
        },
    }
    tool = Tool("t", "d", schema)
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call({"ops": [{"old_text": []}]}, name="t"))
    assert caught.value.errors == [("ops.0.old_text", "[] is not of type 'string'")]


def test_unparseable_arguments_report_the_raw_text() -> None:
    tool = Tool("edit", "Edit a file.", EDIT_SCHEMA)
    raw = '{"path": "a.py", "edits": [}'
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call({}, raw=raw))
    assert str(caught.value) == (
        'Validation failed for tool "edit":\n'
        "  - root: The arguments are not valid JSON (Expecting value: line 1 column 28 (char 27))\n"
        "\n"
        "Received arguments:\n"
        '{"path": "a.py", "edits": [}'
    )
    assert caught.value.received == raw


def test_raw_arguments_that_are_not_an_object() -> None:
    tool = Tool("edit", "Edit a file.", EDIT_SCHEMA)
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call({}, raw="[1, 2]"))
    assert caught.value.errors == [("root", "The arguments must be a JSON object, not an array")]
    assert str(caught.value).endswith("Received arguments:\n[1, 2]")


def test_error_survives_pickling() -> None:
    error = ToolArgumentsError("t", [("root", "bad")], {"a": 1})
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)
    assert again.errors == error.errors


def test_invalid_schema_is_a_clear_tool_error_not_an_argument_error() -> None:
    """Refused where the tool is defined (never at its first call, nor in a request)."""
    with pytest.raises(ValueError, match='Tool "broken": its parameters are not a valid JSON schema') as caught:
        Tool("broken", "d", {"type": "object", "properties": {"a": {"type": "integr"}}})
    assert not isinstance(caught.value, ToolArgumentsError)


# --- pydantic-model tools --------------------------------------------------------------------------


class ReplaceAll(BaseModel):
    old_text: str
    new_text: str
    replace_all: bool = False


class FileEditParams(BaseModel):
    path: str
    edits: list[ReplaceAll]
    limit: int = 10
    note: Optional[str] = None  # noqa: UP045 - an Optional spelled the classic way on purpose
    ratio: float = 0.5


def test_model_tool_is_lax_and_returns_an_instance() -> None:
    tool = Tool("edit", "Edit a file.", FileEditParams)
    arguments = {
        "path": "a.py",
        "edits": [{"old_text": "x", "new_text": 7, "replace_all": "TRUE"}],
        "limit": "42",
        "ratio": "1e-1",
    }
    before = copy.deepcopy(arguments)
    result = validate_tool_arguments(tool, _call(arguments))
    assert isinstance(result, FileEditParams)
    assert result.limit == 42
    assert result.ratio == 0.1
    assert result.edits == [ReplaceAll(old_text="x", new_text="7", replace_all=True)]
    assert arguments == before


def test_model_tool_null_means_default_but_optional_keeps_none() -> None:
    tool = Tool("edit", "Edit a file.", FileEditParams)
    arguments = {
        "path": "a.py",
        "edits": [{"old_text": "x", "new_text": "y", "replace_all": None}],
        "limit": None,
        "note": None,
    }
    result = validate_tool_arguments(tool, _call(arguments))
    assert result.limit == 10
    assert result.note is None
    assert result.edits[0].replace_all is False


def test_model_tool_accepts_json_encoded_lists() -> None:
    tool = Tool("edit", "Edit a file.", FileEditParams)
    arguments = {"path": "a.py", "edits": '[{"old_text": "x", "new_text": "y"}]'}
    assert validate_tool_arguments(tool, _call(arguments)).edits == [ReplaceAll(old_text="x", new_text="y")]


def test_model_tool_error_text() -> None:
    tool = Tool("edit", "Edit a file.", FileEditParams)
    arguments = {"path": "a.py", "edits": [{"new_text": "y"}], "limit": "many"}
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call(arguments))
    assert str(caught.value) == (
        'Validation failed for tool "edit":\n'
        "  - edits.0.old_text: Field required\n"
        "  - limit: Input should be a valid integer, unable to parse string as an integer\n"
        "\n"
        "Received arguments:\n" + json.dumps(arguments, indent=2)
    )


def test_model_tool_forbidding_extras_says_so() -> None:
    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        a: int

    tool = Tool("t", "d", Strict)
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call({"a": 1, "b": 2}, name="t"))
    assert caught.value.errors == [("b", "Extra inputs are not permitted")]


def test_model_validator_crash_becomes_an_argument_error() -> None:
    class Fragile(BaseModel):
        a: int

        @model_validator(mode="before")
        @classmethod
        def _needs_b(cls, data: Any) -> Any:
            return {"a": data["b"]}

    tool = Tool("t", "d", Fragile)
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _call({"a": 1}, name="t"))
    assert caught.value.errors == [("root", "KeyError: 'b'")]


# --- strict mode: null stands for "use the default" -------------------------------------------


def test_strict_shaped_call_with_nulls_gets_defaults_for_json_schema() -> None:
    tool = Tool("edit", "Edit a file.", EDIT_SCHEMA, constrained_sampling=ConstrainedSampling("require"))
    strict, _ = tool.strict_json_schema()
    assert strict is not None
    # What a strict-mode model sends: every property present, null for those it leaves out.
    arguments = {"path": "a.py", "edits": [{"old_text": "x", "new_text": "y", "all": None}], "limit": None}
    Draft202012Validator(strict).validate(arguments)
    assert validate_tool_arguments(tool, _call(arguments)) == {
        "path": "a.py",
        "edits": [{"old_text": "x", "new_text": "y", "all": False}],
        "limit": 10,
    }


def test_strict_shaped_call_with_nulls_gets_defaults_for_models() -> None:
    tool = Tool("edit", "Edit a file.", FileEditParams, constrained_sampling=True)
    strict = to_strict_schema(tool.json_schema())
    arguments = {
        "path": "a.py",
        "edits": [{"old_text": "x", "new_text": "y", "replace_all": None}],
        "limit": None,
        "note": None,
        "ratio": None,
    }
    Draft202012Validator(strict).validate(arguments)
    result = validate_tool_arguments(tool, _call(arguments))
    assert (result.limit, result.note, result.ratio, result.edits[0].replace_all) == (10, None, 0.5, False)


# --- caching -----------------------------------------------------------------------------------


@pytest.fixture
def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    # Fresh caches, so this test's first use of a schema builds it.
    validation._compiled.cache_clear()
    built: list[Any] = []
    real = validation.build_compiled_schema

    def counting(parameters: Any, schema: dict[str, Any]) -> validation.CompiledSchema:
        built.append(parameters)
        return real(parameters, schema)

    monkeypatch.setattr(validation, "build_compiled_schema", counting)
    return built


def test_validator_is_built_once_per_schema(count_builds: list[Any]) -> None:
    tool = Tool("edit", "Edit a file.", copy.deepcopy(EDIT_SCHEMA))
    call = _call({"path": "a.py", "edits": [], "limit": "3"})
    first = compiled_schema(tool)
    for _ in range(3):
        validate_tool_arguments(tool, call)
    assert compiled_schema(tool) is first
    assert len(count_builds) == 1
    # A second tool with an equal schema shares the compiled validator.
    twin = Tool("edit2", "Same schema.", copy.deepcopy(EDIT_SCHEMA))
    assert compiled_schema(twin) is first
    assert len(count_builds) == 1
    # A different schema compiles anew.
    other = Tool("other", "d", {"type": "object", "properties": {"x": INT}})
    assert compiled_schema(other) is not first
    assert len(count_builds) == 2


def test_model_validator_is_built_once_per_model(count_builds: list[Any]) -> None:
    tool = Tool("edit", "Edit a file.", FileEditParams)
    again = Tool("edit", "Edit a file.", FileEditParams)
    call = _call({"path": "a.py", "edits": [], "limit": None})
    validate_tool_arguments(tool, call)
    validate_tool_arguments(again, call)
    assert compiled_schema(tool) is compiled_schema(again)
    assert count_builds == [FileEditParams]


def test_cache_follows_a_replaced_schema(count_builds: list[Any]) -> None:
    tool = Tool("t", "d", {"type": "object", "properties": {"x": INT}})
    assert validate_tool_arguments(tool, _call({"x": "1"}, name="t")) == {"x": 1}
    tool.parameters = {"type": "object", "properties": {"x": BOOL}}
    tool._schema_cache = None  # what a tool does when its parameters change
    assert validate_tool_arguments(tool, _call({"x": "1"}, name="t")) == {"x": True}
    assert len(count_builds) == 2


def test_title_parameter_is_validated_like_any_other() -> None:
    class Note(BaseModel):
        title: str = Field(description="The note's title.")
        body: str = ""

    tool = Tool("note", "Write a note.", Note)
    assert validate_tool_arguments(tool, _call({"title": 5, "body": None}, name="note")) == Note(title="5")


# --------------------------------------------------------------------------- validation odd schemas


D3 = "http://json-schema.org/draft-03/schema#"
D7 = "http://json-schema.org/draft-07/schema#"


def _t_call(arguments: dict[str, Any], name: str = "t") -> ToolCall:
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
        validate_tool_arguments(tool, _t_call({"edits": [{"Replace": stray, "old_text": ["x"], "new_text": "b"}]}))
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
    assert validate_tool_arguments(tool, _t_call({"f": sent, "limit": "5"})) == {
        "f": wanted,
        "limit": 5,
    }


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
        validate_tool_arguments(tool, _t_call(arguments))
    except ToolArgumentsError:
        pass


def test_a_missing_draft3_required_property_is_reported() -> None:
    """Pre-existing at 57bea52 too (there the error was silently dropped and ``{}`` accepted); now a
    TypeError. Draft 3 ``required: true`` sits in the property: its error's ``validator_value`` is ``True``."""
    tool = Tool("t", "d", {"$schema": D3, "type": "object", "properties": {"x": {"type": "integer", "required": True}}})
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, _t_call({}))
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
        validate_tool_arguments(tool, _t_call({"x": "1"}, name="late"))
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
    result = validate_tool_arguments(Tool("t", "d", schema), _t_call({"a": shared, "b": shared}))
    assert result == {"a": {"n": 5}, "b": {"n": "5"}}


# --- 6. per-call cost of the content-keyed cache -------------------------------------------------


def test_a_cached_schema_is_not_serialised_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Base: one identity check per call. Now ``json.dumps`` of the whole schema on every call: 15 ms per
    call for an MCP tool with a 200 000-member enum (0.01 ms at base), +45 % on a small schema."""
    tool = Tool("t", "d", {"type": "object", "properties": {"c": {"enum": [f"m{i}" for i in range(1000)]}}})
    call = _t_call({"c": "m5"})
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
        validate_tool_arguments(Tool("t", "d", schema), _t_call({"root": node}))


# --------------------------------------------------------------------------- validation paths and nulls


def _errors(tool: Tool, arguments: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ToolArgumentsError) as caught:
        validate_tool_arguments(tool, ToolCall(id="c1", name=tool.name, arguments=arguments))
    return caught.value.errors


def _valid(tool: Tool, arguments: dict[str, Any]) -> Any:
    return validate_tool_arguments(tool, ToolCall(id="c1", name=tool.name, arguments=arguments))


# --- union fields: paths into the arguments -----------------------------------------------------


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
