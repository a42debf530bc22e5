"""Convert a tool's JSON schema to the strict subset used for constrained sampling.

With ``strict: true`` a provider (OpenAI, and the OpenAI-compatible servers that
copy it) compiles the parameter schema into a decoding grammar, and accepts only
a subset of JSON Schema:

- every object has ``additionalProperties: false`` and lists *all* of its
  properties in ``required``; an optional property is expressed as "may be
  ``null``" (``anyOf: [T, {"type": "null"}]`` or ``type: [T, "null"]``);
- the root is an object; ``$ref`` may not sit beside other keywords; unions are
  ``anyOf`` (``oneOf`` is rejected); ``allOf`` is not accepted;
- value constraints (``minLength``, ``pattern``, ``minimum``, ...) are not
  uniformly supported across providers.

``to_strict_schema`` returns a converted copy and raises ``StrictSchemaError``
when the schema says something the subset cannot (an object that allows extra
keys, a tuple, a ``not``, an "any value" schema, ...). Constraints the subset
cannot carry are removed and written into the node's ``description`` (so the
model still reads them), and validation afterwards still checks them against
the *original* schema. ``const`` becomes a one-member ``enum``: the same
meaning, in the form every strict implementation accepts.

Defaults of optional properties cannot be expressed either: a strict call sends
``null`` for "not given", and validation turns such a ``null`` back into
the default (or drops it) against the original schema.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

_MISSING = object()

_KEPT = frozenset({"type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "description"})
_KEPT |= {"$ref", "$defs", "definitions"}
_DESCRIBED = (
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
    "dependentRequired",
    "contentEncoding",
    "contentMediaType",
    "default",
    "examples",
    "example",
    "deprecated",
)
"""Constraints the strict subset cannot carry: removed and described in text."""
_UNCONVERTIBLE = {
    "patternProperties": "patternProperties (keys chosen by pattern) cannot be expressed in strict mode",
    "propertyNames": "propertyNames cannot be expressed in strict mode",
    "prefixItems": "tuple-like arrays (prefixItems) cannot be expressed in strict mode",
    "additionalItems": "tuple-like arrays (additionalItems) cannot be expressed in strict mode",
    "contains": "contains cannot be expressed in strict mode",
    "not": "not cannot be expressed in strict mode",
    "if": "if/then/else cannot be expressed in strict mode",
    "then": "if/then/else cannot be expressed in strict mode",
    "else": "if/then/else cannot be expressed in strict mode",
    "dependentSchemas": "dependentSchemas cannot be expressed in strict mode",
    "unevaluatedItems": "unevaluatedItems cannot be expressed in strict mode",
    "$dynamicRef": "$dynamicRef cannot be expressed in strict mode",
    "$recursiveRef": "$recursiveRef cannot be expressed in strict mode",
}
"""Keywords whose meaning would be lost by dropping them."""
# Everything else (``title``, ``$schema``, ``$id``, ``$comment``, ``readOnly``,
# ``discriminator``, ``x-...`` extensions, ...) is metadata: dropped silently.

_PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean"})
_MAX_REWRITES = 64
"""Bound on ``$ref``-inlining / ``allOf``-merging steps at one node."""


class StrictSchemaError(ValueError):
    """The schema cannot be expressed in the strict subset; the text says why."""


def to_strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A strict-subset copy of ``schema`` (an object schema); the input is untouched."""
    if not isinstance(schema, dict):
        raise StrictSchemaError(f"the schema must be a JSON object, not {type(schema).__name__}")
    work = copy.deepcopy(schema)
    converter = _Converter(source=schema)
    converter.convert(work)
    if work.get("type") != "object":
        raise StrictSchemaError(f"the root schema must be an object (type: object), found {_describe_type(work)}")
    return work


