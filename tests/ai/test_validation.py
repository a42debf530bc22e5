"""Tool-argument validation: lenient coercion, strict check, readable errors, caching.

The coercion table itself is in test_coercion.py.
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any, Optional

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, model_validator

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


class Replace(BaseModel):
    old_text: str
    new_text: str
    replace_all: bool = False


class EditParams(BaseModel):
    path: str
    edits: list[Replace]
    limit: int = 10
    note: Optional[str] = None  # noqa: UP045 - an Optional spelled the classic way on purpose
    ratio: float = 0.5


def test_model_tool_is_lax_and_returns_an_instance() -> None:
    tool = Tool("edit", "Edit a file.", EditParams)
    arguments = {
        "path": "a.py",
        "edits": [{"old_text": "x", "new_text": 7, "replace_all": "TRUE"}],
        "limit": "42",
        "ratio": "1e-1",
    }
    before = copy.deepcopy(arguments)
    result = validate_tool_arguments(tool, _call(arguments))
    assert isinstance(result, EditParams)
    assert result.limit == 42
    assert result.ratio == 0.1
    assert result.edits == [Replace(old_text="x", new_text="7", replace_all=True)]
    assert arguments == before


def test_model_tool_null_means_default_but_optional_keeps_none() -> None:
    tool = Tool("edit", "Edit a file.", EditParams)
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
    tool = Tool("edit", "Edit a file.", EditParams)
    arguments = {"path": "a.py", "edits": '[{"old_text": "x", "new_text": "y"}]'}
    assert validate_tool_arguments(tool, _call(arguments)).edits == [Replace(old_text="x", new_text="y")]


def test_model_tool_error_text() -> None:
    tool = Tool("edit", "Edit a file.", EditParams)
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
    tool = Tool("edit", "Edit a file.", EditParams, constrained_sampling=True)
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
    tool = Tool("edit", "Edit a file.", EditParams)
    again = Tool("edit", "Edit a file.", EditParams)
    call = _call({"path": "a.py", "edits": [], "limit": None})
    validate_tool_arguments(tool, call)
    validate_tool_arguments(again, call)
    assert compiled_schema(tool) is compiled_schema(again)
    assert count_builds == [EditParams]


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
