"""Settings of a Pi session: traitlets, the environment and a ``.env`` file.

Precedence, highest first: ``%pi`` magics at run time, traitlets config
(``c.PiKernel.model = ...``), the environment (``PI_MODEL``, ``PI_APPROVAL``,
...), a ``.env`` file in the working directory (``dotenv``; it only fills variables that
are not set already), built-in defaults.

Keys are never copied into settings: a ``Model`` names the environment
variable that holds its key and the provider reads it when it sends a request.
``pi_kernel.ai.secrets.redact`` masks any known key value in text that leaves the
kernel, as a last line of defence (a provider error message quoting the key, say).

Every setting is one row of ``SETTINGS`` (name, parser, help, environment variable): ``settings_from_env``
and ``apply_config`` read it, ``PiKernel`` makes a trait of each row; the model is ``model_resolution``'s.

``pi_kernel.ai.secrets`` is imported lazily (``_masked``): ``pi_kernel.kernel.kernel`` imports this module,
and ``pi_kernel.ai`` (pydantic) would add about 60 ms to importing the kernel class.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_kernel.kernel.allowed_models import parse_allowed_models
from pi_kernel.kernel.mcp_settings import mcp_servers, mcp_servers_file

if TYPE_CHECKING:
    pass

# pi_kernel.ai is imported inside the functions: importing it at kernel start costs
# a second (jsonschema), and nothing here is needed before the first ``%%pi``.

APPROVAL_MODES = ("ask", "auto", "deny", "read-only")
TOOL_APPROVAL_MODES = ("ask", "auto", "deny")
"""Per-tool modes (``approval_overrides``); ``pi_kernel.tools.approval_policy`` has the same, but
importing it here would cost a quarter of a second at every kernel start."""
DEFAULT_BUILTIN_TOOLS = ("read", "write", "edit", "bash", "python", "inspect", "cells")


@dataclass
class PiSettings:
    """What a session is configured with (no secrets)."""

    model: str | None = None
    """Model spec, ``provider:model`` allowed; ``None``: resolved from the environment."""
    provider: str | None = None
    """Explicit provider when the id alone is ambiguous."""
    base_url: str | None = None
    """An OpenAI-compatible server; with it set and no explicit provider it is the default."""
    base_url_from_env: bool = False
    """Whether ``base_url`` came from ``OPENAI_BASE_URL`` (then it only applies to
    OpenAI-style providers, not to, say, an explicit ``deepseek:`` model)."""
    base_url_from_dotenv: bool = False
    """Whether ``base_url`` came from a ``.env`` file: then the only key sent there is that file's own
    (``dotenv.DOTENV_KEY_ENV``), never one set in the environment or later in the notebook."""
    approval: str = "ask"
    """Session approval mode: ``ask`` | ``auto`` | ``deny`` | ``read-only``."""
    approval_overrides: dict[str, str] = field(default_factory=dict)
    """Per-tool modes (``{"bash": "ask", "python": "auto"}``)."""
    approval_timeout: float = 600.0
    """Seconds before an unanswered approval is denied; always above 0 (nothing waits forever)."""
    workspace_root: str | None = None
    """When set, the file tools refuse paths outside it."""
    builtin_tools: tuple[str, ...] = DEFAULT_BUILTIN_TOOLS
    """Built-in tools enabled at start (names)."""
    widgets: bool | None = None
    """``True``/``False`` forces widget views on/off; ``None``: detect the front-end."""
    max_turns: int | None = None
    """Default limit of model requests per ``%%pi`` cell."""
    system_prompt: str | None = None
    """Extra text placed before the generated system prompt."""
    allowed_models: tuple[str, ...] = ()
    """The models ``%pi model`` may choose (``allowed_models``); empty: any."""
    tool_result_limit: int | None = None
    """Characters of each tool result sent to the model; ``None``: the agent's default (docs/long-sessions.md)."""
    context_window: int | None = None
    """The model's context window in tokens; ``None``: known table, the server's ``/models``, else a default."""
    budget: float | None = None
    """US dollars the session may spend; ``None``: no limit."""
    token_budget: int | None = None
    """Tokens (in + out) the session may spend; ``None``: no limit."""
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Extra prices, model id → (USD per million input tokens, per million output tokens)."""
    mcp_servers: dict[str, Any] = field(default_factory=dict)
    """MCP servers, name → ``mcpServers`` entry (checked when the session first uses them,
    by ``pi_kernel.tools.mcp.server_config``)."""
    notebook_context: bool = True
    """Each ``%%pi`` turn's first request says what changed in the notebook (``notebook_context``)."""
    describe_limit: int = 4000
    """Characters of one ``inspect`` / ``cells`` answer."""


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(value: str | None) -> bool | None:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case); empty: not set; anything else: ``ValueError``."""
    if value is None or value.strip() == "":
        return None
    word = value.strip().lower()
    if word not in _TRUE + _FALSE:
        raise ValueError(f"{_shown(value)} is not one of {', '.join(_TRUE)} or {', '.join(_FALSE)}")
    return word in _TRUE


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


def _shown(value: Any, environ: Mapping[str, str] | None = None) -> str:
    """A bad value as a warning quotes it: keys masked, shortened (it might be a pasted secret)."""
    try:
        text = _masked(str(value), environ)
    except Exception:  # noqa: BLE001 - an object whose str() fails is still only a bad value
        text = f"<{type(value).__name__}>"
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _using(settings: PiSettings, name: str) -> str:
    """The "using X" of a warning: the value a bad setting fell back to, noted when it is the default."""
    kept, default = getattr(settings, name), getattr(PiSettings(), name)
    shown = f"{kept:g}" if isinstance(kept, float) else repr(kept)
    return f"using {shown}" + (" (the default)" if kept == default else "")


TIMEOUT_RULE = "must be a number of seconds above 0 (nothing waits forever)"


def _seconds(value: Any, environ: Mapping[str, str] | None = None) -> float:
    """An approval timeout: a finite number above 0 (``ValueError`` otherwise; ``0`` once meant "never")."""
    try:
        seconds = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{_shown(value, environ)} {TIMEOUT_RULE}")
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


def price_table(value: Any) -> dict[str, tuple[float, float]]:
    """Prices from a mapping (or its JSON text) of model id → ``[input, output]`` USD per million tokens."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise ValueError(f"not valid JSON ({error})") from None
    if not isinstance(value, Mapping):
        raise ValueError('not a mapping such as {"my-model": [0.5, 1.5]}')
    table: dict[str, tuple[float, float]] = {}
    for model_id, pair in value.items():
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"the price of {model_id!s} is not [input, output]")
        table[str(model_id)] = (dollars(pair[0]), dollars(pair[1]))
    return table