class _Converter:
    """Rewrites a (copied) schema tree in place, node by node, off an explicit stack."""

    def __init__(self, source: dict[str, Any]) -> None:
        self.source = source
        """The untouched input: ``$ref`` targets are inlined from here, before conversion."""

    def convert(self, root: dict[str, Any]) -> None:
        stack: list[tuple[Any, str, tuple[str, ...]]] = [(root, "root", ())]
        while stack:
            node, where, refs = stack.pop()
            if not isinstance(node, dict):
                raise StrictSchemaError(f"at {where}: {_any_or_nothing(node)}")
            stack.extend(self._convert_node(node, where, refs))

    def _convert_node(self, node: dict[str, Any], where: str, refs: tuple[str, ...]) -> Iterator[Any]:
        refs = self._flatten(node, where, refs)
        if "oneOf" in node:
            if "anyOf" in node:
                raise StrictSchemaError(f"at {where}: anyOf and oneOf side by side cannot be expressed in strict mode")
            node["anyOf"] = node.pop("oneOf")
        if "const" in node:
            node["enum"] = [node.pop("const")]
        notes: list[str] = []
        for key in list(node):
            if key in _KEPT:
                continue
            value = node.pop(key)
            if key in _UNCONVERTIBLE:
                raise StrictSchemaError(f"at {where}: {_UNCONVERTIBLE[key]}")
            if key in _DESCRIBED and not (key == "default" and value is None):
                notes.append(f"{key}: {json.dumps(value, ensure_ascii=False, default=repr)}")
        if notes:  # the model still reads them
            existing = node.get("description")
            node["description"] = (
                f"{existing} ({', '.join(notes)})" if isinstance(existing, str) and existing else ", ".join(notes)
            )
        if "$ref" in node:
            self._check_ref(node["$ref"], where, ())
            _resolve_ref(self.source, node["$ref"], where)  # a dangling $ref would be rejected by the provider
        if not ({"type", "anyOf", "enum", "$ref"} & node.keys()):
            raise StrictSchemaError(f"at {where}: a schema without a type accepts any value, which strict mode cannot")
        if _is_object(node):
            yield from self._convert_object(node, where, refs)
        items = node.get("items", _MISSING)
        if items is not _MISSING:
            if isinstance(items, list):
                raise StrictSchemaError(f"at {where}: tuple-like arrays (items as a list) cannot be expressed")
            yield (items, f"{where}.items", refs)
        branches = node.get("anyOf")
        if branches is not None:
            if not isinstance(branches, list) or not branches:
                raise StrictSchemaError(f"at {where}: anyOf must be a non-empty list")
            yield from ((branch, f"{where}.anyOf.{index}", refs) for index, branch in enumerate(branches))
        for key in ("$defs", "definitions"):
            defs = node.get(key)
            if isinstance(defs, dict):
                yield from ((sub, f"{where}.{key}.{name}", ()) for name, sub in defs.items())

    def _convert_object(self, node: dict[str, Any], where: str, refs: tuple[str, ...]) -> Iterator[Any]:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise StrictSchemaError(
                f"at {where}: the object allows additional properties (additionalProperties: "
                f"{json.dumps(extra, default=repr)}); strict mode needs a fixed set of properties"
            )
        node["additionalProperties"] = False
        properties = node.setdefault("properties", {})
        if not isinstance(properties, dict):
            raise StrictSchemaError(f"at {where}: properties must be an object")
        required = node.get("required") or []
        for name in list(properties):
            sub = properties[name]
            if name not in required:
                if not isinstance(sub, dict):
                    raise StrictSchemaError(f"at {where}.properties.{name}: {_any_or_nothing(sub)}")
                properties[name] = sub = self._nullable(sub)
            yield (sub, f"{where}.properties.{name}", refs)
        node["required"] = list(properties)

    def _flatten(self, node: dict[str, Any], where: str, refs: tuple[str, ...]) -> tuple[str, ...]:
        """Inline ``$ref``s that have sibling keywords and merge ``allOf`` parts into ``node``."""
        for _ in range(_MAX_REWRITES):
            ref = node.get("$ref")
            if ref is not None and (len(node) > 1 or where == "root"):
                refs = self._check_ref(ref, where, refs)
                siblings = {key: value for key, value in node.items() if key != "$ref"}
                target = _resolve_ref(self.source, ref, where)
                if not isinstance(target, dict):
                    raise StrictSchemaError(f"at {where}: $ref {ref}: {_any_or_nothing(target)}")
                node.clear()
                node.update(copy.deepcopy(target))
                node.update(siblings)  # the referring node's own keywords win (its description, say)
            elif "allOf" in node:
                parts = node.pop("allOf")
                if not isinstance(parts, list):
                    raise StrictSchemaError(f"at {where}: allOf must be a list")
                for index, part in enumerate(parts):
                    part_where = f"{where}.allOf.{index}"
                    if not isinstance(part, dict):
                        raise StrictSchemaError(f"at {part_where}: {_any_or_nothing(part)}")
                    part, refs = self._expand_refs(part, part_where, refs)
                    _merge_into(node, part, part_where)
            else:
                return refs
        raise StrictSchemaError(f"at {where}: too many nested $ref/allOf rewrites")

    def _expand_refs(
        self, part: dict[str, Any], where: str, refs: tuple[str, ...]
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """An ``allOf`` part with its ``$ref`` chain inlined (the part's own keywords win)."""
        for _ in range(_MAX_REWRITES):
            ref = part.get("$ref")
            if ref is None:
                return part, refs
            refs = self._check_ref(ref, where, refs)
            target = _resolve_ref(self.source, ref, where)
            if not isinstance(target, dict):
                raise StrictSchemaError(f"at {where}: {_any_or_nothing(target)}")
            part = {**target, **{key: value for key, value in part.items() if key != "$ref"}}
        raise StrictSchemaError(f"at {where}: too many nested $refs")

    def _check_ref(self, ref: Any, where: str, refs: tuple[str, ...]) -> tuple[str, ...]:
        if not isinstance(ref, str):
            raise StrictSchemaError(f"at {where}: $ref must be a string")
        if ref in refs:
            raise StrictSchemaError(f"at {where}: recursive $ref {ref} beside other keywords cannot be inlined")
        return (*refs, ref)

    def _nullable(self, node: dict[str, Any]) -> dict[str, Any]:
        """``node`` widened to also accept ``null`` (the strict spelling of "optional")."""
        if _accepts_null(self.source, node):
            return node
        kind = node.get("type")
        plain = "enum" not in node and "const" not in node and "$ref" not in node and "allOf" not in node
        if plain and isinstance(kind, str) and kind in _PRIMITIVE_TYPES:
            return {**node, "type": [kind, "null"]}
        if plain and isinstance(kind, list) and kind and set(kind) <= _PRIMITIVE_TYPES:
            return {**node, "type": [*kind, "null"]}
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list) and len(node.keys() - {key, "description", "default"}) == 0:
                return {**node, key: [*branches, {"type": "null"}]}
        # Wrap: the property's own text (and default) stays on the outside.
        outer: dict[str, Any] = {key: node[key] for key in ("description", "default") if key in node}
        inner = {key: value for key, value in node.items() if key not in outer}
        return {**outer, "anyOf": [inner, {"type": "null"}]}


