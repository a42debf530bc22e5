"""Settings of a Pi session: traitlets, the environment and a ``.env`` file.

Precedence, highest first: ``%pi`` magics, traitlets config (``c.PiKernel.model = ...``), the
environment (``PI_MODEL``, ...), a ``.env`` in the working directory (``load_dotenv``), defaults. Keys are
never copied into settings: a ``Model`` names the variable that holds its key. A warning about a bad
value masks any key in it. Every setting is one field of ``PiSettings`` made by ``setting``;
``PiKernel`` makes a trait of each. Of MCP servers only the outer ``mcpServers`` shape is read here (no
``mcp`` SDK at kernel start); ``tools.mcp.server_config`` checks each entry at first use.

**The ``.env`` file.** A notebook folder cloned from someone else can carry one, so it only supplies
what is missing, never weakens safety or sends an existing key elsewhere:

- only the project's own names are taken (``DOTENV_NAMES``); anything else (``BASH_ENV``,
  ``LD_PRELOAD``, ...) is ignored and named in the session's first notice;
- a variable already set is never overridden;
- ``PI_APPROVAL`` only when stricter than ``ask`` (``deny``, ``read-only``);
- a base URL and the key sent to it come from the same source: the ``.env``'s ``OPENAI_BASE_URL`` is
  ignored when any key is set in the environment; the key sent to it is the ``.env``'s own
  ``OPENAI_API_KEY`` (kept under ``DOTENV_KEY_ENV``, so a key set later never reaches that server),
  and that key is ignored when ``OPENAI_BASE_URL`` is set in the environment;
- a ``.env``'s key never switches the user's provider: the default model prefers a key of the
  environment (``DOTENV_KEYS_ENV``), and such a ``.env`` cannot choose the model (``PI_MODEL``,
  ``PI_PROVIDER``).

Long: one table row per setting, each with its help text, is the point of the module.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from pi_kernel.kernel.outgoing import masked

APPROVAL_MODES = ("ask", "auto", "deny", "read-only")
TOOL_APPROVAL_MODES = ("ask", "auto", "deny")
"""Per-tool modes, as ``pi_kernel.tools.approval``'s (importing it would cost 0.25 s at kernel start)."""
DEFAULT_BUILTIN_TOOLS = (
    "read",
    "write",
    "edit",
    "bash",
    "python",
    "inspect",
    "cells",
    "edit_cell",
    "insert_cells",
    "run_cells",
    "delete_cells",
)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _url(value: str) -> str:
    """An OpenAI-compatible server's base URL: ``http(s)://host...`` (``ValueError`` otherwise)."""
    url = value.strip()
    if not re.fullmatch(r"(?i)https?://[^\s/]+\S*", url):
        raise ValueError(f"{_shown(url)} is not an http:// or https:// URL")
    return url


def _folder(value: str) -> str:
    """A workspace folder as written; ``ValueError`` when ``~user`` in it names nobody."""
    if "\x00" in value or not value.strip():
        raise ValueError(f"{_shown(value)} is not a folder name")
    try:
        Path(value).expanduser()
    except RuntimeError as error:
        raise ValueError(f"{_shown(value)} cannot be resolved ({error})") from None
    return value


def _report(problems: list[str] | None, message: str) -> None:
    """Note a bad setting that fell back (a kernel must start whatever its environment holds); no list: raise."""
    if problems is None:
        raise ValueError(message)
    problems.append(message)


def _shown(value: Any) -> str:
    """A bad value as a warning quotes it: keys masked, shortened (it might be a pasted secret)."""
    try:
        text = str(masked(str(value), environ=os.environ))
    except Exception:  # noqa: BLE001 - an object whose str() fails is still only a bad value
        text = f"<{type(value).__name__}>"
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _using(settings: PiSettings, name: str) -> str:
    """The "using X" of a warning: the value a bad setting fell back to, noted when it is the default."""
    kept, default = getattr(settings, name), getattr(PiSettings(), name)
    shown = f"{kept:g}" if isinstance(kept, float) else repr(kept)
    return f"using {shown}" + (" (the default)" if kept == default else "")


TIMEOUT_RULE = "must be a number of seconds above 0 (nothing waits forever)"


