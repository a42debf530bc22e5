"""A local tool call's token bound holds the longest arguments the grammar allows (issue 11, point 1).

The grammar bounds an unbounded string at ``MAX_STRING_CHARS`` characters, each of which may be a 6-byte
``\\uXXXX`` escape; the fixed 1,024-token bound did not hold two plain ``str`` parameters (2,427 bytes), so
such a call could be cut at the bound and end in error. The bound is now sized from the schema (a token is
at least one byte, so bytes bound tokens).
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from pi_kernel.ai.providers.local import TOOL_CALL_MAX_TOKENS, tool_call_token_cap
from pi_kernel.ai.providers.local_engine import MAX_ITEMS, MAX_STRING_CHARS, bounded_gbnf, max_arguments_bytes

ESCAPES = "\\u0000" * MAX_STRING_CHARS
TWO_STRINGS = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}
LIST_OF_OBJECTS = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "number"}}},
        },
        "mode": {"enum": ["fast", "thorough"]},
    },
}
ENGINE = SimpleNamespace(n_ctx=1_000_000)


def _worst_two_strings() -> str:
    return '{ "path" : "' + ESCAPES + '" , "content" : "' + ESCAPES + '" } '


def _worst_list() -> str:
    number = "-" + "9" * 16 + "." + "9" * 16 + "e-" + "9" * 16 + " "
    item = '{ "name" : "' + ESCAPES + '" , "n" : ' + number + "} "
    return '{ "items" : [ ' + " , ".join([item] * MAX_ITEMS) + ' ] , "mode" : "thorough" } '


@pytest.mark.parametrize(("schema", "worst"), [(TWO_STRINGS, _worst_two_strings), (LIST_OF_OBJECTS, _worst_list)])
def test_the_call_bound_holds_the_longest_arguments_the_grammar_allows(schema: dict[str, Any], worst: Any) -> None:
    assert '"u" [0-9a-fA-F]' in bounded_gbnf(schema)  # a string character may be a 6-byte \\uXXXX escape
    text = worst()
    assert json.loads(text) is not None  # valid arguments, as the grammar lets the model write them
    assert len(text.encode()) <= tool_call_token_cap(ENGINE, 100, 64, schema)
    assert len(text.encode()) > TOOL_CALL_MAX_TOKENS  # the fixed bound alone would cut it


def test_an_open_schema_keeps_the_fixed_bound_and_the_context_still_limits() -> None:
    assert max_arguments_bytes({"type": "object", "properties": {"x": {}}}) is None  # free-form: open
    assert tool_call_token_cap(ENGINE, 100, 64, {"type": "object"}) == TOOL_CALL_MAX_TOKENS
    assert tool_call_token_cap(SimpleNamespace(n_ctx=2_000), 1_500, 64, TWO_STRINGS) == 500


def test_a_property_called_items_is_not_taken_for_an_array() -> None:
    from pi_kernel.ai.providers.local_engine import bound_lists

    bounded = bound_lists(LIST_OF_OBJECTS)
    assert set(bounded["properties"]) == {"items", "mode"}  # no "maxItems" property slipped in
    assert bounded["properties"]["items"]["maxItems"] == MAX_ITEMS