def _merge_into(node: dict[str, Any], part: dict[str, Any], where: str) -> None:
    """Merge an ``allOf`` part into ``node``: only when nothing conflicts."""
    for key, value in part.items():
        if key not in node:
            node[key] = copy.deepcopy(value)
        elif key == "properties" and isinstance(value, dict) and isinstance(node[key], dict):
            for name, sub in value.items():
                if name in node[key] and node[key][name] != sub:
                    raise StrictSchemaError(f"at {where}: allOf parts disagree on property {name!r}")
                node[key][name] = copy.deepcopy(sub)
        elif key == "required" and isinstance(value, list) and isinstance(node[key], list):
            node[key] = [*node[key], *(name for name in value if name not in node[key])]
        elif key in ("description", "default", "examples"):
            continue  # the referring node's own text wins
        elif node[key] != value:
            raise StrictSchemaError(f"at {where}: allOf parts disagree on {key!r}; they cannot be merged")


def resolve_local_ref(root: Any, ref: str) -> Any:
    """The target of a local ``$ref`` (``#`` or ``#/json/pointer``) in ``root``; ``LookupError`` if none."""
    from referencing import Registry, Resource
    from referencing.exceptions import Unresolvable

    try:
        return Registry().with_resource("", Resource.opaque(root)).resolver().lookup(ref).contents
    except (Unresolvable, ValueError, TypeError):  # (a pointer step into a string or number is a ValueError)
        raise LookupError(f"$ref {ref!r} points to nothing") from None


def _resolve_ref(root: dict[str, Any], ref: str, where: str = "root") -> Any:
    try:
        return resolve_local_ref(root, ref)
    except LookupError as error:
        raise StrictSchemaError(f"at {where}: {error}") from None


def _accepts_null(root: dict[str, Any], node: Any) -> bool:
    """Whether a schema visibly admits ``null`` (top level, its union branches, its ``$ref``)."""
    seen: set[str] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if not isinstance(current, dict):
            continue
        kind = current.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind):
            return True
        if None in (current.get("enum") or ()) or ("const" in current and current["const"] is None):
            return True
        for key in ("anyOf", "oneOf"):
            branches = current.get(key)
            if isinstance(branches, list):
                pending.extend(branches)
        ref = current.get("$ref")
        if isinstance(ref, str) and ref not in seen:
            seen.add(ref)
            try:
                pending.append(_resolve_ref(root, ref))
            except StrictSchemaError:
                pass
    return False


def _is_object(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind):
        return True
    return kind is None and "properties" in node


def _any_or_nothing(value: Any) -> str:
    if value is True:
        return "a schema of `true` accepts any value, which strict mode cannot express"
    if value is False:
        return "a schema of `false` accepts nothing, which strict mode cannot express"
    return f"expected a schema object, found {type(value).__name__}"


def _describe_type(node: dict[str, Any]) -> str:
    if "type" in node:
        return f"type {json.dumps(node['type'])}"
    if "anyOf" in node:
        return "a union (anyOf)"
    return "no type"
