"""``Tool``: what the model sees of a tool, and the one schema behind it.

The schema is the single source of truth: ``json_schema()`` is what every
provider sends, and validation checks arguments against the same parameters.
``parameters`` may be a pydantic model class or a JSON-schema dict.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

StrictMode = Literal["prefer", "require"]


@dataclass(frozen=True, slots=True)
class ConstrainedSampling:
    """Ask the provider to constrain decoding to the tool's JSON schema."""

    strict: StrictMode = "prefer"
    """``prefer``: strict when the schema converts and the provider supports it;
    ``require``: a schema that cannot convert is an error at definition time."""
    type: Literal["json_schema"] = "json_schema"


@dataclass(eq=False)
class Tool:
    name: str
    """The name the model calls the tool by."""
    description: str
    """What the tool does, for the model."""
    parameters: type[BaseModel] | dict[str, Any]
    """A pydantic model class or a JSON-schema dict (an object schema)."""
    constrained_sampling: bool | ConstrainedSampling = False
    """``True`` means ``ConstrainedSampling("prefer")``."""
    _schema_cache: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    _strict_cache: tuple[dict[str, Any] | None, str | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.constrained_sampling is True:
            self.constrained_sampling = ConstrainedSampling()
        if self.strict_mode == "require":
            strict, problem = self.strict_json_schema()
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
        """The JSON schema providers see (titles removed, computed once)."""
        if self._schema_cache is None:
            self._schema_cache = schema_of(self.parameters)
        return self._schema_cache

    def strict_json_schema(self) -> tuple[dict[str, Any] | None, str | None]:
        """``(strict schema, None)``, or ``(None, why it cannot convert)``."""
        if self._strict_cache is None:
            from pi_kernel.ai.strict_schema import StrictSchemaError, to_strict_schema

            try:
                self._strict_cache = (to_strict_schema(self.json_schema()), None)
            except StrictSchemaError as error:
                self._strict_cache = (None, str(error))
        return self._strict_cache

    def uses_strict_mode(self, provider_supports_strict: bool) -> bool:
        """Whether ``strict: true`` goes into the request for this tool."""
        if self.strict_mode is None or not provider_supports_strict:
            return False
        return self.strict_json_schema()[0] is not None


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


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")


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
