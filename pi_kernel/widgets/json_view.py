"""JSON for people: tool arguments as pretty, bounded JSON (no ipywidgets here).

Arguments may be a dict from the model, a pydantic model instance (validated
arguments) or anything a tool returned; ``jsonable`` turns each into plain JSON
data, and ``pretty_json`` never raises.
"""

from __future__ import annotations

import dataclasses
import json
import reprlib
from typing import Any

from pydantic import BaseModel

from pi_kernel.ai.messages import map_strings


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
    except (TypeError, ValueError, RecursionError):  # circular or too deep data, say: still show something
        return reprlib.repr(value)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, numbers, bools, None)."""
    try:
        return json.loads(json.dumps(value, default=_default))
    except (TypeError, ValueError, RecursionError):
        return reprlib.repr(value)


def bound_strings(value: Any, limit: int) -> Any:
    """JSON data with every string longer than ``limit`` cut, saying how much was cut (iterative; data
    nested deeper than ``messages.MAX_DEPTH`` is shown as a mark)."""

    def cut(text: str) -> str:
        return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters]"

    return map_strings(value, cut)


def parse_arguments(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """Edited arguments from a text box: ``(arguments, None)`` or ``(None, error message)``."""
    try:
        value = json.loads(text)
    except ValueError as error:
        return None, f"Invalid JSON: {error}"
    except RecursionError:
        return None, "Invalid JSON: nested too deeply"
    if not isinstance(value, dict):
        return None, f"The arguments must be a JSON object, not {type(value).__name__}"
    return value, None
