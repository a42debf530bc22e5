"""Agent events are told apart by their class: ``match`` / ``isinstance`` on the ``AgentEvent`` union.

An AST scan of ``pi_kernel``: no code compares ``<x>.type`` with an agent event's type string (``==``,
``in``, ``match x.type``), builds a handler name from it (``getattr(self, f"_on_{event.type}")``) or
looks a handler up by it (``HANDLERS[event.type]``).
Dispatch by class lets mypy check each branch's fields; a string typo would only fail at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from pi_kernel.agent.types import AgentEvent

PACKAGE = Path(__file__).resolve().parents[2] / "pi_kernel"
EVENT_TYPES = {event_class.__dataclass_fields__["type"].default for event_class in get_args(AgentEvent)}


def _is_type_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "type"


def _event_strings(node: ast.AST) -> set[str]:
    """The agent event type strings ``node`` spells (a constant, or a tuple / list / set of them)."""
    if isinstance(node, ast.Constant) and node.value in EVENT_TYPES:
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {value for element in node.elts for value in _event_strings(element)}
    return set()


def string_dispatches(tree: ast.AST) -> list[int]:
    """Lines that dispatch on an agent event's ``type`` string."""
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_type_attribute(operand) for operand in operands) and any(
                _event_strings(operand) for operand in operands
            ):
                lines.append(node.lineno)
        elif isinstance(node, ast.Match) and _is_type_attribute(node.subject):
            if any(
                isinstance(case.pattern, ast.MatchValue) and _event_strings(case.pattern.value) for case in node.cases
            ):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            # a handler name built from the type, however it is spelt (f-string, ``+``, ``%``, ``.format``)
            if any(_is_type_attribute(inner) for name in node.args[1:2] for inner in ast.walk(name)):
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and _is_type_attribute(node.slice):
            lines.append(node.lineno)  # a table of handlers keyed by the type string
    return sorted(lines)


def test_the_scan_finds_each_kind_of_string_dispatch() -> None:
    source = (
        'if event.type == "message_end": pass\n'
        'if event.type in ("turn_start", "turn_end"): pass\n'
        "match event.type:\n"
        '    case "compaction": pass\n'
        'handler = getattr(self, f"_on_{event.type}")\n'
        'if chunk.type == "text_delta": pass\n'  # a stream event of ``ai``, not an agent event
        'handler = getattr(self, "_on_" + event.type)\n'
        "HANDLERS[event.type](event)\n"
    )
    assert string_dispatches(ast.parse(source)) == [1, 2, 3, 5, 7, 8]


def test_no_agent_event_is_dispatched_by_its_type_string() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in string_dispatches(ast.parse(path.read_text()))
    ]
    assert found == []
