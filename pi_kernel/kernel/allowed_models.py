"""``allowed_models``: the models a site lets ``%pi model`` and ``%%pi --model`` choose.

Set by an administrator (``c.PiKernel.allowed_models`` in a site-wide kernel
config, or ``PI_ALLOWED_MODELS`` in the spawner's environment; see
docs/jupyterhub.md). Unset or empty: every model is allowed.

Each entry is a model id (``gpt-4o-mini``: that id from any provider or
server) or ``provider:id`` (``deepseek:deepseek-chat``, ``ollama:qwen3:8b``),
and may hold shell-style wildcards (``gpt-4o*``, ``ollama:*``). An entry
holding ``:`` is compared, case-sensitively, with ``provider:id`` only (so
``deepseek:*`` never allows ``openrouter:deepseek:r1``); an entry without one
with the model's ``id``, so ``gpt-4o-mini`` also allows it behind an
OpenAI-compatible base URL (where the provider is ``openai-compatible``). An
id that holds ``:`` itself is named with its provider (``ollama:qwen3:8b``,
or ``*:qwen3:8b`` for any provider).

This module owns the rule only; it imports nothing of the session, so
``config`` can use it at kernel start.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from typing import Any, Protocol, TypeVar


class NamedModel(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def provider(self) -> str: ...


M = TypeVar("M", bound=NamedModel)


def parse_allowed_models(value: Any) -> tuple[str, ...]:
    """A list of entries from a config value: a list of strings, a JSON list, or one string of entries
    separated by commas or white space. ``ValueError`` saying what is wrong otherwise."""
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
    """The session's default model under ``allowed``, and a notice when it had to change.

    A default that is not allowed (``PI_MODEL`` or a key found in the
    environment, say) gives way to the first allowed entry that names one
    model; with none, there is no default model.
    """
    if model is None or is_allowed(model, allowed):
        return model, None
    concrete = concrete_entries(allowed)
    fallback = resolve(concrete[0]) if concrete else None
    if fallback is not None and not is_allowed(fallback, allowed):
        fallback = None
    instead = f"using {fallback.provider}:{fallback.id}" if fallback else "no model is set (choose one with %pi model)"
    return fallback, f"{refusal(model, allowed)}; {instead}."
