"""``validate_tool_arguments``: copy, coerce leniently, check strictly, explain failures.

The arguments a model sends are untrusted. They are copied (the transcript keeps
what the model really sent), repaired where the repair is unambiguous (see
``coercion``), and then checked strictly: a pydantic model in lax mode, or a
JSON schema with ``jsonschema``. A failure raises ``ToolArgumentsError`` whose
text is written for the model to read and correct itself::

    Validation failed for tool "edit":
      - edits.0.old_text: Field required

    Received arguments:
    { ... what the model sent ... }

Paths are dotted places in what the model sent (``edits.0.old_text``), never
pydantic's union-branch tags. When the arguments were not valid JSON at all,
"Received arguments" shows the raw text the model wrote (there is no object to
dump, and the text is what it must fix). For a tool sent in strict mode, a
``null`` for an optional parameter means "not given", so its default applies
(a strict-mode model has to send every property). See ``docs/validation.md``.

Fast path first: arguments that are already valid skip coercion entirely, so
the common call costs one copy and one check. Compiled validators are cached.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic import ValidationError as ModelValidationError

from pi_kernel.ai.coercion import SchemaCoercer, copy_json
from pi_kernel.ai.error_paths import ErrorList, describe_schema_error, dotted, model_error_path
from pi_kernel.ai.messages import ToolCall
from pi_kernel.ai.tool import Tool

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# ``jsonschema`` is imported where a schema is compiled or checked, not here:
# importing it costs about a second (rfc3987_syntax), and a kernel that has
# not run a tool yet should not pay for it.


class ToolArgumentsError(ValueError):
    """A tool call's arguments failed validation; ``str()`` is the text for the model."""

    def __init__(self, tool_name: str, errors: ErrorList, received: Any, *, received_text: str | None = None) -> None:
        self.tool_name = tool_name
        """The tool the model called."""
        self.errors = errors
        """``(path, message)`` for each problem."""
        self.received = received
        """What the model sent: the arguments, or the raw text when it was not valid JSON."""
        if received_text is None:
            received_text = _dump(received)
        lines = "\n".join(f"  - {path}: {message}" for path, message in errors)
        super().__init__(f'Validation failed for tool "{tool_name}":\n{lines}\n\nReceived arguments:\n{received_text}')
        self._received_text = received_text

    def __reduce__(self) -> tuple[Any, ...]:
        # ``BaseException`` pickles as ``cls(*self.args)``, which does not fit this signature.
        return (_rebuild_error, (self.tool_name, self.errors, self.received, self._received_text))


def _rebuild_error(tool_name: str, errors: ErrorList, received: Any, received_text: str) -> ToolArgumentsError:
    return ToolArgumentsError(tool_name, errors, received, received_text=received_text)


def validate_tool_arguments(tool: Tool, tool_call: ToolCall) -> Any:
    """The validated arguments: a model instance for a model tool, a dict for a JSON-schema tool.

    ``tool_call.arguments`` is never mutated. Raises ``ToolArgumentsError``.
    """
    received: Any = tool_call.arguments
    received_text: str | None = None
    if tool_call.raw_arguments is not None:
        received, received_text = tool_call.raw_arguments, tool_call.raw_arguments
        try:
            received = json.loads(tool_call.raw_arguments)
        except (ValueError, RecursionError) as error:
            reason = error if isinstance(error, ValueError) else "nested too deeply"
            problem = f"The arguments are not valid JSON ({reason})"
            raise ToolArgumentsError(
                tool_call.name, [("root", problem)], received, received_text=received_text
            ) from None
        if not isinstance(received, dict):
            problem = f"The arguments must be a JSON object, not {_json_kind(received)}"
            raise ToolArgumentsError(tool_call.name, [("root", problem)], received, received_text=received_text)
    compiled = compiled_schema(tool)
    arguments = copy_json(received)  # the contract's deep copy; everything below works on it
    if tool.uses_strict_mode(provider_supports_strict=True) and isinstance(arguments, dict):
        # Sent in strict mode, the model had to fill every property: its nulls
        # stand for "use the default" even where the parameter is nullable.
        arguments = compiled.strict_coercer.coerce_in_place(arguments)
    if compiled.model is not None:
        result, errors = _check_model(compiled, arguments)
    else:
        result, errors = _check_json(compiled, tool, arguments)
    if errors:
        raise ToolArgumentsError(tool_call.name, errors, received, received_text=received_text)
    return result


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """Everything validation needs for one tool schema, built once."""

    validator: Validator
    """``jsonschema`` validator for the tool's JSON schema (its ``$schema`` draft, else 2020-12)."""
    coercer: SchemaCoercer
    """Lenient coercion guided by the same schema."""
    model: type[BaseModel] | None
    """The pydantic model class, when the tool has one (it then decides validity)."""
    strict_coercer: SchemaCoercer
    """For tools sent in strict mode: also reads ``null`` as "not given" where the
    parameter is nullable (unless its default is ``null``); runs before the first check."""


def build_compiled_schema(parameters: type[BaseModel] | dict[str, Any], schema: dict[str, Any]) -> CompiledSchema:
    """Build the validator and coercer for ``schema`` (the tool's ``shared_json_schema()``)."""
    from jsonschema.validators import Draft202012Validator, validator_for

    if isinstance(parameters, type) and issubclass(parameters, BaseModel):
        validator = Draft202012Validator(schema)  # pydantic emits 2020-12
        # Drop, do not fill: pydantic applies its own default (and default_factory).
        return _compiled(schema, validator, parameters, fill_defaults=False)
    cls = validator_for(schema, default=Draft202012Validator)
    cls.check_schema(schema)  # a broken schema is the tool author's error: say so once, clearly
    validator = cls(schema)
    return _compiled(schema, validator, None, fill_defaults=True)


