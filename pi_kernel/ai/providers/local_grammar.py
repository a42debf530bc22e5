"""The local model's grammar for a tool call's arguments, with every string and list bounded.

llama.cpp's converter (``llama_cpp.llama_grammar``) turns a JSON schema into a
grammar, but a string or a list the schema does not bound stays unbounded:
SmolLM2-135M once wrote ``{"fruit": ",12,0.95`` and went on inside the string
until the token cap cut the call. So, where the schema does not say otherwise:

- a string holds at most ``MAX_STRING_CHARS`` characters (the converter's
  shared ``string`` rule, used by every string without its own ``maxLength``,
  ``pattern``, ``format`` or ``enum``, and by the keys of free-form objects);
- a list holds at most ``MAX_ITEMS`` items (``maxItems`` added to each array
  schema that has none, and the free-form ``array``/``object`` rules bounded
  the same way), and so does an object's set of additional properties
  (``dict[str, int]``: the converter's ``...-additional-kvs`` rules).

Numbers are bounded by the converter itself (16 digits), and so is
whitespace (one optional space). A schema's own ``maxLength``/``maxItems``
are kept, larger or smaller. Nesting depth of free-form values is not
bounded here: the provider's token bound for tool calls ends such a call.
``max_arguments_bytes`` is the longest JSON text the grammar of a schema
allows (``None`` when free-form values leave it open): the provider sizes a
call's token bound from it, so the bound never cuts what the grammar allows.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_STRING_CHARS = 200
"""Characters of a string whose schema gives no ``maxLength``."""
MAX_ITEMS = 32
"""Items of a list whose schema gives no ``maxItems``."""

_NOT_SCHEMAS = frozenset({"enum", "const", "default", "examples", "required"})
"""Keywords whose values are data, not subschemas."""
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
ANY_VALUE: dict[str, Any] = {
    "anyOf": [{"type": kind} for kind in ("string", "number", "boolean", "null", "array", "object")]
}
"""Any JSON value, as the converter understands it: it takes ``{}`` for an object, and
``"items": {}`` (``list[Any]``) makes it fail on the whole schema."""


def bound_lists(schema: Any, *, top: bool = True) -> Any:
    """A copy of ``schema`` where each array schema without ``maxItems`` gets ``MAX_ITEMS`` (or its
    ``minItems``), and each subschema that allows any value (``{}``) becomes ``ANY_VALUE``."""
    if isinstance(schema, list):
        return [bound_lists(item, top=False) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if not top and not set(schema) - _ANNOTATIONS:
        return {**schema, **ANY_VALUE}
    bounded = {key: value if key in _NOT_SCHEMAS else _bound_children(key, value) for key, value in schema.items()}
    types = schema.get("type")
    is_array = types == "array" or (isinstance(types, list) and "array" in types) or "items" in schema
    if is_array and isinstance(schema.get("items"), dict) and "maxItems" not in schema:
        minimum = schema.get("minItems", 0)
        bounded["maxItems"] = max(MAX_ITEMS, minimum if isinstance(minimum, int) else 0)
    return bounded


def _bound_children(key: str, value: Any) -> Any:
    """``properties`` and ``$defs`` map names to subschemas; other keywords hold a subschema or a list of them."""
    if key in ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas") and isinstance(
        value, dict
    ):
        return {name: bound_lists(sub, top=False) for name, sub in value.items()}
    return bound_lists(value, top=False)


def _bounded_primitives() -> dict[str, tuple[str, str]]:
    """``{rule name: (the converter's rule, its bounded replacement)}``."""
    from llama_cpp.llama_grammar import PRIMITIVE_RULES, _build_repetition

    kv = 'string ":" space value'
    return {
        "string": (
            PRIMITIVE_RULES["string"].content,
            r'"\"" ' + _build_repetition("char", 0, MAX_STRING_CHARS) + r' "\"" space',
        ),
        "array": (
            PRIMITIVE_RULES["array"].content,
            '"[" space ' + _build_repetition("value", 0, MAX_ITEMS, separator_rule='"," space') + ' "]" space',
        ),
        "object": (
            PRIMITIVE_RULES["object"].content,
            '"{" space ' + _build_repetition(f"({kv})", 0, MAX_ITEMS, separator_rule='"," space') + ' "}" space',
        ),
    }


_ADDITIONAL_KVS = re.compile(r'(?P<kv>[\w-]+) \( "," space (?P=kv) \)\*')
"""The converter's rule for an object's additional properties: ``kv ( "," space kv )*``."""


def bounded_gbnf(schema: dict[str, Any]) -> str:
    """The GBNF grammar of JSON valid for ``schema``, strings and lists bounded (see the module docstring).

    Raises what llama.cpp's converter raises for a schema it cannot convert.
    """
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    text = json_schema_to_gbnf(json.dumps(bound_lists(schema)))
    bounded = _bounded_primitives()
    lines = []
    for line in text.splitlines():
        name, _, rule = line.partition(" ::= ")
        if name in bounded:
            original, replacement = bounded[name]
            if rule != original:  # another converter version: fail loudly rather than stay unbounded
                raise RuntimeError(f"unexpected {name!r} rule from llama.cpp's converter: {rule}")
            line = f"{name} ::= {replacement}"
        elif name.endswith("additional-kvs") and (match := _ADDITIONAL_KVS.fullmatch(rule)):
            line = f"{name} ::= {_bounded_repetition(match['kv'])}"
        lines.append(line)
    return "\n".join(lines)


def _bounded_repetition(item: str) -> str:
    """``item`` one to ``MAX_ITEMS`` times, comma-separated."""
    from llama_cpp.llama_grammar import _build_repetition

    return str(_build_repetition(item, 1, MAX_ITEMS, separator_rule='"," space'))


CHAR_BYTES = 6
"""The longest a string character is in JSON text: a ``\\uXXXX`` escape (the converter's ``char`` rule)."""
NUMBER_BYTES = 54
"""The converter's number: sign, 16 digits, a point and 16 decimals, an exponent of 16 digits, a space."""
_FIXED = {"integer": 18, "number": NUMBER_BYTES, "boolean": 6, "null": 5}


def max_arguments_bytes(schema: Any) -> int | None:
    """The longest JSON text (in bytes) the bounded grammar of ``schema`` allows, or ``None`` when it is open
    (free-form values, ``$ref``, ``pattern``, ``additionalProperties``). Counts each optional space."""
    return _max_bytes(bound_lists(schema), 0)


def _max_bytes(schema: Any, depth: int) -> int | None:
    if not isinstance(schema, dict) or depth > 32 or "$ref" in schema or "pattern" in schema:
        return None
    if "const" in schema:
        return len(json.dumps(schema["const"], ensure_ascii=False).encode()) + 1
    if "enum" in schema:
        values = schema["enum"]
        return max((len(json.dumps(value, ensure_ascii=False).encode()) for value in values), default=0) + 1
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        sizes = [_max_bytes(option, depth + 1) for option in options]
        return None if not sizes or None in sizes else max(size for size in sizes if size is not None)
    kind = schema.get("type")
    if isinstance(kind, list):
        sizes = [_max_bytes({**schema, "type": item}, depth + 1) for item in kind]
        return None if not sizes or None in sizes else max(size for size in sizes if size is not None)
    if kind in _FIXED:
        return _FIXED[kind]
    if kind == "string":
        if "format" in schema:
            return None
        length = schema.get("maxLength", MAX_STRING_CHARS)
        return CHAR_BYTES * length + 3 if isinstance(length, int) else None
    if kind == "array":
        item = _max_bytes(schema.get("items"), depth + 1)
        count = schema.get("maxItems")
        return None if item is None or not isinstance(count, int) else 4 + count * (item + 2)
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if not isinstance(properties, dict) or (extra is not None and extra is not False):
            return None
        total = 4  # "{" space "}" space
        for name, value in properties.items():
            size = _max_bytes(value, depth + 1)
            if size is None:
                return None
            total += len(json.dumps(name, ensure_ascii=False).encode()) + 3 + size + 2  # "name" space ":" space, ","
        return total
    return None
