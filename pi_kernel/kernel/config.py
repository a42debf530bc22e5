"""Settings of a Pi session: traitlets, the environment and a ``.env`` file.

Precedence, highest first: ``%pi`` magics at run time, traitlets config
(``c.PiKernel.model = ...``), the environment (``PI_MODEL``, ``PI_APPROVAL``,
...), a ``.env`` file in the working directory (``dotenv``; it only fills variables that
are not set already), built-in defaults.

Keys are never copied into settings: a ``Model`` names the environment
variable that holds its key and the provider reads it when it sends a request.
A warning about a bad value masks any key in it (the kernel's hook, ``outgoing.masked``).

Every setting is written once, as a field of ``PiSettings`` made by ``setting``: its default, parser, help
and environment variable. ``SETTINGS`` lists those rows; ``settings_from_env`` and ``apply_config`` read
them, ``PiKernel`` makes a trait of each. The model is ``model_resolution``'s. (Long: one table row per
setting, each with its help text, is the point of the module.)
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar, cast

from pi_kernel.kernel.allowed_models import parse_allowed_models
from pi_kernel.kernel.mcp_settings import mcp_servers, mcp_servers_file
from pi_kernel.kernel.outgoing import masked

APPROVAL_MODES = ("ask", "auto", "deny", "read-only")
TOOL_APPROVAL_MODES = ("ask", "auto", "deny")
"""Per-tool modes (``approval_overrides``); ``pi_kernel.tools.approval`` has the same, but
importing it here would cost a quarter of a second at every kernel start."""
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
    """Note a bad setting that fell back (a kernel must start whatever its environment holds: the
    session shows ``problems`` in its first ``%pi`` output); without a list to collect it, raise."""
    if problems is None:
        raise ValueError(message)
    problems.append(message)


def _shown(value: Any) -> str:
    """A bad value as a warning quotes it: keys masked, shortened (it might be a pasted secret)."""
    try:
        text = _masked(str(value))
    except Exception:  # noqa: BLE001 - an object whose str() fails is still only a bad value
        text = f"<{type(value).__name__}>"
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _masked(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the keys of ``environ`` (default: the process's) masked."""
    return str(masked(text, environ=environ if environ is not None else os.environ))


def _using(settings: PiSettings, name: str) -> str:
    """The "using X" of a warning: the value a bad setting fell back to, noted when it is the default."""
    kept, default = getattr(settings, name), getattr(PiSettings(), name)
    shown = f"{kept:g}" if isinstance(kept, float) else repr(kept)
    return f"using {shown}" + (" (the default)" if kept == default else "")


TIMEOUT_RULE = "must be a number of seconds above 0 (nothing waits forever)"


def _seconds(value: Any) -> float:
    """An approval timeout: a finite number above 0 (``ValueError`` otherwise; ``0`` once meant "never")."""
    try:
        seconds = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
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
    text = value.strip().lstrip("$") if isinstance(value, str) else value
    try:
        amount = math.nan if isinstance(text, bool) else float(text)
    except (TypeError, ValueError, OverflowError):
        amount = math.nan
    if not math.isfinite(amount) or amount < 0:
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


def thinking_level(value: Any) -> str:
    """A thinking effort: one of ``THINKING_LEVELS`` (any case); ``ValueError`` otherwise."""
    level = value.strip().lower() if isinstance(value, str) else value
    if level not in THINKING_LEVELS:
        raise ValueError(f"{_shown(value)} is not one of {', '.join(THINKING_LEVELS)}")
    return str(level)


def _approval(value: Any) -> str:
    mode = value.strip().lower() if isinstance(value, str) else value
    if mode not in APPROVAL_MODES:
        raise ValueError(f"{_shown(value)} is not one of {', '.join(APPROVAL_MODES)}")
    return str(mode)


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


_T = TypeVar("_T")
_ROW = "pi_kernel.setting"
"""The ``field(metadata=...)`` key of a setting's row (what ``setting`` stores)."""


@dataclass(frozen=True)
class Setting:
    """One setting: its ``PiSettings`` field (and ``c.PiKernel.<name>``), how a value is read, its help."""

    name: str
    parse: Callable[[Any], Any]
    """A config value (or the environment's text) as the setting wants it; ``ValueError`` saying what is wrong."""
    help: str
    env: str | None = None
    """The environment variable that sets it, if any."""
    env_parse: Callable[[str], Any] | None = None
    """How the environment's text is read, when not as ``parse`` reads it."""
    merge: bool = False
    """A mapping that adds to (and by name replaces) what a lower layer gave, instead of replacing it."""


def setting(
    default: _T,
    parse: Callable[[Any], _T],
    help: str,
    env: str | None = None,
    *,
    env_parse: Callable[[str], _T] | None = None,
    merge: bool = False,
) -> _T:
    """A ``PiSettings`` field that is a setting: its default and ``Setting`` row (a dict default is copied
    for each ``PiSettings``)."""
    row = {_ROW: {"parse": parse, "help": help, "env": env, "env_parse": env_parse, "merge": merge}}
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
        "ask", _approval, f"Approval mode for tool calls: {' | '.join(APPROVAL_MODES)}.", "PI_APPROVAL"
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
    """Checked when the session first uses them, by ``pi_kernel.tools.mcp.server_config``."""
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
    """Whether ``base_url`` came from ``OPENAI_BASE_URL`` (then it only applies to
    OpenAI-style providers, not to, say, an explicit ``deepseek:`` model)."""
    base_url_from_dotenv: bool = False
    """Whether ``base_url`` came from a ``.env`` file: then the only key sent there is that file's own
    (``dotenv.DOTENV_KEY_ENV``), never one set in the environment or later in the notebook."""


SETTINGS: tuple[Setting, ...] = tuple(
    Setting(item.name, **item.metadata[_ROW]) for item in fields(PiSettings) if _ROW in item.metadata
)
"""Every setting once, in ``PiSettings`` order: read from the environment (``settings_from_env``) and
from ``c.PiKernel`` (``apply_config``); ``PiKernel`` makes one trait of each."""

CONFIG_NAMES = tuple(row.name for row in SETTINGS)
"""Settings that ``c.PiKernel.<name>`` may set."""


def _fallback(settings: PiSettings, row: Setting) -> str:
    return "no MCP servers from that file" if row.merge else _using(settings, row.name)


def settings_from_env(
    environ: Mapping[str, str] | None = None, base: PiSettings | None = None, problems: list[str] | None = None
) -> PiSettings:
    """``base`` (defaults) with what the environment sets. A bad value keeps ``base``'s and is reported
    in ``problems`` (``ValueError`` when ``problems`` is ``None``)."""
    env = os.environ if environ is None else environ
    settings = replace(base) if base is not None else PiSettings()
    for row in SETTINGS:
        text = env.get(row.env, "").strip() if row.env else ""
        if not text:
            continue
        try:
            value = (row.env_parse or row.parse)(text)
        except Exception as error:  # noqa: BLE001 - whatever the environment holds, the kernel must start
            _report(problems, f"{row.env}: {_masked(str(error), env)}; {_fallback(settings, row)}.")
            continue
        if row.merge:
            value = {**getattr(settings, row.name), **value}
        setattr(settings, row.name, value)
        if row.name == "base_url":
            settings.base_url_from_env = True
    return settings


def apply_config(settings: PiSettings, values: Mapping[str, Any], problems: list[str] | None = None) -> PiSettings:
    """``settings`` with every known, non-``None`` value of ``values`` applied. A bad value keeps
    ``settings``' and is reported in ``problems`` (``ValueError`` when ``problems`` is ``None``)."""
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
