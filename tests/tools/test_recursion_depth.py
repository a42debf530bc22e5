"""No recursion on model- or tool-controlled depth: deeply nested JSON text and return values give a clean result."""

from __future__ import annotations

import sys

from coercion_helpers import coerce_with_schema

from pi_kernel.tools.builtin import prepare_edit_arguments

DEPTH = sys.getrecursionlimit() * 20


def test_edit_arguments_with_edits_as_deeply_nested_json_text_do_not_recurse() -> None:
    """edit.py prepare_edit_arguments: ``json.loads(edits)`` catches ValueError only."""
    raw = {"path": "f.txt", "edits": "[" * DEPTH + "]" * DEPTH}
    prepare_edit_arguments(raw)  # RecursionError today


def test_coercing_deeply_nested_json_text_to_an_array_does_not_recurse() -> None:
    """tool.py _convert: a string given for an array/object parameter is json.loads'ed, catching ValueError only."""
    schema = {"type": "object", "properties": {"rows": {"type": "array"}}}
    coerce_with_schema({"rows": "[" * DEPTH + "]" * DEPTH}, schema)  # RecursionError today


def test_a_user_tool_returning_deeply_nested_data_gets_a_result_text() -> None:
    """results.py to_json_text: ``json.dumps`` of a user tool's return value recurses on its depth
    (the tool ran; its result becomes a RecursionError text instead of a bounded rendering)."""
    from pi_kernel.tools.results import to_json_text

    value: list[object] = []
    for _ in range(DEPTH):
        value = [value]
    text = to_json_text(value)
    assert text.startswith("[value nested too deeply for JSON"), text[:200]
    assert len(text) < 10_000
