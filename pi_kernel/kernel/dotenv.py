"""A ``.env`` file in the working directory: the lowest layer of a session's settings (see ``config``).

A notebook folder cloned from someone else can carry a ``.env``, so it is
trusted only to supply what is missing, never to weaken safety or to send an
existing key elsewhere:

- only the project's own names are taken (``DOTENV_NAMES``); anything else
  (``BASH_ENV``, ``PYTHONPATH``, ``LD_PRELOAD``, ...) is ignored and named in
  the session's first notice;
- a variable already set in the environment is never overridden;
- ``PI_APPROVAL`` is taken only when it is stricter than the default ``ask``
  (``deny`` or ``read-only``);
- a base URL and the key sent to it come from the same source: the ``.env``'s
  ``OPENAI_BASE_URL`` is ignored when any key is set in the environment, the
  key sent to it is the ``.env``'s own ``OPENAI_API_KEY`` (kept under
  ``DOTENV_KEY_ENV``, so a key set later in the notebook never reaches that
  server), and the ``.env``'s ``OPENAI_API_KEY`` is ignored when
  ``OPENAI_BASE_URL`` is set in the environment (other providers' keys go to
  their own URLs);
- a ``.env``'s key never switches the user's provider: when the environment
  holds a key, the default model uses it (the ``.env``'s keys are recorded in
  ``DOTENV_KEYS_ENV``, and the session's notice names them), and a ``.env``
  that brings a key cannot choose the model (``PI_MODEL``, ``PI_PROVIDER``).

The ``.env``'s base URL is returned, not exported: the settings carry it (and
that it came from a ``.env``); keys go to the environment, where providers
and masking read them, never into settings.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field
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


KEY_NAMES = ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")
"""Keys a ``.env`` may supply (each goes to its own provider's URL; a ``.env`` sets no provider's URL but
``OPENAI_BASE_URL``, under the rule above: ``ANTHROPIC_BASE_URL`` is not among ``DOTENV_NAMES``)."""
DOTENV_NAMES = frozenset(
    {*KEY_NAMES, "OPENAI_BASE_URL", "PI_MODEL", "PI_PROVIDER", "PI_APPROVAL", "PI_APPROVAL_TIMEOUT", "PI_WIDGETS"}
    | {"PI_WORKSPACE_ROOT"}
)
"""The only names a ``.env`` may set (a workspace root only confines the file tools further)."""
STRICTER_APPROVALS = ("deny", "read-only")
"""``PI_APPROVAL`` values a ``.env`` may set: never more permissive than ``ask``."""
DOTENV_KEY_ENV = "PI_DOTENV_OPENAI_API_KEY"
DOTENV_KEYS_ENV = "PI_DOTENV_KEYS"
"""Names of the keys a ``.env`` added (comma-separated): the default model prefers a key of the real environment
(``model_resolution.resolve_model``), so a ``.env``'s key never switches the user's provider."""
"""Where the ``.env``'s ``OPENAI_API_KEY`` is kept when its ``OPENAI_BASE_URL`` is used: the only key sent there."""


@dataclass
class DotenvResult:
    """What a ``.env`` supplied."""

    added: list[str] = field(default_factory=list)
    """Names set in the environment."""
    base_url: str | None = None
    """The ``.env``'s ``OPENAI_BASE_URL`` when it is used (not exported; see the module doc)."""
    ignored: list[str] = field(default_factory=list)
    """One line per ignored entry or group, for the session's notice."""


def load_dotenv(path: Path | str = ".env", environ: MutableMapping[str, str] | None = None) -> DotenvResult:
    """Fill ``environ`` from a ``.env`` file under the rules of the module doc."""
    environ = os.environ if environ is None else environ
    result = DotenvResult()
    file = Path(path)
    if not file.is_file():
        return result
    values = parse_dotenv(file.read_text(encoding="utf-8", errors="replace"))
    unknown = sorted(name for name in values if name not in DOTENV_NAMES)
    if unknown:
        result.ignored.append(f"not pi-kernel settings, ignored: {', '.join(unknown)}")
    wanted = {name: value for name, value in values.items() if name in DOTENV_NAMES and name not in environ}
    approval = wanted.pop("PI_APPROVAL", None)
    if approval is not None:
        if approval.strip().lower() in STRICTER_APPROVALS:
            wanted["PI_APPROVAL"] = approval
        else:
            result.ignored.append("PI_APPROVAL ignored: a .env may only make approval stricter (deny, read-only)")
    base_url = wanted.pop("OPENAI_BASE_URL", None)
    if base_url is not None and base_url.strip():
        set_keys = [name for name in KEY_NAMES if environ.get(name)]
        if set_keys:
            result.ignored.append(
                f"OPENAI_BASE_URL ignored: {', '.join(set_keys)} is set in the environment and is never sent "
                "to a server named by a .env"
            )
        else:
            result.base_url = base_url.strip()
            key = wanted.pop("OPENAI_API_KEY", None)
            if key:
                environ[DOTENV_KEY_ENV] = key
    if "OPENAI_BASE_URL" in environ and wanted.pop("OPENAI_API_KEY", None) is not None:
        result.ignored.append(
            "OPENAI_API_KEY ignored: OPENAI_BASE_URL is set in the environment, and a key must come "
            "from the same place as the URL it is sent to"
        )
    own_keys = [name for name in KEY_NAMES if environ.get(name)]
    added_keys = [name for name in KEY_NAMES if wanted.get(name)]
    if own_keys and added_keys:
        result.ignored.append(
            f"{', '.join(added_keys)} set from the .env, but the default model uses "
            f"{own_keys[0]} from the environment (a .env's key never switches your provider)"
        )
        for name in ("PI_MODEL", "PI_PROVIDER"):
            if wanted.pop(name, None) is not None:
                result.ignored.append(
                    f"{name} ignored: the .env also brings its own key, and {own_keys[0]} is set in the environment"
                )
    for name, value in wanted.items():
        environ[name] = value
        result.added.append(name)
    if added_keys:
        environ[DOTENV_KEYS_ENV] = ",".join(added_keys)
    return result
