"""``Tool``: what the model sees of a tool, the one schema behind it, and the checking of a call's arguments.

The schema is the single source of truth: ``json_schema()`` is what every
provider sends, and ``validate_tool_arguments`` checks arguments against the same
parameters. ``parameters`` may be a pydantic model class or a JSON-schema dict.

``validate_tool_arguments`` checks a copy of a call's arguments, repairs it, checks again and explains
(behaviour and error text: ``docs/validation.md``). The repair is ``SchemaCoercer``, the lenient pre-pass
before the strict check: it repairs the almost-right arguments models send (``"42"`` for an integer) that
neither ``jsonschema`` nor pydantic's lax mode accepts, where unambiguous (the full table:
``tests/ai/test_coercion.py``). ``jsonschema`` and ``referencing`` are imported inside functions: they take
about a second, which a kernel that runs no tool should not pay.

Schema ``pattern`` checks cannot freeze the kernel: a schema may come from someone else (an MCP server's
``inputSchema``), and a ``pattern`` such as ``^(a+)+$`` makes Python's ``re`` backtrack for minutes on a
short string, on the kernel's event loop, where no interrupt reaches it. ``bounded_validator`` gives a
``jsonschema`` validator class whose ``pattern`` and ``patternProperties`` checks use the ``regex`` module
with a time limit (``PATTERN_SECONDS``) instead. A check that runs out of time is an error the model reads
(the value is not sent unchecked). A pattern ``regex`` cannot compile is checked with ``re`` as before.

Long: the one schema, its strict form and the lenient-then-strict checking of a call belong to one concept,
the tool as the model sees it.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

import regex
from pydantic import BaseModel
from pydantic import ValidationError as ModelValidationError

from pi_kernel.ai.messages import ToolCall, clean_text
from pi_kernel.ai.strict_schema import StrictSchemaError, resolve_local_ref, to_strict_schema

if TYPE_CHECKING:
    from jsonschema import ValidationError as SchemaValidationError
    from jsonschema.protocols import Validator

StrictMode = Literal["prefer", "require"]


@dataclass(frozen=True, slots=True)
class ConstrainedSampling:
    """Ask the provider to constrain decoding to the tool's JSON schema."""

    strict: StrictMode = "prefer"
    """``prefer``: strict when the schema converts and the provider supports it;
    ``require``: a schema that cannot convert is an error at definition time."""
    type: Literal["json_schema"] = "json_schema"

    @classmethod
    def coerce(cls, value: object) -> ConstrainedSampling | None:
        """Normalise every accepted spelling; ``None`` means off.

        pi writes the config as an object (``{"type": "json_schema", "strict":
        "require"}``), so a mapping is accepted too. Anything else raises
        ``TypeError`` rather than being silently ignored: an ignored
        ``"require"`` would skip the definition-time check it asks for.
        """
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, Mapping):
            unknown = set(value) - {"type", "strict"}
            if unknown:
                raise TypeError(f"constrained_sampling has unsupported keys {sorted(unknown)!r}: {dict(value)!r}")
            value = cls(strict=value.get("strict", "prefer"), type=value.get("type", "json_schema"))
        if not isinstance(value, cls):
            raise TypeError(
                "constrained_sampling must be a bool, a ConstrainedSampling or a "
                f'{{"type": "json_schema", "strict": "prefer" | "require"}} dict, not {value!r}'
            )
        if value.type != "json_schema" or value.strict not in get_args(StrictMode):
            raise TypeError(
                f'constrained_sampling needs type "json_schema" and strict "prefer" or "require", not {value!r}'
            )
        return value


