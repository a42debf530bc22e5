"""Which variables hold secrets: the one list of secret names, values shaped like a token, credentials in a URL.

Every surface asks here (``inspect``, the notebook context, the masking of text in ``secrets``, the
environment the ``bash`` tool's processes get, the ``$NAME`` words the secret-path scan judges, ``%pi mcp``):
one rule, so that a name one surface hides is hidden by all. Masking text is ``secrets``' concept; this module
only names what is secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_URL_CREDENTIALS = re.compile(r"//[^/\s:@\"',]*:[^/\s\"',]*@")
"""``user:password@`` after ``//`` (the user may be empty, as in ``redis://:pw@host``; the password may hold
``@``: the match runs to the last one before the path). The scheme is not needed, so a split before ``//``
is no gap."""
KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
)
"""Environment variables known to hold secrets (``is_secret_name`` names every other one)."""

_SECRET_NAME = re.compile(
    r"pass(?:word|wd|phrase)?|pwd|secret|token|credentials?|api_?key|private_?key|access_?key"
    r"|(?:^|_)keys?(?:_|$)|_(?:pat|dsn)$|^dsn$"
    r"|(?:^|_)sk(?:_|$)|connection_?string|webhook|jwt|(?:^|_)(?:pem|auth)$|cookie",
    re.IGNORECASE,
)
_PUBLIC_NAME = re.compile(r"^(?:OLD)?PWD$|ASKPASS|^PI_TOKEN_BUDGET$|^PI_DOTENV_KEYS$", re.IGNORECASE)
"""Names the rule would take for secrets that hold none (the working folder, a program asking for a password,
pi's own list of the names a ``.env`` set)."""
_PATH_NAME = re.compile(r"_(?:FILE|PATH|DIR|SOCK)$", re.IGNORECASE)
"""Names of a path (``SSL_KEY_FILE``, ``SECRETS_DIR``): public by name; their value is still judged by its shape."""
_TOKEN_VALUE = re.compile(
    r"(?:^|[\s;,:=\"'])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-[\w-]{16,}|[sr]k_live_\w{10,}"
    r"|xox[abpr]-[\w-]{10,}|AKIA[0-9A-Z]{16}|eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.)"
    r"|AccountKey=|SharedAccessKey=|-----BEGIN [A-Z ]*PRIVATE KEY"
)
"""Values shaped like a secret whatever their variable's name: GitHub, OpenAI, Stripe, Slack and AWS keys,
a JWT, an Azure connection string's key, a PEM private key."""


def is_secret_name(name: str) -> bool:
    """Whether a variable (environment or notebook; the last part of a dotted path) is named like a secret.

    The one list of secret names every surface uses: ``*_API_KEY``, ``*_TOKEN``, ``*SECRET*``
    (``AWS_SECRET_ACCESS_KEY``),
    ``*PASSWORD*`` / ``*PASSWD*`` / ``*PWD`` (``DB_PASSWORD``), ``*_PAT``, ``*_DSN``, ``*ACCESS_KEY*``,
    ``*CREDENTIAL*``, ``*PRIVATE_KEY*``, a ``KEY`` or ``SK`` word (``STRIPE_SK``), ``*CONNECTION_STRING*``,
    ``*WEBHOOK*``, ``*JWT*``, ``*_PEM``, ``*_AUTH``, ``*COOKIE*``; not ``PWD``, ``OLDPWD``, ``*ASKPASS*`` nor names of a
    path (``*_FILE``, ``*_PATH``, ``*_DIR``, ``*_SOCK``).
    """
    last = name.rsplit(".", 1)[-1]
    return last in KEY_VARIABLES or (
        _SECRET_NAME.search(last) is not None and _PUBLIC_NAME.search(last) is None and not _PATH_NAME.search(last)
    )


def url_password(value: str) -> str | None:
    """The password of the first ``scheme://user:password@`` in ``value`` (credentials in a URL), or ``None``."""
    match = _URL_CREDENTIALS.search(value)
    if match is None:
        return None
    return match.group(0)[2:-1].split(":", 1)[1] or None


def is_secret_variable(name: str, value: str) -> bool:
    """Whether an environment variable holds a secret: named like one, a value shaped like a token
    (``_TOKEN_VALUE``: also under a name of a path, ``SECRETS_DIR=ghp_...``), or a URL with credentials."""
    return is_secret_name(name) or url_password(value) is not None or _TOKEN_VALUE.search(value) is not None


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` less every variable holding a secret (``is_secret_variable``): for processes tools start."""
    return {name: value for name, value in environ.items() if not is_secret_variable(name, value)}
