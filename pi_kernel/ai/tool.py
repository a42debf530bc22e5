"""``Tool``: what the model sees of a tool, and the one schema behind it.

The schema is the single source of truth: ``json_schema()`` is what every
provider sends, and validation checks arguments against the same parameters.
``parameters`` may be a pydantic model class or a JSON-schema dict.

``pi_kernel.ai.strict_schema`` is imported lazily, when a provider first asks
for a strict schema: this module loads with ``pi_kernel.ai`` at kernel start,
where it would cost about 3 ms.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel

from pi_kernel.ai.messages import clean_text

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
        try:
            text: str | None = json.dumps(schema)
        except (TypeError, ValueError):
            text = None
        if text is not None and json.loads(text) != schema:
            text = None
        return cls(schema, text)

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
        json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ToolSchemaError(f'Tool "{name}": its parameters schema is not plain JSON ({error})') from None
    try:
        json.dumps(schema, ensure_ascii=False).encode("utf-8")  # as the request body is encoded
    except UnicodeEncodeError:
        raise ToolSchemaError(
            f'Tool "{name}": its parameters schema holds text that is not valid Unicode (a lone surrogate)'
        ) from None
    if schema.get("type", "object") != "object":
        raise ToolSchemaError(f'Tool "{name}": its parameters schema must describe an object, not {schema["type"]!r}')
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import Draft202012Validator, validator_for

    try:
        plain = json.loads(json.dumps(schema))  # as the provider reads it (a tuple is a JSON array)
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
    _strict_cache: tuple[_FrozenSchema | None, str | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.description = clean_text(self.description) if isinstance(self.description, str) else self.description
        self._schema_cache = _FrozenSchema.of(check_tool_schema(self.name, self.parameters))
        sampling = ConstrainedSampling.coerce(self.constrained_sampling)
        self.constrained_sampling = False if sampling is None else sampling
        if self.strict_mode == "require":
            strict, problem = self._strict()
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
        """The JSON schema providers see (titles removed, computed once).

        A fresh copy each call: a caller that edits it must not change what
        every later request sends.
        """
        return self._frozen_schema().copy()

    def shared_json_schema(self) -> dict[str, Any]:
        """The one cached schema object itself; read it, never change it.

        For per-call readers inside the library that must not pay for a copy:
        validation reads it on every call.
        """
        return self._frozen_schema().shared

    def _frozen_schema(self) -> _FrozenSchema:
        if self._schema_cache is None:
            self._schema_cache = _FrozenSchema.of(schema_of(self.parameters))
        return self._schema_cache

    def strict_json_schema(self) -> tuple[dict[str, Any] | None, str | None]:
        """``(strict schema, None)``, or ``(None, why it cannot convert)``; a copy, as ``json_schema()``."""
        strict, problem = self._strict()
        return (None if strict is None else strict.copy()), problem

    def _strict(self) -> tuple[_FrozenSchema | None, str | None]:
        if self._strict_cache is None:
            from pi_kernel.ai.strict_schema import StrictSchemaError, to_strict_schema

            try:
                self._strict_cache = (_FrozenSchema.of(to_strict_schema(self.shared_json_schema())), None)
            except StrictSchemaError as error:
                self._strict_cache = (None, str(error))
        return self._strict_cache

    def uses_strict_mode(self, provider_supports_strict: bool) -> bool:
        """Whether ``strict: true`` goes into the request for this tool."""
        if self.strict_mode is None or not provider_supports_strict:
            return False
        return self._strict()[0] is not None


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


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_VALUES = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "contentSchema",
)


def strip_titles(schema: dict[str, Any]) -> None:
    """Remove ``title`` keywords in place, walking schema positions only.

    A property *named* ``title`` sits under ``properties`` and is a schema, not
    a keyword, so it survives; pydantic's generated titles go.
    """
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        node.pop("title", None)
        for key in _SCHEMA_MAPS:
            sub = node.get(key)
            if isinstance(sub, dict):
                stack.extend(sub.values())
        for key in _SCHEMA_LISTS:
            sub = node.get(key)
            if isinstance(sub, list):
                stack.extend(sub)
        for key in _SCHEMA_VALUES:
            sub = node.get(key)
            if isinstance(sub, dict):
                stack.append(sub)
            elif isinstance(sub, list):
                stack.extend(sub)
