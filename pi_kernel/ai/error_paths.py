"""Where a validation error is: a dotted path into what the model sent (``edits.0.old_text``; ``root``).

Pydantic's ``loc`` also names the union branches it tried (``x.int``,
``edits.0.Replace.old_text``): those tags are removed. A failed ``jsonschema``
``anyOf`` / ``oneOf`` holds every branch's complaints: the branch the model
meant is picked out. (``jsonschema``'s ``best_match`` cannot pick it: it returns
one error, and for branches it rates alike, the generic union error.)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import ValidationError as SchemaValidationError

ErrorList = list[tuple[str, str]]
"""``(dotted path, message)`` pairs."""

_SEARCH_BUDGET = 2048


def model_error_path(loc: tuple[int | str, ...], arguments: Any, error_input: Any, error_type: str) -> list[int | str]:
    """Pydantic's ``loc`` with its union-branch tags removed: a path into the arguments.

    Each step is a key or index of the value there, or a tag. The reading
    chosen is the one that ends at the value the error is about (pydantic's
    ``input``), stepping in before skipping, so a key spelt like a tag is told
    apart; the last step of a "missing" error names the absent field. The
    search is bounded; without a fitting reading (a validator changed the
    value) the steps that are keys or indexes of what was sent are kept.
    """
    budget = [_SEARCH_BUDGET]
    last = len(loc) - 1

    def search(position: int, node: Any) -> list[int | str] | None:
        budget[0] -= 1
        if budget[0] < 0:
            return None
        if position > last:
            return [] if _same(node, error_input) else None
        part = loc[position]
        if _has(node, part):
            rest = search(position + 1, node[part])
            if rest is not None:
                return [part, *rest]
        elif position == last and error_type == "missing" and isinstance(node, dict) and _same(node, error_input):
            return [part]
        return search(position + 1, node)  # ``part`` as a tag

    found = search(0, arguments)
    if found is not None:
        return found
    path: list[int | str] = []
    for position, part in enumerate(loc):
        if _has(arguments, part):
            arguments = arguments[part]
            path.append(part)
        elif position == last and error_type == "missing":
            path.append(part)
    return path


def _has(node: Any, part: int | str) -> bool:
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node)


def _same(node: Any, error_input: Any) -> bool:
    try:
        return node is error_input or bool(node == error_input)
    except Exception:  # noqa: BLE001 - an odd value that cannot compare is simply not the one
        return False


def describe_schema_error(error: SchemaValidationError) -> ErrorList:
    """Readable ``(path, message)`` pairs for one ``jsonschema`` error, worded like pydantic's where it can."""
    path, instance = list(error.absolute_path), error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "required" and isinstance(instance, dict):
        names = error.validator_value if isinstance(error.validator_value, list) else []
        return [(dotted([*path, name]), "Field required") for name in names if name not in instance]
    if error.validator == "additionalProperties" and error.validator_value is False and isinstance(instance, dict):
        known, patterns = schema.get("properties") or {}, schema.get("patternProperties") or {}
        extras = [key for key in instance if key not in known and not any(re.search(p, key) for p in patterns)]
        return [(dotted([*path, key]), "Extra inputs are not permitted") for key in extras]
    described: ErrorList = []
    if error.validator in ("anyOf", "oneOf"):
        for branch_error in _branch_meant(error.context, len(path)):
            described += [item for item in describe_schema_error(branch_error) if item not in described]
    return described or [(dotted(path), error.message)]


def _branch_meant(errors: list[SchemaValidationError], depth: int) -> list[SchemaValidationError]:
    """The complaints of the union branch(es) the model most likely meant, or ``[]`` for none.

    A branch is set aside when the value is not of its type (or not its
    ``enum`` / ``const``), then, if any is left, when a property's ``const`` (a
    tag such as ``kind: "cat"``) differs. Of the rest, the branch(es) with the
    fewest complaints. None left: the generic "not valid under any" message.
    """
    by_branch: dict[Any, list[SchemaValidationError]] = {}
    for item in errors:
        by_branch.setdefault(item.relative_schema_path[0] if item.relative_schema_path else None, []).append(item)

    def mismatch(group: list[SchemaValidationError], validators: tuple[str, ...], extra: int) -> bool:
        return any(item.validator in validators and len(item.absolute_path) == depth + extra for item in group)

    candidates = [group for group in by_branch.values() if not mismatch(group, ("type", "enum", "const"), 0)]
    candidates = [group for group in candidates if not mismatch(group, ("const",), 1)] or candidates
    fewest = min((len(group) for group in candidates), default=0)
    return [item for group in candidates if len(group) == fewest for item in group]


def dotted(path: Any) -> str:
    return ".".join(str(part) for part in path) or "root"