def _overrides(value: Any) -> dict[str, str]:
    """Per-tool modes from a mapping or its JSON text (the error never quotes the text: it may hold anything)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise ValueError(f"not valid JSON ({error})") from None
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


def _approval(value: Any) -> str:
    mode = value.strip().lower() if isinstance(value, str) else value
    if mode not in APPROVAL_MODES:
        raise ValueError(f"{_shown(value)} is not one of {', '.join(APPROVAL_MODES)}")
    return str(mode)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    flag = _flag(value) if isinstance(value, str) else None
    if flag is None:
        raise ValueError(f"{_shown(value)} is not true or false")
    return flag


def _tool_names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(word for word in re.split(r"[\s,\[\]'\"]+", value) if word)
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{_shown(value)} is not a list of tool names")
    return tuple(value)


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


SETTINGS: tuple[Setting, ...] = (
    Setting("model", _name, "Model id, 'provider:model' allowed (else from PI_MODEL / keys).", "PI_MODEL"),
    Setting("provider", _name, "Provider when the model id alone is ambiguous.", "PI_PROVIDER"),
    Setting("base_url", lambda value: _url(_text(value)), "An OpenAI-compatible server URL.", "OPENAI_BASE_URL"),
    Setting("approval", _approval, f"Approval mode for tool calls: {' | '.join(APPROVAL_MODES)}.", "PI_APPROVAL"),
    Setting(
        "approval_overrides",
        _overrides,
        f"Per-tool approval ({' | '.join(TOOL_APPROVAL_MODES)}), a dict or JSON: {{'bash': 'ask'}}.",
    ),
    Setting(
        "approval_timeout", _seconds, "Seconds (above 0) before a pending approval is denied.", "PI_APPROVAL_TIMEOUT"
    ),
    Setting("builtin_tools", _tool_names, "Built-in tools enabled at start: a list of names, or one string of them."),
    Setting("widgets", _boolean, "Force widget views on/off (default: detect).", "PI_WIDGETS"),
    Setting("max_turns", positive_int, "Default limit of model requests per %%pi cell (a whole number above 0)."),
    Setting("system_prompt", _text, "Text added to the system prompt."),
    Setting(
        "allowed_models",
        parse_allowed_models,
        "Models %pi model may choose: ids or provider:id, wildcards allowed (default: any).",
        "PI_ALLOWED_MODELS",
    ),
    Setting(
        "tool_result_limit",
        positive_int,
        "Characters of each tool result sent to the model (a whole number above 0).",
        "PI_TOOL_RESULT_LIMIT",
    ),
    Setting(
        "context_window",
        positive_int,
        "The model's context window in tokens (else known table, server, default).",
        "PI_CONTEXT_WINDOW",
    ),
    Setting("budget", dollars, "US dollars the session may spend on model requests.", "PI_BUDGET"),
    Setting(
        "token_budget", positive_int, "Tokens (in + out) the session may spend on model requests.", "PI_TOKEN_BUDGET"
    ),
    Setting(
        "prices", price_table, "Extra prices: {'model-id': [USD per million input, per million output]}.", "PI_PRICES"
    ),
    Setting(
        "mcp_servers",
        mcp_servers,
        'MCP servers in the mcpServers shape: {"time": {"command": "uvx", "args": ["mcp-server-time"]}}.',
        "PI_MCP_CONFIG",
        env_parse=mcp_servers_file,
        merge=True,
    ),
    Setting(
        "notebook_context",
        _boolean,
        "Tell the model what changed in the notebook at each %%pi turn (default true).",
        "PI_NOTEBOOK_CONTEXT",
    ),
    Setting(
        "workspace_root",
        lambda value: _folder(_text(value)),
        "File tools refuse paths outside it.",
        "PI_WORKSPACE_ROOT",
    ),
    Setting("describe_limit", positive_int, "Characters of one inspect / cells answer (default 4000)."),
)
"""Every setting once: read from the environment (``settings_from_env``) and from ``c.PiKernel``
(``apply_config``); ``PiKernel`` makes one trait of each."""

CONFIG_NAMES = tuple(setting.name for setting in SETTINGS)
"""Settings that ``c.PiKernel.<name>`` may set."""


def _fallback(settings: PiSettings, setting: Setting) -> str:
    return "no MCP servers from that file" if setting.merge else _using(settings, setting.name)


def settings_from_env(
    environ: Mapping[str, str] | None = None, base: PiSettings | None = None, problems: list[str] | None = None
) -> PiSettings:
    """``base`` (defaults) with what the environment sets. A bad value keeps ``base``'s and is reported
    in ``problems`` (``ValueError`` when ``problems`` is ``None``)."""
    env = os.environ if environ is None else environ
    settings = replace(base) if base is not None else PiSettings()
    for setting in SETTINGS:
        text = env.get(setting.env, "").strip() if setting.env else ""
        if not text:
            continue
        try:
            value = (setting.env_parse or setting.parse)(text)
        except (OSError, ValueError) as error:
            _report(problems, f"{setting.env}: {_masked(str(error), env)}; {_fallback(settings, setting)}.")
            continue
        if setting.merge:
            value = {**getattr(settings, setting.name), **value}
        setattr(settings, setting.name, value)
        if setting.name == "base_url":
            settings.base_url_from_env = True
    return settings


def apply_config(settings: PiSettings, values: Mapping[str, Any], problems: list[str] | None = None) -> PiSettings:
    """``settings`` with every known, non-``None`` value of ``values`` applied. A bad value keeps
    ``settings``' and is reported in ``problems`` (``ValueError`` when ``problems`` is ``None``)."""
    changes: dict[str, Any] = {}
    for setting in SETTINGS:
        if values.get(setting.name) is None:
            continue
        try:
            value = setting.parse(values[setting.name])
        except Exception as error:  # noqa: BLE001 - whatever a config file holds, the kernel must start
            _report(problems, f"PiKernel.{setting.name}: {error}; {_using(settings, setting.name)}.")
            continue
        changes[setting.name] = {**getattr(settings, setting.name), **value} if setting.merge else value
    if "base_url" in changes:
        changes["base_url_from_env"] = changes["base_url_from_dotenv"] = False
    return replace(settings, **changes)


def _masked(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``pi_kernel.ai.secrets.mask`` with the keys of ``environ`` (this module's warnings quote values),
    imported on first use: this module loads at kernel start, where importing ``pi_kernel.ai`` costs time."""
    from pi_kernel.ai.secrets import mask, secret_values

    return mask(text, secret_values(environ))
