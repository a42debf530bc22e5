"""Checking a message that comes from outside (a saved conversation) before it is rebuilt.

``message_from_dict`` trusts its input: ``{"type": "text", "text": null}``
builds a ``TextContent`` whose text is ``None``, which then breaks every later
request and ``%pi history``. ``message_problem`` checks every field of a
message dict against the shapes of ``pi_kernel.ai.messages`` (types, required
fields, no unknown ones, tool-call arguments and result details at most
``MAX_DEPTH`` deep) and says what the first problem is, with its place
(``content[0].text: expected a string, got null``). No recursion: the only
nested data (arguments, details) is measured with ``depth_of``.
"""

from __future__ import annotations

from typing import Any

from pi_kernel.ai.sanitize import BASE64, MAX_DEPTH, depth_of

_STR = (str,)
_INT = (int,)
_NUMBER = (int, float)
_BOOL = (bool,)
_DICT = (dict,)
_ANY = (object,)

Spec = dict[str, tuple[tuple[type, ...], bool, bool]]
"""Field name → (accepted types, required, may be null)."""

_BLOCKS: dict[str, Spec] = {
    "text": {"text": (_STR, True, False)},
    "thinking": {"thinking": (_STR, True, False), "signature": (_STR, False, True), "redacted": (_BOOL, False, False)},
    "image": {"data": (_STR, True, False), "mime_type": (_STR, True, False)},
    "tool_call": {
        "id": (_STR, True, False),
        "name": (_STR, True, False),
        "arguments": (_DICT, False, False),
        "raw_arguments": (_STR, False, True),
        "extra_content": (_DICT, False, True),
    },
}
_USAGE: Spec = {
    "input": (_INT, False, False),
    "output": (_INT, False, False),
    "cache_read": (_INT, False, False),
    "cache_write": (_INT, False, False),
    "total_tokens": (_INT, False, False),
    "cost": (_NUMBER, False, True),
}
_MESSAGES: dict[str, Spec] = {
    "user": {
        "content": ((str, list), True, False),
        "timestamp": (_INT, False, False),
        "compacted_turns": (_INT, False, True),
    },
    "assistant": {
        "content": ((list,), False, False),
        "stop_reason": (_STR, False, False),
        "usage": (_DICT, False, False),
        "model": (_STR, False, False),
        "provider": (_STR, False, False),
        "error_message": (_STR, False, True),
        "timestamp": (_INT, False, False),
    },
    "tool_result": {
        "tool_call_id": (_STR, True, False),
        "tool_name": (_STR, True, False),
        "content": ((list,), False, False),
        "details": (_ANY, False, True),
        "is_error": (_BOOL, False, False),
        "usage": (_DICT, False, True),
        "timestamp": (_INT, False, False),
    },
}
_CONTENT_KINDS = {
    "user": ("text", "image"),
    "assistant": ("text", "thinking", "image", "tool_call"),
    "tool_result": ("text", "image"),
}
_STOP_REASONS = ("stop", "length", "tool_use", "error", "aborted")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _fields_problem(data: Any, spec: Spec, where: str, tag: str) -> str | None:
    """The first field of ``data`` that does not fit ``spec`` (``tag``: the field that picks the spec)."""
    if not isinstance(data, dict):
        return f"{where or 'the record'}: expected an object, got {_kind(data)}"
    prefix = f"{where}." if where else ""
    for name in data:
        if name != tag and name not in spec:
            return f"{prefix}{name}: unknown field"
    for name, (types, required, nullable) in spec.items():
        if name not in data:
            if required:
                return f"{prefix}{name}: missing"
            continue
        value = data[name]
        if value is None:
            if not nullable:
                return f"{prefix}{name}: expected {_expected(types)}, got null"
            continue
        fits = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not fits:
            return f"{prefix}{name}: expected {_expected(types)}, got {_kind(value)}"
    return None


def _expected(types: tuple[type, ...]) -> str:
    names = {str: "a string", int: "a number", float: "a number", bool: "a boolean", dict: "an object", list: "a list"}
    return " or ".join(dict.fromkeys(names.get(kind, kind.__name__) for kind in types))


def message_problem(data: Any) -> str | None:
    """What is wrong with ``data`` as a saved message (``None``: it can be rebuilt and used safely)."""
    if not isinstance(data, dict):
        return f"expected a message object, got {_kind(data)}"
    role = data.get("role")
    if not isinstance(role, str) or role not in _MESSAGES:
        return f"role: expected user, assistant or tool_result, got {role!r}"[:200]
    spec = _MESSAGES[role]
    problem = _fields_problem(data, spec, "", "role")
    if problem:
        return problem
    if role == "assistant" and data.get("stop_reason", "stop") not in _STOP_REASONS:
        return f"stop_reason: expected one of {', '.join(_STOP_REASONS)}"
    usage = data.get("usage")
    if usage is not None:
        problem = _fields_problem(usage, _USAGE, "usage", "")
        if problem:
            return problem
    if role == "tool_result" and depth_of(data.get("details")) > MAX_DEPTH:
        return f"details: nested deeper than {MAX_DEPTH} levels"
    content = data.get("content", [])
    if isinstance(content, str):
        return None
    for index, block in enumerate(content):
        where = f"content[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(kind, str) or kind not in _CONTENT_KINDS[role]:
            return f"{where}.type: expected one of {', '.join(_CONTENT_KINDS[role])}, got {kind!r}"[:200]
        problem = _fields_problem(block, _BLOCKS[kind], where, "type")
        if problem:
            return problem
        if kind == "tool_call" and depth_of(block.get("arguments")) > MAX_DEPTH:
            return f"{where}.arguments: nested deeper than {MAX_DEPTH} levels"
        if kind == "image" and not (BASE64.fullmatch(block["data"]) and block["mime_type"].startswith("image/")):
            return f"{where}: not a base64 image with an image/* mime_type"  # every request would be refused
    return None