def _compiled(
    schema: dict[str, Any], validator: Validator, model: type[BaseModel] | None, *, fill_defaults: bool
) -> CompiledSchema:
    return CompiledSchema(
        validator=validator,
        coercer=SchemaCoercer(schema, fill_defaults=fill_defaults, validator=validator),
        model=model,
        strict_coercer=SchemaCoercer(schema, fill_defaults=fill_defaults, null_means_unset=True, validator=validator),
    )


# Cache. Two levels, because a dict cannot be weakly referenced:
# 1. per Tool object (weakly held), remembering the exact shared_json_schema() object it
#    was built from: one dict lookup and one identity check per call, and the
#    entry dies with the tool;
# 2. shared by content, so that equal schemas (a tool re-wrapped every prompt,
#    several tools with one schema) compile once: a pydantic model class (weakly
#    held), or the canonical JSON text of a dict schema in a bounded LRU. The
#    canonical text is computed only on a level-1 miss.
_by_tool: weakref.WeakKeyDictionary[Tool, tuple[dict[str, Any], CompiledSchema]] = weakref.WeakKeyDictionary()
_by_model: weakref.WeakKeyDictionary[type[BaseModel], CompiledSchema] = weakref.WeakKeyDictionary()
_by_text: OrderedDict[str, CompiledSchema] = OrderedDict()
_BY_TEXT_LIMIT = 256
_lock = threading.Lock()


def compiled_schema(tool: Tool) -> CompiledSchema:
    """The cached ``CompiledSchema`` for ``tool`` (built on first use)."""
    schema = tool.shared_json_schema()
    try:
        entry = _by_tool.get(tool)
    except TypeError:  # an unhashable Tool subclass: use the content-keyed level only
        return _shared_compiled(tool, schema)
    if entry is not None and entry[0] is schema:
        return entry[1]
    compiled = _shared_compiled(tool, schema)
    _by_tool[tool] = (schema, compiled)
    return compiled


def _shared_compiled(tool: Tool, schema: dict[str, Any]) -> CompiledSchema:
    parameters = tool.parameters
    if isinstance(parameters, type) and issubclass(parameters, BaseModel):
        compiled = _by_model.get(parameters)
        if compiled is None:
            compiled = _by_model[parameters] = _build(tool, parameters, schema)
        return compiled
    text = json.dumps(schema, sort_keys=True, default=repr)
    with _lock:
        compiled = _by_text.get(text)
        if compiled is not None:
            _by_text.move_to_end(text)
            return compiled
    compiled = _build(tool, parameters, schema)
    with _lock:
        _by_text[text] = compiled
        while len(_by_text) > _BY_TEXT_LIMIT:
            _by_text.popitem(last=False)
    return compiled


def _build(tool: Tool, parameters: type[BaseModel] | dict[str, Any], schema: dict[str, Any]) -> CompiledSchema:
    from jsonschema import exceptions as schema_exceptions

    try:
        return build_compiled_schema(parameters, schema)
    except schema_exceptions.SchemaError as error:
        raise ValueError(f'Tool "{tool.name}" has an invalid parameters schema: {error.message}') from None


def clear_validation_cache() -> None:
    """Forget every compiled schema (tests, or after editing a schema in place)."""
    with _lock:
        _by_tool.clear()
        _by_model.clear()
        _by_text.clear()


def _check_model(compiled: CompiledSchema, arguments: Any) -> tuple[Any, ErrorList]:
    """Lax pydantic validation; on failure coerce, then validate once more."""
    model = compiled.model
    assert model is not None
    try:
        return model.model_validate(arguments, strict=False), []
    except ModelValidationError:
        pass
    except (TypeError, AttributeError, KeyError, IndexError) as error:
        # A model validator that crashed on odd input: still the model's input to fix.
        return None, [("root", f"{type(error).__name__}: {error}")]
    arguments = compiled.coercer.coerce_in_place(arguments)
    try:
        return model.model_validate(arguments, strict=False), []
    except ModelValidationError as error:
        errors: ErrorList = []
        for item in error.errors(include_url=False):
            path = model_error_path(item["loc"], arguments, item.get("input"), item["type"])
            described = (dotted(path), item["msg"])
            if described not in errors:
                errors.append(described)
        return None, errors
    except (TypeError, AttributeError, KeyError, IndexError) as error:
        return None, [("root", f"{type(error).__name__}: {error}")]


def _check_json(compiled: CompiledSchema, tool: Tool, arguments: Any) -> tuple[Any, ErrorList]:
    """``jsonschema`` check; on failure coerce, then list what is still wrong."""
    from jsonschema import exceptions as schema_exceptions
    from referencing.exceptions import Unresolvable

    validator = compiled.validator
    try:
        if validator.is_valid(arguments):
            return arguments, []
        arguments = compiled.coercer.coerce_in_place(arguments)
        raw_errors = list(validator.iter_errors(arguments))
    except schema_exceptions.SchemaError as error:
        raise ValueError(f'Tool "{tool.name}" has an invalid parameters schema: {error.message}') from None
    except Unresolvable as error:
        raise ValueError(f'Tool "{tool.name}" has an unresolvable $ref in its parameters schema: {error}') from None
    if not raw_errors:
        return arguments, []
    errors: ErrorList = []
    for raw in raw_errors:
        for item in describe_schema_error(raw):
            if item not in errors:
                errors.append(item)
    return None, errors


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, indent=2)
    except (TypeError, ValueError):  # a prepare_arguments hook put non-JSON values in
        return json.dumps(value, indent=2, default=repr)


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"
