"""``validate_tool_arguments``: check a copy of a tool call's arguments, repair it, check again, explain.

Behaviour and error text: ``docs/validation.md``. ``jsonschema`` is imported inside functions: it takes
about a second, which a kernel that runs no tool should not pay.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic import ValidationError as ModelValidationError

from pi_kernel.ai.coercion import SchemaCoercer, copy_json
from pi_kernel.ai.messages import ToolCall
from pi_kernel.ai.pattern_check import bounded_validator, pattern_matches
from pi_kernel.ai.tool import Tool

if TYPE_CHECKING:
    from jsonschema import ValidationError as SchemaValidationError
    from jsonschema.protocols import Validator

ErrorList = list[tuple[str, str]]  # (dotted path, message) pairs
_JSON_KIND = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


class ToolArgumentsError(ValueError):
    """A tool call's arguments failed validation; ``str()`` is the text for the model.

    ``errors``: ``(path, message)`` for each problem. ``received``: what the model sent (the raw text when it
    was not valid JSON); ``received_text``: that as the model reads it (a ``prepare_arguments`` hook's
    non-JSON value as its ``repr``).
    """

    def __init__(self, tool_name: str, errors: ErrorList, received: Any, received_text: str | None = None) -> None:
        self.tool_name = tool_name
        self.errors = errors
        self.received = received
        self.received_text = json.dumps(received, indent=2, default=repr) if received_text is None else received_text
        lines = "\n".join(f"  - {path}: {message}" for path, message in errors)
        super().__init__(
            f'Validation failed for tool "{tool_name}":\n{lines}\n\nReceived arguments:\n{self.received_text}'
        )

    def __reduce__(self) -> tuple[Any, ...]:  # ``BaseException`` would pickle as ``cls(*self.args)``
        return (type(self), (self.tool_name, self.errors, self.received, self.received_text))


def validate_tool_arguments(tool: Tool, tool_call: ToolCall) -> Any:
    """The validated arguments: a model instance for a model tool, a dict for a JSON-schema tool. Raises
    ``ToolArgumentsError``; ``tool_call.arguments`` is never mutated."""
    from referencing.exceptions import Unresolvable

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
    arguments = copy_json(received)  # everything below works on (and may change) this copy
    if tool.uses_strict_mode(provider_supports_strict=True) and isinstance(arguments, dict):
        # Sent in strict mode, the model had to fill every property: its nulls mean "use the default".
        arguments = compiled.strict_coercer.coerce_in_place(arguments)
    try:
        result, errors = _check(compiled, arguments)
        if errors:
            result, errors = _check(compiled, compiled.coercer.coerce_in_place(arguments))
    except Unresolvable as error:
        raise ValueError(f'Tool "{tool.name}" has an unresolvable $ref in its parameters schema: {error}') from None
    if errors:  # without repeats, in order
        raise ToolArgumentsError(tool_call.name, list(dict.fromkeys(errors)), received, raw)
    return result


def _check(compiled: CompiledSchema, arguments: Any) -> tuple[Any, ErrorList]:
    """The result (a model instance for a model tool, else the arguments), and the errors found."""
    if compiled.model is None:
        return arguments, [
            item for error in compiled.validator.iter_errors(arguments) for item in _describe_schema_error(error)
        ]
    try:
        return compiled.model.model_validate(arguments, strict=False), []
    except ModelValidationError as error:
        return None, [
            (_model_error_path(item["loc"], arguments, item.get("input"), item["type"] == "missing"), item["msg"])
            for item in error.errors(include_url=False)
        ]
    except (TypeError, AttributeError, KeyError, IndexError) as error:
        # A model validator that crashed on odd input: still the model's input to fix.
        return None, [("root", f"{type(error).__name__}: {error}")]


# --- Where an error is, and which union branch to report (``best_match`` cannot: it returns one error, and
# for branches it rates alike, the generic union error).


def _dotted(path: Any) -> str:
    return ".".join(str(part) for part in path) or "root"


def _model_error_path(loc: tuple[int | str, ...], arguments: Any, error_input: Any, missing: bool) -> str:
    """Pydantic's ``loc`` as a dotted path into the arguments, without union-branch tags (``x.int`` is ``x``).

    A step is a key or index of the value reached, or a tag: the (bounded) ``exact`` search takes the reading
    that ends at the error's ``input``, stepping in before skipping, so a key spelt like a tag (``Replace``) is
    told apart; a "missing" error's last step names the absent field. None fits (a validator changed the
    value): the first reading, the steps that are keys or indexes of what was sent."""
    calls, last = [0], len(loc) - 1

    def search(position: int, node: Any, exact: bool) -> list[Any] | None:  # the steps from ``loc[position]`` on
        calls[0] += 1
        if exact and calls[0] > 2048:
            return None
        if position > last:
            return [] if not exact or _same(node, error_input) else None
        part = loc[position]
        if _has(node, part):
            rest = search(position + 1, node[part], exact)
            if rest is not None:
                return [part, *rest]
        elif position == last and missing and (not exact or (isinstance(node, dict) and _same(node, error_input))):
            return [part]
        return search(position + 1, node, exact)  # ``part`` as a tag

    found = search(0, arguments, exact=True)
    return _dotted(found if found is not None else search(0, arguments, exact=False))


def _has(node: Any, part: int | str) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node)


def _same(node: Any, error_input: Any) -> bool:
    try:
        return node is error_input or bool(node == error_input)
    except Exception:  # noqa: BLE001 - an odd value that cannot compare is simply not the one
        return False


def _describe_schema_error(error: SchemaValidationError) -> ErrorList:
    """Readable ``(path, message)`` pairs for one ``jsonschema`` error, worded like pydantic's where it can."""
    path, instance, schema = list(error.absolute_path), error.instance, error.schema
    if error.validator == "required":  # (``required`` and ``additionalProperties`` only fail on an object)
        if not isinstance(error.validator_value, list):  # draft 3: ``required: true`` in the property, its path
            return [(_dotted(path), "Field required")]
        return [(_dotted([*path, name]), "Field required") for name in error.validator_value if name not in instance]
    if error.validator == "additionalProperties" and error.validator_value is False:
        known, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        extras = [key for key in instance if key not in known and not any(pattern_matches(p, key) for p in patterns)]
        return [(_dotted([*path, key]), "Extra inputs are not permitted") for key in extras]
    meant = _branch_meant(error.context, len(path)) if error.validator in ("anyOf", "oneOf") else []
    described = [item for branch_error in meant for item in _describe_schema_error(branch_error)]
    return described or [(_dotted(path), error.message)]


