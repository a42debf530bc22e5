"""Where a validation error is, as a dotted path into what the model sent (``edits.0.old_text``).

Two sources of errors, one way of naming places: pydantic's ``loc`` (which
also names the union branches it tried) and ``jsonschema``'s errors (where a
failed ``anyOf`` / ``oneOf`` holds every branch's complaints, and the branch
the model meant must be picked out). ``root`` names the whole object.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import ValidationError as SchemaValidationError

ErrorList = list[tuple[str, str]]
"""``(dotted path, message)`` pairs; the path is ``root`` for the whole object."""

_PATH_SEARCH_BUDGET = 2048


def model_error_path(loc: tuple[int | str, ...], arguments: Any, error_input: Any, error_type: str) -> list[int | str]:
    """Pydantic's ``loc`` with its union-branch tags removed: a path into the arguments.

    Inside a union pydantic names the branch it tried (``x.int``,
    ``edits.0.Replace.old_text``, ``pet.cat``); the model needs the place in
    what it sent (``edits.0.old_text``). Each step is either a key or index of
    the value there, or a tag; the reading chosen is the one that ends at the
    value the error is about (pydantic's ``input``), so a key that happens to
    be spelt like a tag is still told apart. The last step of a "missing"
    error names the absent field (its ``input`` is the object it is missing from).
    """
    last = len(loc) - 1
    # Depth-first over "step into it" / "a tag", stepping in first. Readings double with each step, so the
    # search is bounded (a deep loc with no fitting reading falls back to the greedy walk at once).
    stack: list[tuple[int, Any, list[int | str]]] = [(0, arguments, [])]
    budget = _PATH_SEARCH_BUDGET
    while stack and budget > 0:
        budget -= 1
        position, node, path = stack.pop()
        if position > last:
            if _same(node, error_input):
                return path
            continue
        part = loc[position]
        stack.append((position + 1, node, path))  # ``part`` as a tag: tried after stepping in
        if isinstance(node, dict) and part in node:
            stack.append((position + 1, node[part], [*path, part]))
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            stack.append((position + 1, node[part], [*path, part]))
        elif position == last and error_type == "missing" and isinstance(node, dict) and _same(node, error_input):
            return [*path, part]  # the field that is missing from this object
    return _greedy_path(loc, arguments, error_type)


def _greedy_path(loc: tuple[int | str, ...], arguments: Any, error_type: str) -> list[int | str]:
    """When no reading ends at the error's input (a validator changed the value): keep the steps that are
    keys or indexes of what was sent, and the absent field of a "missing" error; the rest are tags."""
    path: list[int | str] = []
    node: Any = arguments
    for position, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
        elif not (position == len(loc) - 1 and error_type == "missing"):
            continue
        path.append(part)
    return path


def _same(node: Any, error_input: Any) -> bool:
    if node is error_input:
        return True
    try:
        return bool(node == error_input)
    except Exception:  # noqa: BLE001 - an odd value that cannot compare is simply not the one
        return False


def describe_schema_error(error: SchemaValidationError) -> ErrorList:
    """Readable ``(path, message)`` pairs for one ``jsonschema`` error."""
    path = list(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        names = error.validator_value if isinstance(error.validator_value, list) else []
        return [(dotted([*path, name]), "Field required") for name in names if name not in instance]
    if error.validator == "additionalProperties" and error.validator_value is False and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = schema.get("properties") or {}
        patterns = schema.get("patternProperties") or {}
        extras = [key for key in instance if key not in known and not any(re.search(p, key) for p in patterns)]
        return [(dotted([*path, key]), "Extra inputs are not permitted") for key in extras]
    if error.validator in ("anyOf", "oneOf") and error.context:
        meant = _branches_meant(error.context, path)
        if meant:
            described: ErrorList = []
            for branch_error in meant:
                described += [item for item in describe_schema_error(branch_error) if item not in described]
            return described
    return [(dotted(path), error.message)]


def _branches_meant(errors: list[SchemaValidationError], path: list[Any]) -> list[SchemaValidationError]:
    """The errors of the union branch(es) the model most likely meant, or ``[]`` for none.

    A branch is out when the value's own type does not match it, or a tag
    property's ``const`` (a discriminator such as ``kind: "cat"``) differs while
    another branch's tag fits. Of
    the others, the branch with the fewest complaints is the one meant
    (``edits.0.new_text: Field required`` rather than every field of every
    other shape). When no branch is left, the generic "not valid under any of
    the given schemas" is the honest message.
    """
    by_branch: dict[Any, list[SchemaValidationError]] = {}
    for branch_error in errors:
        branch = branch_error.relative_schema_path[0] if branch_error.relative_schema_path else None
        by_branch.setdefault(branch, []).append(branch_error)
    groups = list(by_branch.values())
    # Set aside branches of another type, then, if any branch is left after that, those whose tag differs.
    candidates = [group for group in groups if not any(_type_mismatch(item, path) for item in group)]
    tagged = [group for group in candidates if not any(_tag_mismatch(item, path) for item in group)]
    candidates = tagged or candidates
    if not candidates:
        return []
    fewest = min(len(group) for group in candidates)
    return [item for group in candidates if len(group) == fewest for item in group]


def _type_mismatch(error: SchemaValidationError, path: list[Any]) -> bool:
    """The value itself is not of the branch's type (or not one of its ``enum`` / ``const`` values)."""
    return error.validator in ("type", "enum", "const") and len(error.absolute_path) == len(path)


def _tag_mismatch(error: SchemaValidationError, path: list[Any]) -> bool:
    """A property of the value differs from the branch's ``const`` (a discriminator such as ``kind: "cat"``)."""
    return error.validator == "const" and len(error.absolute_path) == len(path) + 1


def dotted(path: Any) -> str:
    return ".".join(str(part) for part in path) or "root"
