"""Masking key values in text that leaves the process: the last line of defence against a leaked key.

Keys are never copied into settings or messages, but text from elsewhere can
still quote one (a provider error echoing the request, a tool printing the
environment). ``redact`` replaces the value of every key-like environment
variable with ``***``. It lives in the bottom layer so that every layer above
(the kernel's text and files, the widgets' static output) masks the same way
without importing the kernel.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

KEY_VARIABLES = ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY")
"""Environment variables known to hold secrets (``redact`` also masks every ``*_API_KEY`` and ``*_TOKEN``)."""
MIN_SECRET_CHARS = 8
"""Shorter values are not masked: replacing ``"1"`` everywhere would garble text and protect nothing."""


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of key variables currently set, longest first (so a key containing another is masked whole)."""
    env = os.environ if environ is None else environ
    names = {name for name in env if name.endswith("_API_KEY") or name.endswith("_TOKEN")} | set(KEY_VARIABLES)
    return sorted({env[name] for name in names if len(env.get(name, "")) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every known key value replaced by ``***``."""
    for secret in secret_values(environ):
        if secret in text:
            text = text.replace(secret, "***")
    return text


def redact_data(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """``redact`` applied to every string inside JSON-like data (a message about to be saved to a file)."""
    if isinstance(value, str):
        return redact(value, environ)
    if isinstance(value, dict):
        return {key: redact_data(item, environ) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(item, environ) for item in value]
    return value