def _branch_meant(errors: list[SchemaValidationError], depth: int) -> list[SchemaValidationError]:
    """The complaints of the union branch(es) the model most likely meant, or ``[]`` for none: set aside a
    branch whose type (``type``, ``enum``, ``const``) the value lacks, then, if any is left, one whose tag (a
    property's ``const``, ``kind: "cat"``) differs; of the rest, the one(s) with the fewest complaints."""
    by_branch: dict[Any, list[SchemaValidationError]] = {}
    for item in errors:
        by_branch.setdefault(item.relative_schema_path[0], []).append(item)  # the branch's index

    def mismatch(group: list[SchemaValidationError], validators: tuple[str, ...], extra: int) -> bool:
        return any(item.validator in validators and len(item.absolute_path) == depth + extra for item in group)

    candidates = [group for group in by_branch.values() if not mismatch(group, ("type", "enum", "const"), 0)]
    candidates = [group for group in candidates if not mismatch(group, ("const",), 1)] or candidates
    fewest = min((len(group) for group in candidates), default=0)
    return [item for group in candidates if len(group) == fewest for item in group]


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """What validation needs for one tool schema; ``model`` (a model tool's class) then decides validity."""

    validator: Validator
    model: type[BaseModel] | None
    coercer: SchemaCoercer
    strict_coercer: SchemaCoercer


def build_compiled_schema(model: type[BaseModel] | None, schema: dict[str, Any]) -> CompiledSchema:
    """Build the validator and coercers for a tool's ``schema`` (``Tool`` has checked it) and ``model``
    (``None`` for a schema-dict tool); ``pattern`` checks are time-limited (``pattern_check``). A schema dict
    is checked again (it may have changed since): ``SchemaError`` if broken."""
    from jsonschema.validators import Draft202012Validator, validator_for

    draft = Draft202012Validator if model is not None else validator_for(schema, default=Draft202012Validator)
    if model is None:
        draft.check_schema(schema)
    validator = bounded_validator(draft)(schema)
    fill = model is None  # pydantic applies its own default (and default_factory): drop, do not fill
    coercer = SchemaCoercer(schema, validator, fill_defaults=fill)
    strict_coercer = SchemaCoercer(schema, validator, fill_defaults=fill, null_means_unset=True)
    return CompiledSchema(validator, model, coercer, strict_coercer)


def compiled_schema(tool: Tool) -> CompiledSchema:
    """The ``CompiledSchema`` for ``tool``, cached by content (its model class, the schema's JSON text that
    ``Tool`` keeps: no serialising per call). A broken schema: a ``ValueError`` naming the tool (the author's)."""
    from jsonschema.exceptions import SchemaError

    model = None if isinstance(tool.parameters, dict) else tool.parameters
    frozen = tool._frozen_schema()
    text = frozen.text if frozen.text is not None else json.dumps(frozen.shared, default=repr)
    try:
        return _compiled(model, text)
    except SchemaError as error:
        raise ValueError(f'Tool "{tool.name}" has an invalid parameters schema: {error.message}') from None


@functools.lru_cache(maxsize=256)  # bounded: it holds model classes strongly
def _compiled(model: type[BaseModel] | None, schema_text: str) -> CompiledSchema:
    return build_compiled_schema(model, json.loads(schema_text))  # (``Tool`` checked: the schema is plain JSON)
