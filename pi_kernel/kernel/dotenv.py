"""A ``.env`` file in the working directory: the lowest layer of a session's settings (see ``config``).

It only fills variables that are not set already; keys read from it are never
copied into settings, only used where the environment is.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from pathlib import Path


def parse_dotenv(text: str) -> dict[str, str]:
    """``KEY=value`` lines (``export`` prefix, quotes and ``#`` comments allowed)."""
    values: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            continue
        value = value.strip()
        if value[:1] in ("'", '"'):
            quote = value[0]
            end = value.find(quote, 1)
            value = value[1:end] if end > 0 else value[1:]
            if quote == '"':
                value = value.replace("\\n", "\n")
        else:
            value = re.split(r"\s+#", value, maxsplit=1)[0].strip()
        values[name] = value
    return values


def load_dotenv(path: Path | str = ".env", environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Fill ``environ`` from a ``.env`` file without overriding set variables; the names set."""
    environ = os.environ if environ is None else environ
    file = Path(path)
    if not file.is_file():
        return []
    added = []
    for name, value in parse_dotenv(file.read_text(encoding="utf-8", errors="replace")).items():
        if name not in environ:
            environ[name] = value
            added.append(name)
    return added
