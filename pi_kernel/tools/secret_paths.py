"""Files that hold keys: a tool call touching one asks a person (or is refused) whatever the mode.

Reading the kernel's own environment (``/proc/self/environ``, any
``/proc/<pid>/environ``), a ``.env`` file, cloud and tool credentials
(``~/.aws/credentials``, ``~/.netrc``, ``~/.git-credentials``, ``~/.pypirc``,
``~/.docker/config.json``, ``~/.kube/config``, ...), SSH and TLS private keys
(``id_rsa``, ``*.pem``, ``*.key``) or a Jupyter connection file (its HMAC key
lets anyone run code in the kernel) sends secrets to the model. Such a call
never runs unseen: ``approval_policy`` turns it into a question in ``ask``,
``auto`` and ``read-only`` mode, and a refusal in ``deny`` mode.

``secret_path_reason`` judges a path (the file tools' ``path``; symlinks
followed); ``secret_mention_reason`` scans a command or code text (``bash``,
``python``) for the same names, plus commands that print the whole
environment or name a key variable (``env``, ``printenv``, ``os.environ``,
``$OPENAI_API_KEY``): a shell can reach a file
in ways no scan sees, so this is a tripwire for the plain cases, while the
masking of key values in every tool result (``agent.tool_execution``) is the
net under it.
"""

from __future__ import annotations

import os
import re

from pi_kernel.tools.paths import resolve_to_cwd

_ENVIRON = re.compile(r"^/proc/(?:self|thread-self|\d+)(?:/task/(?:self|\d+))?/environ$")
_SECRET_NAMES = frozenset(
    {".env", ".netrc", "_netrc", ".pgpass", ".git-credentials", ".pypirc", ".npmrc", ".my.cnf", ".boto", ".s3cfg"}
)
_KEY_FILES = re.compile(r"^(?:id_(?:rsa|dsa|ecdsa|ed25519)(?:_sk)?|.+\.(?:pem|key|p12|pfx|jks|keystore))$")
_SECRET_DIRS = (
    (".aws",),
    (".ssh",),
    (".gnupg",),
    (".config", "gcloud"),
    (".azure",),
    (".kube",),
    (".docker",),
    ("jupyter", "runtime"),
    ("Jupyter", "runtime"),
)
"""Folders whose files hold credentials (public SSH keys and ``known_hosts`` excepted)."""
_PUBLIC = re.compile(r"(?:\.pub|^known_hosts(?:\.old)?|^authorized_keys|^config)$")


def _name_reason(real: str) -> str | None:
    """Why the file at the resolved path ``real`` holds secrets, or ``None``."""
    if _ENVIRON.match(real):
        return "it is a process's environment, which holds the API keys"
    name = os.path.basename(real)
    if name in _SECRET_NAMES or name.startswith(".env."):
        return f"{name} files hold keys and passwords"
    parts = real.split(os.sep)
    for folder in _SECRET_DIRS:
        for index in range(len(parts) - len(folder)):
            if tuple(parts[index : index + len(folder)]) == folder:
                if folder == (".ssh",) and _PUBLIC.search(name):
                    return None
                return f"files under {os.sep.join(folder)} hold credentials"
    if _KEY_FILES.match(name):
        return f"{name} looks like a private key"
    return None


def secret_path_reason(path: str, cwd: str | None = None) -> str | None:
    """Why ``path`` (as a tool got it, relative to ``cwd``) names a file holding secrets, or ``None``."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    absolute = resolve_to_cwd(path, cwd or os.getcwd())
    for candidate in dict.fromkeys((absolute, os.path.realpath(absolute))):
        reason = _name_reason(candidate)
        if reason is not None:
            return reason
    return None


_ENV_DUMP = re.compile(
    r"(?:^|[\s;&|(`'\"\[,])(?:env(?=\s*(?:$|[;&|)`>'\"\],]))|printenv\b|export\s+-p\b|declare\s+-[a-z]*[xp])"
    r"|\benviron\b|\bgetenv\b|[A-Za-z0-9]_(?:API_KEY|TOKEN)\b"
)
"""Printing the whole environment (a bare ``env``, ``printenv``, ``export -p``), reading it from code
(``os.environ``, ``getenv``), or naming a key variable (``$OPENAI_API_KEY``)."""
_PATHISH = re.compile(r"""[^\s'"`;|&<>()=,]+""")


def secret_mention_reason(text: str) -> str | None:
    """Why a command or code text (``bash``, ``python``) may read secrets, or ``None`` (see the module doc)."""
    if not isinstance(text, str):
        return None
    for word in _PATHISH.findall(text):
        if "/" in word or word.startswith(".") or _KEY_FILES.match(word):
            reason = _name_reason(os.path.normpath(os.path.expanduser(word)))
            if reason is None and "environ" in word and "/proc/" in word:
                reason = "it is a process's environment, which holds the API keys"
            if reason is not None:
                return f"it names {word}: {reason}"
    if _ENV_DUMP.search(text):
        return "it may read the environment, which holds the API keys"
    return None


__all__ = ["secret_mention_reason", "secret_path_reason"]