def _number(value: Any) -> float:
    """``value`` as a finite float, else ``nan`` (a bool is no number)."""
    try:
        number = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _seconds(value: Any) -> float:
    """An approval timeout: a finite number above 0 (``ValueError`` otherwise; ``0`` once meant "never")."""
    seconds = _number(value)
    if not seconds > 0:
        raise ValueError(f"{_shown(value)} {TIMEOUT_RULE}")
    return seconds


def positive_int(value: Any) -> int:
    """A whole number above 0 (``"64_000"`` and ``"64k"`` allowed); ``ValueError`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    text = str(value).strip().lower().replace("_", "").replace(",", "") if isinstance(value, str) else ""
    scale = 1000 if text.endswith("k") else 1
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) <= 0:
        raise ValueError(f"{_shown(value)} is not a whole number above 0")
    return int(digits) * scale


_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def byte_count(value: Any) -> int:
    """Bytes, 0 or more: ``1073741824``, ``"512MB"``, ``"1 GB"`` (units of 1024); ``ValueError`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?b?)", str(value).strip().lower().replace("_", ""))
    if not isinstance(value, str) or match is None:
        raise ValueError(f"{_shown(value)} is not a size in bytes (such as 512MB or 1GB)")
    return int(float(match.group(1)) * _BYTE_UNITS[match.group(2)])


def dollars(value: Any) -> float:
    """An amount of US dollars, at least 0 (``"$5"`` allowed); ``ValueError`` otherwise."""
    amount = _number(value.strip().lstrip("$") if isinstance(value, str) else value)
    if not amount >= 0:
        raise ValueError(f"{_shown(value)} is not an amount of US dollars (0 or more)")
    return amount


def _json(value: Any) -> Any:
    """``value``, or what its JSON text holds (the error never quotes the text: it may hold anything)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as error:
        raise ValueError(f"not valid JSON ({error})") from None


def price_table(value: Any) -> dict[str, tuple[float, float]]:
    """Prices from a mapping (or its JSON text) of model id → ``[input, output]`` USD per million tokens."""
    value = _json(value)
    if not isinstance(value, Mapping):
        raise ValueError('not a mapping such as {"my-model": [0.5, 1.5]}')
    table: dict[str, tuple[float, float]] = {}
    for model_id, pair in value.items():
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"the price of {model_id!s} is not [input, output]")
        table[str(model_id)] = (dollars(pair[0]), dollars(pair[1]))
    return table


def _overrides(value: Any) -> dict[str, str]:
    """Per-tool modes from a mapping or its JSON text."""
    value = _json(value)
    if not isinstance(value, Mapping):
        raise ValueError('not a JSON object such as {"bash": "ask"}')
    bad = sorted(str(name) for name, mode in value.items() if mode not in TOOL_APPROVAL_MODES)
    if bad:
        raise ValueError(f"the mode of {', '.join(bad)} is not one of {', '.join(TOOL_APPROVAL_MODES)}")
    return {str(name): str(mode) for name, mode in value.items()}


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{_shown(value)} is not a string")
    return value


def _name(value: Any) -> str:
    """A model or provider name: a non-empty string."""
    if not _text(value).strip():
        raise ValueError("is empty")
    return value.strip()


THINKING_LEVELS = ("off", "low", "medium", "high")


def _one_of(choices: tuple[str, ...], value: Any) -> str:
    word = value.strip().lower() if isinstance(value, str) else value
    if word not in choices:
        raise ValueError(f"{_shown(value)} is not one of {', '.join(choices)}")
    return str(word)


thinking_level = partial(_one_of, THINKING_LEVELS)
"""A thinking effort: one of ``THINKING_LEVELS`` (any case); ``ValueError`` otherwise."""


def _boolean(value: Any) -> bool:
    """A bool, or ``1/true/yes/on`` / ``0/false/no/off`` (any case); ``ValueError`` otherwise."""
    if isinstance(value, bool):
        return value
    word = value.strip().lower() if isinstance(value, str) else ""
    if not word:
        raise ValueError(f"{_shown(value)} is not true or false")
    if word not in _TRUE + _FALSE:
        raise ValueError(f"{_shown(value)} is not one of {', '.join(_TRUE)} or {', '.join(_FALSE)}")
    return word in _TRUE


def _tool_names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(word for word in re.split(r"[\s,\[\]'\"]+", value) if word)
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{_shown(value)} is not a list of tool names")
    return tuple(value)


def parse_allowed_models(value: Any) -> tuple[str, ...]:
    """Entries from a list of strings, a JSON list, or one string separated by commas or white space."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError as error:
                raise ValueError(f"not a valid JSON list ({error})") from None
        else:
            return tuple(entry for entry in re.split(r"[\s,]+", text) if entry)
    if not isinstance(value, (list, tuple)) or not all(isinstance(entry, str) for entry in value):
        raise ValueError("not a list of model names such as ['gpt-4o-mini', 'deepseek:deepseek-chat']")
    return tuple(entry.strip() for entry in value if entry.strip())


def mcp_servers(value: Any) -> dict[str, Any]:
    """The ``name → entry`` mapping of ``{"mcpServers": {...}}``, of the inner mapping, or of their JSON."""
    value = _json(value)
    if isinstance(value, Mapping) and "mcpServers" in value:
        value = value["mcpServers"]
    if not isinstance(value, Mapping):
        raise ValueError('not an object such as {"mcpServers": {"NAME": {"command": "...", "args": []}}}')
    return {str(name): entry for name, entry in value.items()}


def mcp_servers_file(path: str) -> dict[str, Any]:
    """``PI_MCP_CONFIG``: the servers of a JSON file in the ``mcpServers`` shape."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, RuntimeError) as error:  # RuntimeError: ``~user`` naming nobody
        raise ValueError(f"cannot read {path!r} ({getattr(error, 'strerror', None) or error})") from None
    return mcp_servers(text)


_T = TypeVar("_T")
_ROW = "pi_kernel.setting"
"""The ``field(metadata=...)`` key of a setting's ``Setting`` row."""


@dataclass(frozen=True)
class Setting:
    """One setting: its field (and ``c.PiKernel.<name>``), its parser (``ValueError`` saying what is wrong), help,
    variable, the environment text's own parser, and ``merge``: a mapping that adds to a lower layer's."""

    name: str
    parse: Callable[[Any], Any]
    help: str
    env: str | None = None
    env_parse: Callable[[str], Any] | None = None
    merge: bool = False


def setting(
    default: _T,
    parse: Callable[[Any], _T],
    help: str,
    env: str | None = None,
    *,
    env_parse: Callable[[str], _T] | None = None,
    merge: bool = False,
) -> _T:
    """A ``PiSettings`` field that is a setting (a dict default is copied for each ``PiSettings``)."""
    row = {_ROW: Setting("", parse, help, env, env_parse, merge)}
    if isinstance(default, dict):
        return cast(_T, field(default_factory=default.copy, metadata=row))
    return field(default=default, metadata=row)


@dataclass
class PiSettings:
    """What a session is configured with (no secrets): one field per setting, then what ``base_url`` came from."""

    model: str | None = setting(
        None, _name, "Model id, 'provider:model' allowed (else from PI_MODEL / keys).", "PI_MODEL"
    )
    provider: str | None = setting(None, _name, "Provider when the model id alone is ambiguous.", "PI_PROVIDER")
    base_url: str | None = setting(
        None, lambda value: _url(_text(value)), "An OpenAI-compatible server URL.", "OPENAI_BASE_URL"
    )
    """With it set and no explicit provider, the server is the default."""
    approval: str = setting(
        "ask",
        partial(_one_of, APPROVAL_MODES),
        f"Approval mode for tool calls: {' | '.join(APPROVAL_MODES)}.",
        "PI_APPROVAL",
    )
    approval_overrides: dict[str, str] = setting(
        {}, _overrides, f"Per-tool approval ({' | '.join(TOOL_APPROVAL_MODES)}), a dict or JSON: {{'bash': 'ask'}}."
    )
    approval_timeout: float = setting(
        600.0, _seconds, "Seconds (above 0) before a pending approval is denied.", "PI_APPROVAL_TIMEOUT"
    )
    builtin_tools: tuple[str, ...] = setting(
        DEFAULT_BUILTIN_TOOLS,
        _tool_names,
        "Built-in tools enabled at start: a list of names, or one string of them.",
    )
    widgets: bool | None = setting(None, _boolean, "Force widget views on/off (default: detect).", "PI_WIDGETS")
    max_turns: int | None = setting(
        None, positive_int, "Default limit of model requests per %%pi cell (a whole number above 0)."
    )
    system_prompt: str | None = setting(None, _text, "Text added to the system prompt.")
    """Placed before the generated system prompt."""
    allowed_models: tuple[str, ...] = setting(
        (),
        parse_allowed_models,
        "Models %pi model may choose: ids or provider:id, wildcards allowed (default: any).",
        "PI_ALLOWED_MODELS",
    )
    tool_result_limit: int | None = setting(
        None,
        positive_int,
        "Characters of each tool result sent to the model (a whole number above 0).",
        "PI_TOOL_RESULT_LIMIT",
    )
    """``None``: the agent's default (docs/long-sessions.md)."""
    context_window: int | None = setting(
        None,
        positive_int,
        "The model's context window in tokens (else known table, server, default).",
        "PI_CONTEXT_WINDOW",
    )
    budget: float | None = setting(None, dollars, "US dollars the session may spend on model requests.", "PI_BUDGET")
    token_budget: int | None = setting(
        None, positive_int, "Tokens (in + out) the session may spend on model requests.", "PI_TOKEN_BUDGET"
    )
    prices: dict[str, tuple[float, float]] = setting(
        {}, price_table, "Extra prices: {'model-id': [USD per million input, per million output]}.", "PI_PRICES"
    )
    mcp_servers: dict[str, Any] = setting(
        {},
        mcp_servers,
        'MCP servers in the mcpServers shape: {"time": {"command": "uvx", "args": ["mcp-server-time"]}}.',
        "PI_MCP_CONFIG",
        env_parse=mcp_servers_file,
        merge=True,
    )
    notebook_context: bool = setting(
        True,
        _boolean,
        "Tell the model what changed in the notebook at each %%pi turn (default true).",
        "PI_NOTEBOOK_CONTEXT",
    )
    workspace_root: str | None = setting(
        None, lambda value: _folder(_text(value)), "File tools refuse paths outside it.", "PI_WORKSPACE_ROOT"
    )
    describe_limit: int = setting(4000, positive_int, "Characters of one inspect / cells answer (default 4000).")
    thinking: str | None = setting(
        None,
        thinking_level,
        f"How hard the model thinks: {' | '.join(THINKING_LEVELS)} (default: the model's own; docs/providers.md).",
        "PI_THINKING",
    )
    save_thinking: bool = setting(
        False, _boolean, "Keep the model's thinking in saved cell outputs (default false).", "PI_SAVE_THINKING"
    )
    notebook_timeout: float = setting(
        15.0,
        _seconds,
        "Seconds (above 0) a notebook bridge request waits for the front-end's answer (default 15).",
        "PI_NOTEBOOK_TIMEOUT",
    )
    undo_memory: int = setting(
        1 << 30,
        byte_count,
        "Memory for %pi undo's copies of objects a turn's code may change in place, and of files (default 1GB).",
        "PI_UNDO_MEMORY",
    )

    base_url_from_env: bool = False
    """From ``OPENAI_BASE_URL``: then it only applies to OpenAI-style providers (not an explicit ``deepseek:``)."""
    base_url_from_dotenv: bool = False
    """From a ``.env`` file: then the only key sent there is that file's own (``DOTENV_KEY_ENV``)."""


SETTINGS: tuple[Setting, ...] = tuple(
    replace(item.metadata[_ROW], name=item.name) for item in fields(PiSettings) if _ROW in item.metadata
)
"""Every setting once, in ``PiSettings`` order."""


def settings_from_env(
    environ: Mapping[str, str] | None = None, base: PiSettings | None = None, problems: list[str] | None = None
) -> PiSettings:
    """``base`` (defaults) with what the environment sets; a bad value keeps ``base``'s (``_report``)."""
    env = os.environ if environ is None else environ
    settings = replace(base) if base is not None else PiSettings()
    for row in SETTINGS:
        text = env.get(row.env, "").strip() if row.env else ""
        if not text:
            continue
        try:
            value = (row.env_parse or row.parse)(text)
        except Exception as error:  # noqa: BLE001 - whatever the environment holds, the kernel must start
            fallback = "no MCP servers from that file" if row.merge else _using(settings, row.name)
            _report(problems, f"{row.env}: {masked(str(error), environ=env)}; {fallback}.")
            continue
        if row.merge:
            value = {**getattr(settings, row.name), **value}
        setattr(settings, row.name, value)
        if row.name == "base_url":
            settings.base_url_from_env = True
    return settings


def apply_config(settings: PiSettings, values: Mapping[str, Any], problems: list[str] | None = None) -> PiSettings:
    """``settings`` with every known, non-``None`` value of ``values``; a bad one keeps the old (``_report``)."""
    changes: dict[str, Any] = {}
    for row in SETTINGS:
        if values.get(row.name) is None:
            continue
        try:
            value = row.parse(values[row.name])
        except Exception as error:  # noqa: BLE001 - whatever a config file holds, the kernel must start
            _report(problems, f"PiKernel.{row.name}: {error}; {_using(settings, row.name)}.")
            continue
        changes[row.name] = {**getattr(settings, row.name), **value} if row.merge else value
    if "base_url" in changes:
        changes["base_url_from_env"] = changes["base_url_from_dotenv"] = False
    return replace(settings, **changes)


def parse_dotenv(text: str) -> dict[str, str]:
    """``KEY=value`` lines (``export`` prefix, quotes and ``#`` comments allowed)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        found = re.fullmatch(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)", line.strip())
        if found is None:  # a blank line, a comment, or no NAME=
            continue
        name, value = found.group(1), found.group(2).strip()
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
"""Keys a ``.env`` may supply, each sent to its own provider's URL (a ``.env`` sets none but ``OPENAI_BASE_URL``)."""
DOTENV_NAMES = frozenset(
    {*KEY_NAMES, "OPENAI_BASE_URL", "PI_MODEL", "PI_PROVIDER", "PI_APPROVAL", "PI_APPROVAL_TIMEOUT", "PI_WIDGETS"}
    | {"PI_WORKSPACE_ROOT"}
)
"""The only names a ``.env`` may set (a workspace root only confines the file tools further)."""
STRICTER_APPROVALS = ("deny", "read-only")
"""``PI_APPROVAL`` values a ``.env`` may set: never more permissive than ``ask``."""
DOTENV_KEY_ENV = "PI_DOTENV_OPENAI_API_KEY"
"""Where the ``.env``'s ``OPENAI_API_KEY`` is kept when its ``OPENAI_BASE_URL`` is used: the only key sent there."""
DOTENV_KEYS_ENV = "PI_DOTENV_KEYS"
"""Names of the keys a ``.env`` added (comma-separated): the default model prefers the environment's."""


@dataclass
class DotenvResult:
    """What a ``.env`` supplied: the names set in the environment, its ``OPENAI_BASE_URL`` when used (not
    exported), and one line per ignored entry or group, for the session's notice."""

    added: list[str] = field(default_factory=list)
    base_url: str | None = None
    ignored: list[str] = field(default_factory=list)


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
    if wanted.get("PI_APPROVAL", "deny").strip().lower() not in STRICTER_APPROVALS:
        del wanted["PI_APPROVAL"]
        result.ignored.append("PI_APPROVAL ignored: a .env may only make approval stricter (deny, read-only)")
    base_url = wanted.pop("OPENAI_BASE_URL", "").strip()
    if base_url:
        set_keys = [name for name in KEY_NAMES if environ.get(name)]
        if set_keys:
            result.ignored.append(
                f"OPENAI_BASE_URL ignored: {', '.join(set_keys)} is set in the environment and is never sent "
                "to a server named by a .env"
            )
        else:
            result.base_url = base_url
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
    environ.update(wanted)
    result.added += wanted
    if added_keys:
        environ[DOTENV_KEYS_ENV] = ",".join(added_keys)
    return result
