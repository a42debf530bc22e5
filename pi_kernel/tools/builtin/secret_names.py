"""Secrets in the notebook's variables: what ``inspect`` and the notebook context never preview.

A notebook keeps a secret out of its cell sources with ``getpass()`` or by
reading it from the environment; the value then lives in a variable such as
``db_password`` or ``aws_secret_access_key``. ``is_secret_name`` says whether a
variable's name looks like one (password, passwd, secret, token, key,
credential, ...): its string value is never previewed. ``environment_secrets``
adds to the values ``pi_kernel.ai.secrets.mask`` knows (``*_API_KEY`` /
``*_TOKEN``) the value of every environment variable whose name looks like a
secret (``AWS_SECRET_ACCESS_KEY``, ``DATABASE_PASSWORD``): what a preview of the
notebook is masked with (``masked(text)``).

It is also the tools' one door to masking keys: ``masked`` for text a tool cuts
to a length before its result enters the transcript (masked first: a key cut
in two would no longer be found by the agent's mask of the result),
``MaskedStream`` for text written in blocks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from pi_kernel.ai.secrets import MIN_SECRET_CHARS, MaskedStream, mask, secret_values

_SECRET_WORDS = re.compile(
    r"pass(?:word|wd|phrase)?|pwd|secret|token|credentials?|api_?key|private_?key|(?:^|_)keys?(?:_|$)",
    re.IGNORECASE,
)
HIDDEN_VALUE = "<hidden: the name looks like a secret>"


def is_secret_name(name: str) -> bool:
    """Whether a variable (or the last part of a dotted path) is named like a secret."""
    return bool(_SECRET_WORDS.search(name.rsplit(".", 1)[-1]))


def is_secret_value(name: str, value: Any) -> bool:
    """A string (or bytes) held under a secret-like name: shown by type and length only."""
    return issubclass(type(value), (str, bytes, bytearray)) and is_secret_name(name)  # type(): no user code


def environment_secrets() -> list[str]:
    """Values of environment variables named like secrets, and the known key variables; longest first."""
    named = {value for name, value in os.environ.items() if is_secret_name(name) and len(value) >= MIN_SECRET_CHARS}
    return sorted(named | set(secret_values()), key=len, reverse=True)


def masked(value: Any, secrets: Sequence[str] | None = None) -> Any:
    """``value`` (text or JSON-like data) with keys masked: ``secrets`` if given (the values read once for
    many calls), else the environment's secrets (``environment_secrets``)."""
    return mask(value, environment_secrets() if secrets is None else secrets)


__all__ = ["HIDDEN_VALUE", "MaskedStream", "environment_secrets", "is_secret_name", "is_secret_value", "masked"]