@dataclass(frozen=True, slots=True)
class _FrozenSchema:
    """A schema kept as the one shared dict plus a cheap way to hand out copies.

    Callers get copies so that editing one cannot change what later requests
    send. ``json.loads`` of the cached text is several times faster than
    ``copy.deepcopy``; it is used only when the JSON round trip is exact (no
    tuples, no non-string keys, nothing unserialisable), else deepcopy.
    """

    shared: dict[str, Any]
    text: str | None

    @classmethod
    def of(cls, schema: dict[str, Any]) -> _FrozenSchema:
        with contextlib.suppress(TypeError, ValueError):  # not JSON: copied with deepcopy
            text = json.dumps(schema)
            if json.loads(text) == schema:
                return cls(schema, text)
        return cls(schema, None)

    def copy(self) -> dict[str, Any]:
        if self.text is not None:
            result: dict[str, Any] = json.loads(self.text)
            return result
        return copy.deepcopy(self.shared)


TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What providers accept as a function name (OpenAI's rule; the others are the same or looser)."""


class ToolSchemaError(ValueError):
    """A tool definition that could never be sent: refused where the tool is defined."""


def check_tool_schema(name: Any, parameters: Any) -> dict[str, Any]:
    """The schema providers will get, checked now (``ToolSchemaError`` naming the tool otherwise): a name
    providers accept, a schema that exists, is plain JSON (no ``NaN``, no objects), describes an object and
    is a valid JSON schema. A bad definition must fail in the cell that defines it, not in every later
    request."""
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ToolSchemaError(f"Tool name {name!r} is not accepted by providers: use 1 to 64 letters, digits, _ or -")
    try:
        schema = schema_of(parameters)
    except Exception as error:  # noqa: BLE001 - pydantic raises many kinds for a model it cannot describe
        raise ToolSchemaError(
            f'Tool "{name}": its parameters have no JSON schema ({type(error).__name__}: {error})'
        ) from None
    try:
        text = json.dumps(schema, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")  # as the request body is encoded
    except UnicodeEncodeError:
        raise ToolSchemaError(
            f'Tool "{name}": its parameters schema holds text that is not valid Unicode (a lone surrogate)'
        ) from None
    except (TypeError, ValueError) as error:
        raise ToolSchemaError(f'Tool "{name}": its parameters schema is not plain JSON ({error})') from None
    if schema.get("type", "object") != "object":
        raise ToolSchemaError(f'Tool "{name}": its parameters schema must describe an object, not {schema["type"]!r}')
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import Draft202012Validator, validator_for

    try:
        plain = json.loads(text)  # as the provider reads it (a tuple is a JSON array)
        validator_for(plain, default=Draft202012Validator).check_schema(plain)
    except SchemaError as error:
        where = "/".join(str(part) for part in error.path) or "root"
        raise ToolSchemaError(
            f'Tool "{name}": its parameters are not a valid JSON schema at {where}: {error.message}'
        ) from None
    return schema


@dataclass(eq=False)
class Tool:
    name: str
    """The name the model calls the tool by."""
    description: str
    """What the tool does, for the model."""
    parameters: type[BaseModel] | dict[str, Any]
    """A pydantic model class or a JSON-schema dict (an object schema)."""
    constrained_sampling: bool | ConstrainedSampling | Mapping[str, Any] | None = False
    """``True`` means ``ConstrainedSampling("prefer")``; pi's dict form
    ``{"type": "json_schema", "strict": "require"}`` is converted to the
    dataclass; ``None`` is the same as ``False``."""
    _schema_cache: _FrozenSchema | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.description = clean_text(self.description) if isinstance(self.description, str) else self.description
        self._schema_cache = _FrozenSchema.of(check_tool_schema(self.name, self.parameters))
        sampling = ConstrainedSampling.coerce(self.constrained_sampling)
        self.constrained_sampling = False if sampling is None else sampling
        if self.strict_mode == "require":
            strict, problem = self._strict
            if strict is None:
                raise ValueError(
                    f'Tool "{self.name}" requires strict constrained sampling, '
                    f"but its schema cannot be converted to the strict subset: {problem}"
                )

    @property
    def strict_mode(self) -> StrictMode | None:
        sampling = self.constrained_sampling
        return sampling.strict if isinstance(sampling, ConstrainedSampling) else None

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema providers see (titles removed, computed once), a fresh copy each call."""
        return self._frozen_schema().copy()

    def shared_json_schema(self) -> dict[str, Any]:
        """The one cached schema object itself; read it, never change it.

        For per-call readers inside the library that must not pay for a copy:
        validation reads it on every call.
        """
        return self._frozen_schema().shared

    def _frozen_schema(self) -> _FrozenSchema:
        if self._schema_cache is None:  # the parameters changed (``_schema_cache`` reset)
            self._schema_cache = _FrozenSchema.of(schema_of(self.parameters))
        return self._schema_cache

    def strict_json_schema(self) -> tuple[dict[str, Any] | None, str | None]:
        """``(strict schema, None)``, or ``(None, why it cannot convert)``; a copy, as ``json_schema()``."""
        strict, problem = self._strict
        return (None if strict is None else strict.copy()), problem

    @functools.cached_property
    def _strict(self) -> tuple[_FrozenSchema | None, str | None]:
        try:
            return _FrozenSchema.of(to_strict_schema(self.shared_json_schema())), None
        except StrictSchemaError as error:
            return None, str(error)

    def uses_strict_mode(self, provider_supports_strict: bool) -> bool:
        """Whether ``strict: true`` goes into the request for this tool."""
        return self.strict_mode is not None and provider_supports_strict and self._strict[0] is not None


def schema_of(parameters: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a model class or a schema dict, with titles removed."""
    if isinstance(parameters, dict):
        schema = copy.deepcopy(parameters)
    elif isinstance(parameters, type) and issubclass(parameters, BaseModel):
        schema = parameters.model_json_schema()
    else:
        raise TypeError(f"Tool parameters must be a pydantic model class or a JSON-schema dict, not {parameters!r}")
    strip_titles(schema)
    if "type" not in schema and "properties" in schema:
        schema["type"] = "object"
    return schema


def strip_titles(schema: dict[str, Any]) -> None:
    """Remove ``title`` keywords in place, at schema positions only (``referencing``'s, of drafts 7 and 2020-12):
    a property *named* ``title`` sits under ``properties`` and is a schema, not a keyword, so it survives."""
    from referencing.jsonschema import DRAFT7, DRAFT202012

    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        node.pop("title", None)
        children: dict[int, Any] = {}  # by identity: both drafts name most subschemas
        for draft in (DRAFT7, DRAFT202012):
            with contextlib.suppress(AttributeError, TypeError):  # a malformed keyword: the schema check says
                children.update((id(child), child) for child in draft.subresources_of(node))
        stack.extend(children.values())


# --- Checking a call's arguments: ``validate_tool_arguments``

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
    (``None`` for a schema-dict tool); ``pattern`` checks are time-limited (``bounded_validator``). A schema dict
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


# --- The lenient pre-pass: ``SchemaCoercer``

_NONE = object()  # no value: ``_convert`` could not convert, or a schema has no ``default``
_MAX_DEPTH = 200  # how deep the walk goes, so that a ``$ref`` cycle ends
_KIND_OF = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null", list: "array"}
_BOOLEAN_TEXT = {"true": True, "false": False, "1": True, "0": False}
_TRIAL_BUDGET = 1000  # union branches tried per call (a recursive union with a bad leaf: ~2^depth trials)


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data: each dict and list rebuilt (``copy.deepcopy`` keeps a shared one shared)."""
    if type(value) is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if type(value) is list:
        return [copy_json(item) for item in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else copy.deepcopy(value)


def _list(schema: dict[str, Any], key: str) -> list[Any]:
    """``schema[key]`` if a list, else ``[]`` (draft 3 ``required: true``; a keyword unknown to the draft)."""
    value = schema.get(key)
    return value if isinstance(value, list) else []


class SchemaCoercer:
    """Coercion for one root schema (checked by ``Tool``: every keyword has its JSON type); build once.

    ``validator`` (for the root) tries union branches and ``null``. A ``null`` that means "not given" (see
    ``docs/validation.md``; ``null_means_unset`` for strict mode) is dropped, or is the ``default`` (``fill_defaults``).
    """

    def __init__(self, root: Any, validator: Validator, *, fill_defaults: bool = True, null_means_unset: bool = False):
        self.root = root
        self.validator = validator
        self.fill_defaults = fill_defaults
        self.null_means_unset = null_means_unset

    def coerce_in_place(self, value: Any, schema: Any = None) -> Any:
        """Coerce ``value`` (containers are changed in place) for ``schema`` (default: the root); return it."""
        return self._coerce(value, self.root if schema is None else schema, 0, [_TRIAL_BUDGET])

    def _valid(self, value: Any, schema: Any) -> bool:
        validator = self.validator if schema is self.root else self.validator.evolve(schema=schema)
        return bool(validator.is_valid(value))

    def _coerce(self, value: Any, schema: Any, depth: int, budget: list[int]) -> Any:
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return value
        if "$ref" in schema:
            with contextlib.suppress(LookupError):  # the strict check reports an unresolvable $ref
                value = self._coerce(value, resolve_local_ref(self.root, schema["$ref"]), depth + 1, budget)
        for part in _list(schema, "allOf"):
            value = self._coerce(value, part, depth + 1, budget)
        for branches in (_list(schema, "anyOf"), _list(schema, "oneOf")):
            if branches:
                value = self._coerce_union(value, branches, depth, budget)
        value = self._coerce_scalar(value, schema)
        if type(value) is dict:
            self._coerce_object(value, schema, depth, budget)
        elif type(value) is list:
            prefix, items = _list(schema, "prefixItems"), schema.get("items")
            if isinstance(items, list):  # draft 7 and older: a list of items is the tuple form
                prefix, items = items, schema.get("additionalItems")
            for index, item in enumerate(value):
                value[index] = self._coerce(item, prefix[index] if index < len(prefix) else items, depth + 1, budget)
        return value

    def _coerce_union(self, value: Any, branches: list[Any], depth: int, budget: list[int]) -> Any:
        """A value that fits a branch is kept; else the first that fits after coercion, while trials are left."""
        if budget[0] <= 0:
            return value
        fitting = next((branch for branch in branches if self._valid(value, branch)), None)
        if fitting is not None:  # in strict mode still walked, to find the nulls that mean "not given"
            return self._coerce(value, fitting, depth + 1, budget) if self.null_means_unset else value
        for branch in branches:
            budget[0] -= 1
            if budget[0] < 0:
                return value
            trial = self._coerce(copy_json(value), branch, depth + 1, budget)
            if self._valid(trial, branch):
                return trial
        return value

    def _coerce_scalar(self, value: Any, schema: dict[str, Any]) -> Any:
        """``value`` as one of the schema's ``type``s, then as the type of an ``enum`` / ``const`` member."""
        kinds = _types_of(schema)
        if kinds and not any(self.validator.is_type(value, kind) for kind in kinds):
            value = next((new for new in (_convert(value, kind) for kind in kinds) if new is not _NONE), value)
        members = _list(schema, "enum") or ([schema["const"]] if "const" in schema else [])
        if members and not any(_same_json(value, member) for member in members):
            for member in members:
                converted = _convert(value, _KIND_OF.get(type(member), "object"))
                if converted is not _NONE and _same_json(converted, member):
                    return converted
        return value

    def _coerce_object(self, value: dict[str, Any], schema: dict[str, Any], depth: int, budget: list[int]) -> None:
        properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
        additional = schema.get("additionalProperties")
        for key in list(value):
            if key in properties:
                sub = properties[key]
                if value[key] is None and key not in _list(schema, "required") and self._null_is_unset(sub):
                    default = self._default(sub)
                    if default is not _NONE and self.fill_defaults:
                        value[key] = copy_json(default)
                    else:
                        del value[key]
                    continue
            else:
                sub = next((s for p, s in patterns.items() if pattern_matches(p, key)), additional)
            value[key] = self._coerce(value[key], sub, depth + 1, budget)

    def _null_is_unset(self, sub: Any) -> bool:
        if not self._valid(None, sub):
            return True
        # Strict mode: a nullable one too, unless its default is null (none in the schema: default_factory, or none).
        return self.null_means_unset and self._default(sub) is not None

    def _default(self, node: Any, depth: int = 0) -> Any:
        """The ``default`` in ``node`` or at the end of its ``$ref`` chain, else ``_NONE``."""
        if not isinstance(node, dict) or depth > _MAX_DEPTH:
            return _NONE
        if "default" in node or "$ref" not in node:
            return node.get("default", _NONE)
        with contextlib.suppress(LookupError):
            return self._default(resolve_local_ref(self.root, node["$ref"]), depth + 1)
        return _NONE


def _types_of(schema: dict[str, Any]) -> list[str]:
    """The ``type`` names (not draft 3's schemas in ``type``); none given: guessed from ``properties`` / ``items``."""
    kind = schema.get("type")
    if kind is not None:
        return [kind] if isinstance(kind, str) else [item for item in _list(schema, "type") if isinstance(item, str)]
    if "properties" in schema:
        return ["object"]
    return ["array"] if "items" in schema or "prefixItems" in schema else []


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` is not ``1``, ``1`` is ``1.0``, ``"1"`` is not ``1``."""
    if all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in (a, b)):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _convert(value: Any, kind: str) -> Any:
    """``value`` as JSON type ``kind``, or ``_NONE``."""
    if kind in ("integer", "number") and isinstance(value, str) and "_" not in value:  # JSON has no "1_000"
        with contextlib.suppress(ValueError):
            return int(value)  # exact, however many digits
        with contextlib.suppress(ValueError):
            number = float(value)
            if math.isfinite(number) and (number.is_integer() or kind == "number"):
                return int(number) if kind == "integer" else number
    if kind == "boolean":
        if isinstance(value, str):
            return _BOOLEAN_TEXT.get(value.strip().lower(), _NONE)
        return bool(value) if type(value) is int and value in (0, 1) else _NONE
    if kind == "string":
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value) if isinstance(value, (int, float)) and math.isfinite(value) else _NONE
    if kind == "null":
        return None if isinstance(value, str) and value.strip().lower() == "null" else _NONE
    if kind in ("array", "object") and isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser recurses
            return _NONE
        return parsed if isinstance(parsed, list if kind == "array" else dict) else _NONE
    return _NONE


# --- Time-limited ``pattern`` checks

PATTERN_SECONDS = 1.0
"""The longest one pattern check may take."""


class PatternTimeout(Exception):
    """The check of ``pattern`` against a value ran out of time."""


def _search(pattern: str, text: str) -> bool:
    """``re.search(pattern, text) is not None``, within ``PATTERN_SECONDS`` (else ``PatternTimeout``)."""
    try:
        compiled = regex.compile(pattern)
    except (regex.error, TypeError, ValueError):
        return re.search(pattern, text) is not None
    try:
        return compiled.search(text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        raise PatternTimeout(pattern) from None


def pattern_matches(pattern: str, key: str) -> bool:
    """Whether a property name matches a ``patternProperties`` pattern (time-limited, as ``search``);
    a pattern that does not compile or runs out of time does not match."""
    try:
        return _search(pattern, key)
    except (PatternTimeout, re.error):
        return False


def _too_slow(pattern: str) -> str:
    return f"could not be checked against the pattern {pattern!r} within {PATTERN_SECONDS:g} s"


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    try:
        matched = _search(pattern, instance)
    except PatternTimeout:
        yield ValidationError(f"{instance[:80]!r} {_too_slow(pattern)}")
        return
    if not matched:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = _search(pattern, key)
            except PatternTimeout:
                yield ValidationError(f"the property name {key[:80]!r} {_too_slow(pattern)}")
                continue
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


@functools.cache
def bounded_validator(cls: type) -> type:
    """``cls`` (a ``jsonschema`` validator class) with time-limited ``pattern`` and ``patternProperties``."""
    from jsonschema.validators import extend

    extended: type = extend(cls, {"pattern": _pattern, "patternProperties": _pattern_properties})
    return extended
