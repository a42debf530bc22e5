"""JSON for people: tool arguments as pretty, bounded JSON (no ipywidgets here).

Arguments may be a dict from the model, a pydantic model instance (validated
arguments) or anything a tool returned; ``jsonable`` turns each into plain JSON
data, and ``pretty_json`` never raises.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic import BaseModel


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return str(value)


def pretty_json(value: Any) -> str:
    """Indented JSON text of ``value`` (non-JSON values through their dump or ``str``)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=_default)
    except (TypeError, ValueError):  # circular data, say: still show something
        return repr(value)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, numbers, bools, None)."""
    try:
        return json.loads(json.dumps(value, default=_default))
    except (TypeError, ValueError):
        return repr(value)


def bound_strings(value: Any, limit: int) -> Any:
    """JSON data with every string longer than ``limit`` cut, saying how much was cut."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:limit]}… [{len(value) - limit:,} more characters]"
    if isinstance(value, dict):
        return {key: bound_strings(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [bound_strings(item, limit) for item in value]
    return value


def parse_arguments(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """Edited arguments from a text box: ``(arguments, None)`` or ``(None, error message)``."""
    try:
        value = json.loads(text)
    except ValueError as error:
        return None, f"Invalid JSON: {error}"
    if not isinstance(value, dict):
        return None, f"The arguments must be a JSON object, not {type(value).__name__}"
    return value, None
