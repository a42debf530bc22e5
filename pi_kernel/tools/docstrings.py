"""Parameter descriptions from a docstring: Google, NumPy and Sphinx styles.

``@tool`` turns a plain function into a tool; the model learns what each
argument means from the function's docstring. This is a small parser for the
three styles people actually write, not a full docstring grammar: it finds the
free text before the first section (the tool description), the parameter
entries (name → description) and the returns text. Styles may not be mixed in
one docstring; the first section found decides.

Google::

    Args:
        city (str): The city.
        days: How many days,
            continued on the next line.

NumPy::

    Parameters
    ----------
    city : str
        The city.

Sphinx::

    :param city: The city.
    :param int days: How many days.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_GOOGLE_PARAM_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "kwargs",
    "other parameters",
}
_RETURN_SECTIONS = {"returns", "return", "yields", "yield"}
_OTHER_SECTIONS = {
    "raises",
    "raise",
    "except",
    "exceptions",
    "example",
    "examples",
    "note",
    "notes",
    "see also",
    "attributes",
    "warning",
    "warnings",
    "warns",
    "references",
    "todo",
    "methods",
}
_SECTION_NAMES = _GOOGLE_PARAM_SECTIONS | _RETURN_SECTIONS | _OTHER_SECTIONS

_GOOGLE_HEADER = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_FIELD = re.compile(r"^\s*:(\w+)((?:\s+[^:]+?)?)\s*:(.*)$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:(.*)$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}([\w, *]+?)\s*(?::(.*))?$")

_SPHINX_PARAM_FIELDS = {"param", "parameter", "arg", "argument", "key", "keyword"}
_SPHINX_RETURN_FIELDS = {"returns", "return"}


@dataclass(frozen=True, slots=True)
class ParsedDocstring:
    description: str = ""
    """The summary and long description: everything before the first section."""
    params: dict[str, str] = field(default_factory=dict)
    """Parameter name → its description (whitespace collapsed to single spaces)."""
    returns: str | None = None
    """The text of a Returns/Yields section or ``:returns:`` field."""


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split ``doc`` into description, parameter descriptions and returns text."""
    if not doc or not doc.strip():
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    start = _first_section_line(lines)
    description = "\n".join(lines[:start]).strip()
    rest = lines[start:]
    if not rest:
        return ParsedDocstring(description)
    if _SPHINX_FIELD.match(rest[0]):
        params, returns = _parse_sphinx(rest)
    elif len(rest) > 1 and _NUMPY_UNDERLINE.match(rest[1]):
        params, returns = _parse_numpy(rest)
    else:
        params, returns = _parse_google(rest)
    return ParsedDocstring(description, params, returns)


def _section_name(line: str) -> str | None:
    """The lower-cased name if ``line`` could head a section, else None."""
    stripped = line.strip().rstrip(":").strip().lower()
    return stripped if stripped in _SECTION_NAMES else None


def _is_google_header(line: str) -> bool:
    return bool(_GOOGLE_HEADER.match(line)) and _section_name(line) is not None


def _is_numpy_header(lines: list[str], index: int) -> bool:
    return (
        index + 1 < len(lines)
        and _section_name(lines[index]) is not None
        and not lines[index].rstrip().endswith(":")
        and bool(_NUMPY_UNDERLINE.match(lines[index + 1]))
    )


def _first_section_line(lines: list[str]) -> int:
    for index, line in enumerate(lines):
        if _SPHINX_FIELD.match(line) or _is_google_header(line) or _is_numpy_header(lines, index):
            return index
    return len(lines)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(parts: list[str]) -> str:
    return " ".join(" ".join(parts).split())


def _parse_google(lines: list[str]) -> tuple[dict[str, str], str | None]:
    params: dict[str, str] = {}
    returns: str | None = None
    index = 0
    while index < len(lines):
        header = lines[index]
        if not _is_google_header(header):
            index += 1
            continue
        name = _section_name(header)
        header_indent = _indent(header)
        body_end = index + 1
        while body_end < len(lines) and (not lines[body_end].strip() or _indent(lines[body_end]) > header_indent):
            body_end += 1
        body = lines[index + 1 : body_end]
        if name in _GOOGLE_PARAM_SECTIONS:
            params.update(_google_entries(body))
        elif name in _RETURN_SECTIONS:
            returns = _join([line.strip() for line in body]) or None
        index = body_end
    return params, returns


def _google_entries(body: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    nonblank = [line for line in body if line.strip()]
    if not nonblank:
        return {}
    entry_indent = min(_indent(line) for line in nonblank)
    current: list[str] | None = None
    for line in nonblank:
        match = _GOOGLE_ENTRY.match(line.strip()) if _indent(line) == entry_indent else None
        if match:
            current = entries.setdefault(match.group(1), [])
            current.append(match.group(3))
        elif current is not None:
            current.append(line.strip())
    return {name: _join(parts) for name, parts in entries.items()}


def _parse_numpy(lines: list[str]) -> tuple[dict[str, str], str | None]:
    params: dict[str, str] = {}
    returns: str | None = None
    headers = [index for index in range(len(lines)) if _is_numpy_header(lines, index)]
    for position, start in enumerate(headers):
        end = headers[position + 1] if position + 1 < len(headers) else len(lines)
        name = _section_name(lines[start])
        body = lines[start + 2 : end]
        if name in _GOOGLE_PARAM_SECTIONS:
            params.update(_numpy_entries(body))
        elif name in _RETURN_SECTIONS:
            returns = _numpy_returns(body)
    return params, returns


def _numpy_entries(body: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    nonblank = [line for line in body if line.strip()]
    if not nonblank:
        return {}
    entry_indent = min(_indent(line) for line in nonblank)
    current: list[list[str]] = []
    for line in nonblank:
        match = _NUMPY_ENTRY.match(line.strip()) if _indent(line) == entry_indent else None
        if match:
            # ``x, y : float`` documents two parameters with one text.
            names = [part.strip().lstrip("*") for part in match.group(1).split(",") if part.strip()]
            current = [entries.setdefault(name, []) for name in names]
        else:
            for parts in current:
                parts.append(line.strip())
    return {name: _join(parts) for name, parts in entries.items()}


def _numpy_returns(body: list[str]) -> str | None:
    nonblank = [line for line in body if line.strip()]
    if not nonblank:
        return None
    entry_indent = min(_indent(line) for line in nonblank)
    described = [line.strip() for line in nonblank if _indent(line) > entry_indent]
    return _join(described or [line.strip() for line in nonblank]) or None


def _parse_sphinx(lines: list[str]) -> tuple[dict[str, str], str | None]:
    params: dict[str, str] = {}
    returns: str | None = None
    fields: list[tuple[str, str, list[str]]] = []
    for line in lines:
        match = _SPHINX_FIELD.match(line)
        if match:
            fields.append((match.group(1).lower(), match.group(2).strip(), [match.group(3)]))
        elif fields and line.strip():
            fields[-1][2].append(line.strip())
    for kind, argument, parts in fields:
        if kind in _SPHINX_PARAM_FIELDS and argument:
            # ``:param int days:`` — the name is the last word.
            params[argument.split()[-1].lstrip("*")] = _join(parts)
        elif kind in _SPHINX_RETURN_FIELDS:
            returns = _join(parts) or None
    return params, returns
