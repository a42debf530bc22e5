"""Schema ``pattern`` checks that cannot freeze the kernel.

A tool's JSON schema may come from someone else (an MCP server's
``inputSchema``), and a ``pattern`` such as ``^(a+)+$`` makes Python's ``re``
backtrack for minutes on a short string, on the kernel's event loop, where no
interrupt reaches it. ``jsonschema`` checks ``pattern`` and
``patternProperties`` with ``re``; ``bounded_validator`` gives a validator
class whose checks of those two keywords use the ``regex`` module with a
time limit (``PATTERN_SECONDS``) instead. A check that runs out of time is an
error the model reads (the value is not sent unchecked). A pattern ``regex``
cannot compile is checked with ``re`` as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import regex

PATTERN_SECONDS = 1.0
"""The longest one pattern check may take."""
_extended: dict[type, type] = {}


class PatternTimeout(Exception):
    """The check of ``pattern`` against a value ran out of time."""


def search(pattern: str, text: str) -> bool:
    """``re.search(pattern, text) is not None``, within ``PATTERN_SECONDS`` (else ``PatternTimeout``)."""
    try:
        compiled = regex.compile(pattern)
    except (regex.error, TypeError, ValueError):
        return re.search(pattern, text) is not None
    try:
        return compiled.search(text, timeout=PATTERN_SECONDS) is not None
    except TimeoutError:
        raise PatternTimeout(pattern) from None


def pattern_matches(pattern: str, key: str) -> bool:
    """Whether a property name matches a ``patternProperties`` pattern (time-limited, as ``search``);
    a pattern that does not compile or runs out of time does not match."""
    try:
        return search(pattern, key)
    except (PatternTimeout, re.error):
        return False


def _too_slow(pattern: str) -> str:
    return f"could not be checked against the pattern {pattern!r} within {PATTERN_SECONDS:g} s"


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    try:
        matched = search(pattern, instance)
    except PatternTimeout:
        yield ValidationError(f"{instance[:80]!r} {_too_slow(pattern)}")
        return
    if not matched:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = search(pattern, key)
            except PatternTimeout:
                yield ValidationError(f"the property name {key[:80]!r} {_too_slow(pattern)}")
                continue
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def bounded_validator(cls: type) -> type:
    """``cls`` (a ``jsonschema`` validator class) with time-limited ``pattern`` and ``patternProperties``."""
    from jsonschema.validators import extend

    extended = _extended.get(cls)
    if extended is None:
        extended = _extended[cls] = extend(cls, {"pattern": _pattern, "patternProperties": _pattern_properties})
    return extended
