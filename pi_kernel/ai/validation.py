"""``validate_tool_arguments``: copy, check, coerce leniently, check again, explain failures.

The arguments a model sends are untrusted. A copy is checked strictly
(pydantic in lax mode for a model tool, ``jsonschema`` for a schema dict);
only if that fails is it repaired where the repair is unambiguous (the
``coercion`` pre-pass) and checked once more. What is still wrong raises
``ToolArgumentsError``, written for the model to read and correct itself
(dotted paths, see ``error_paths``). The behaviour and the error text are
documented in ``docs/validation.md``. Compiled validators are cached per tool
and per schema content. ``jsonschema`` is imported where a schema is compiled
or checked: importing it takes seconds, which a kernel that runs no tool should not pay.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic import ValidationError as ModelValidationError

from pi_kernel.ai.coercion import SchemaCoercer, copy_json
from pi_kernel.ai.error_paths import ErrorList, describe_schema_error, dotted, model_error_path
from pi_kernel.ai.messages import ToolCall
from pi_kernel.ai.pattern_check import bounded_validator
from pi_kernel.ai.tool import Tool

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_JSON_KIND = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


class ToolArgumentsError(ValueError):
    """A tool call's arguments failed validation; ``str()`` is the text for the model."""

    def __init__(self, tool_name: str, errors: ErrorList, received: Any, received_text: str | None = None) -> None:
        self.tool_name = tool_name
        """The tool the model called."""
        self.errors = errors
        """``(path, message)`` for each problem."""
        self.received = received
        """What the model sent: the arguments, or the raw text when it was not valid JSON."""
        self.received_text = _dump(received) if received_text is None else received_text
        """``received`` as the model reads it."""
        lines = "\n".join(f"  - {path}: {message}" for path, message in errors)
        text = f'Validation failed for tool "{tool_name}":\n{lines}\n\nReceived arguments:\n{self.received_text}'
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:  # ``BaseException`` would pickle as ``cls(*self.args)``
        return (type(self), (self.tool_name, self.errors, self.received, self.received_text))


def validate_tool_arguments(tool: Tool, tool_call: ToolCall) -> Any:
    """The validated arguments: a model instance for a model tool, a dict for a JSON-schema tool.

    ``tool_call.arguments`` is never mutated. Raises ``ToolArgumentsError``.
    """
    received: Any = tool_call.arguments
    raw = tool_call.raw_arguments
    if raw is not None:
        try:
            received = json.loads(raw)
        except (ValueError, RecursionError) as error:
            reason = error if isinstance(error, ValueError) else "nested too deeply"
            problem = f"The arguments are not valid JSON ({reason})"
            raise ToolArgumentsError(tool_call.name, [("root", problem)], raw, raw) from None
        if not isinstance(received, dict):
            kind = _JSON_KIND.get(type(received), "a number")
            problem = f"The arguments must be a JSON object, not {kind}"
            raise ToolArgumentsError(tool_call.name, [("root", problem)], received, raw)
    compiled = compiled_schema(tool)
    arguments = copy_json(received)  # the contract's deep copy; everything below works on it
    if tool.uses_strict_mode(provider_supports_strict=True) and isinstance(arguments, dict):
        # Sent in strict mode, the model had to fill every property: its nulls mean "use the default".
        arguments = compiled.strict_coercer.coerce_in_place(arguments)
    if compiled.model is not None:
        result, errors = _check_model(compiled, compiled.model, arguments)
    else:
        result, errors = _check_json(compiled, tool, arguments)
    if errors:
        raise ToolArgumentsError(tool_call.name, errors, received, raw)
    return result


def _check_model(compiled: CompiledSchema, model: type[BaseModel], arguments: Any) -> tuple[Any, ErrorList]:
    try:
        try:
            return model.model_validate(arguments, strict=False), []
        except ModelValidationError:
            arguments = compiled.coercer.coerce_in_place(arguments)
            return model.model_validate(arguments, strict=False), []
    except ModelValidationError as error:
        errors: ErrorList = []
        for item in error.errors(include_url=False):
            path = model_error_path(item["loc"], arguments, item.get("input"), item["type"])
            errors.append((dotted(path), item["msg"]))
        return None, list(dict.fromkeys(errors))  # without repeats, in order
    except (TypeError, AttributeError, KeyError, IndexError) as error:
        # A model validator that crashed on odd input: still the model's input to fix.
        return None, [("root", f"{type(error).__name__}: {error}")]


