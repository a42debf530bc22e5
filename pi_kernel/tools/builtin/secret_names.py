"""Secrets in the notebook's variables: what ``inspect`` and the notebook context never preview.

A notebook keeps a secret out of its cell sources with ``getpass()`` or by
reading it from the environment; the value then lives in a variable such as
``db_password`` or ``aws_secret_access_key``. Whether a name looks like a
secret is ``pi_kernel.ai.secrets.is_secret_name``, the one list of secret
names every surface uses (environment variables too): a string value held
under such a name is never previewed. ``environment_secrets`` is the values
``mask`` hides (``secret_values``), and ``tool_environment`` the environment
of the processes tools start, without the secret variables.

It is also the tools' one door to masking keys: ``masked`` for text a tool cuts
to a length before its result enters the transcript (masked first: a key cut
in two would no longer be found by the agent's mask of the result; ``clip`` in
``describe`` does it), ``MaskedStream`` for text written in blocks, and
``add_secret_value`` / ``MASK`` for an MCP server's own secrets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from pi_kernel.ai.secrets import (
    MASK,
    MaskedStream,
    add_secret_value,
    is_secret_name,
    mask,
    secret_values,
    without_secrets,
)

HIDDEN_VALUE = "<hidden: the name looks like a secret>"


def is_secret_value(name: str, value: Any) -> bool:
    """A string (or bytes) held under a secret-like name: shown by type and length only."""
    return issubclass(type(value), (str, bytes, bytearray)) and is_secret_name(name)  # type(): no user code


def environment_secrets() -> list[str]:
    """Values of environment variables holding secrets (``secret_values``); longest first."""
    return secret_values()


def tool_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment less every secret variable, plus ``extra`` (a tool's own settings, kept)."""
    return {**without_secrets(os.environ), **(extra or {})}


def masked(value: Any, secrets: Sequence[str] | None = None) -> Any:
    """``value`` (text or JSON-like data) with keys masked (``secrets``: their values if already read, for
    many calls)."""
    return mask(value, secrets)


__all__ = [
    "HIDDEN_VALUE",
    "MASK",
    "MaskedStream",
    "add_secret_value",
    "environment_secrets",
    "is_secret_name",
    "is_secret_value",
    "masked",
    "tool_environment",
]
