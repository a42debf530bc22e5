"""The lenient pre-pass before the strict check: ``SchemaCoercer`` repairs the almost-right arguments models
send (``"42"`` for an integer) that neither ``jsonschema`` nor pydantic's lax mode accepts, where unambiguous.

Rules: ``docs/validation.md``; the full table: ``tests/ai/test_coercion.py``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
from typing import TYPE_CHECKING, Any

from pi_kernel.ai.pattern_check import pattern_matches

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

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


def resolve_local_ref(root: Any, ref: str) -> Any:
    """The target of a local ``$ref`` (``#`` or ``#/json/pointer``) in ``root``; ``LookupError`` if none."""
    from referencing import Registry, Resource
    from referencing.exceptions import Unresolvable

    try:
        return Registry().with_resource("", Resource.opaque(root)).resolver().lookup(ref).contents
    except (Unresolvable, ValueError, TypeError):  # (a pointer step into a string or number is a ValueError)
        raise LookupError(f"$ref {ref!r} points to nothing") from None


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