def _check_json(compiled: CompiledSchema, tool: Tool, arguments: Any) -> tuple[Any, ErrorList]:
    from referencing.exceptions import Unresolvable

    try:  # (a schema that breaks the metaschema was refused when it was compiled)
        if compiled.validator.is_valid(arguments):
            return arguments, []
        arguments = compiled.coercer.coerce_in_place(arguments)
        raw_errors = list(compiled.validator.iter_errors(arguments))
    except Unresolvable as error:
        raise ValueError(f'Tool "{tool.name}" has an unresolvable $ref in its parameters schema: {error}') from None
    errors = list(dict.fromkeys(item for raw in raw_errors for item in describe_schema_error(raw)))
    return (None, errors) if errors else (arguments, [])


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """Everything validation needs for one tool schema, built once."""

    validator: Validator
    """``jsonschema`` validator for the tool's JSON schema (its ``$schema`` draft, else 2020-12)."""
    coercer: SchemaCoercer
    """The lenient pre-pass, guided by the same schema."""
    model: type[BaseModel] | None
    """The pydantic model class, when the tool has one (it then decides validity)."""
    strict_coercer: SchemaCoercer
    """For tools sent in strict mode: also reads a nullable parameter's ``null`` as "not given"."""


def build_compiled_schema(parameters: type[BaseModel] | dict[str, Any], schema: dict[str, Any]) -> CompiledSchema:
    """Build the validator and coercers for ``schema`` (the tool's ``shared_json_schema()``)."""
    from jsonschema.validators import Draft202012Validator, validator_for

    model = parameters if isinstance(parameters, type) and issubclass(parameters, BaseModel) else None
    if model is not None:
        validator = bounded_validator(Draft202012Validator)(schema)  # pydantic emits 2020-12
    else:
        cls = validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)  # a broken schema is the tool author's error: say so once, clearly
        validator = bounded_validator(cls)(schema)  # a pattern cannot freeze the kernel (pattern_check)
    fill = model is None  # pydantic applies its own default (and default_factory): drop, do not fill
    coercer = SchemaCoercer(schema, validator, fill_defaults=fill)
    strict = SchemaCoercer(schema, validator, fill_defaults=fill, null_means_unset=True)
    return CompiledSchema(validator, coercer, model, strict)


# Cached per Tool (weakly held, with the exact schema object it was built from: one lookup and one identity
# check per call), then shared by content, so equal schemas compile once: the model class, or the canonical
# JSON of a schema dict, in one bounded least-recently-used table (which holds model classes strongly).
_by_tool: weakref.WeakKeyDictionary[Tool, tuple[dict[str, Any], CompiledSchema]] = weakref.WeakKeyDictionary()
_shared: dict[Any, CompiledSchema] = {}
_SHARED_LIMIT = 256
_lock = threading.Lock()


def compiled_schema(tool: Tool) -> CompiledSchema:
    """The cached ``CompiledSchema`` for ``tool`` (built on first use)."""
    schema = tool.shared_json_schema()
    try:
        entry = _by_tool.get(tool)
    except TypeError:  # an unhashable Tool subclass (a dataclass with eq=True): the shared level only
        return _shared_compiled(tool, schema)
    if entry is not None and entry[0] is schema:
        return entry[1]
    compiled = _shared_compiled(tool, schema)
    _by_tool[tool] = (schema, compiled)
    return compiled


def _shared_compiled(tool: Tool, schema: dict[str, Any]) -> CompiledSchema:
    from jsonschema.exceptions import SchemaError

    parameters = tool.parameters
    is_model = isinstance(parameters, type) and issubclass(parameters, BaseModel)
    key = parameters if is_model else json.dumps(schema, sort_keys=True, default=repr)
    with _lock:
        compiled = _shared.pop(key, None)
        if compiled is None:
            try:
                compiled = build_compiled_schema(parameters, schema)
            except SchemaError as error:
                raise ValueError(f'Tool "{tool.name}" has an invalid parameters schema: {error.message}') from None
        _shared[key] = compiled  # (re)inserted last: the most recently used
        if len(_shared) > _SHARED_LIMIT:
            del _shared[next(iter(_shared))]
    return compiled


def clear_validation_cache() -> None:
    """Forget every compiled schema (tests, or after editing a schema in place)."""
    with _lock:
        _by_tool.clear()
        _shared.clear()


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, indent=2)
    except (TypeError, ValueError):  # a prepare_arguments hook put non-JSON values in
        return json.dumps(value, indent=2, default=repr)
