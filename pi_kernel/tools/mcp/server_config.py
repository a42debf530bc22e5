"""MCP server configuration: the ecosystem's ``mcpServers`` shape, checked.

One entry per server name, as Claude Desktop, VS Code and Gemini CLI write it::

    {"mcpServers": {
        "time": {"command": "python", "args": ["-m", "mcp_server_time"], "env": {"TZ": "UTC"}},
        "docs": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ..."}}
    }}

``command`` (+ ``args``, ``env``, ``cwd``) starts a stdio server; ``url`` (+ ``headers``) connects to a
streamable HTTP server. pi-kernel reads three more optional keys: ``timeout`` (milliseconds for one
request, as in Gemini CLI; default 10 minutes), ``startTimeout`` (milliseconds to start and list the tools;
default 30 s) and ``trustReadOnlyHint`` (``true``: the server's ``readOnlyHint`` annotations are believed,
see ``adapt.py``). Unknown keys (``type``, ``disabled``, ...) are ignored, so a file written for another
client works. This module does not import the ``mcp`` SDK: configuration is checked before any server starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pi_kernel.ai.secret_variables import url_password
from pi_kernel.tools.paths import MASK, add_secret_value, is_secret_name

DEFAULT_TIMEOUT_MS = 600_000
DEFAULT_START_TIMEOUT_MS = 30_000
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
"""A server name becomes the first part of tool names, which providers restrict to ``[A-Za-z0-9_-]``."""
MAX_SERVER_NAME = 40
"""Longer names would leave too little of a 64-character tool name: a name cut before its ``__`` would
escape the per-server rules (``<server>__*=deny``)."""


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    command: str | None = None
    """stdio: the executable (looked up on ``PATH``)."""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    """stdio: extra environment, over the kernel's own."""
    cwd: str | None = None
    url: str | None = None
    """streamable HTTP: the server's endpoint."""
    headers: dict[str, str] = field(default_factory=dict)
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    start_timeout_ms: int = DEFAULT_START_TIMEOUT_MS
    trust_read_only_hint: bool = False

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    @property
    def call_timeout(self) -> float:
        return self.timeout_ms / 1000

    @property
    def start_timeout(self) -> float:
        return self.start_timeout_ms / 1000

    def describe(self) -> str:
        """How the server is reached, for ``%pi mcp``: never the values of ``env`` or ``headers``, nor a
        secret in the arguments or the URL (``argument_secrets``: ``***``). The environment's keys are
        masked where ``%pi mcp`` prints it (``outgoing``)."""
        if self.command:
            return _masked_text(" ".join([self.command, *self.args]), argument_secrets(self.args))
        return _masked_text(str(self.url), argument_secrets([str(self.url)]))


_TOKEN_SHAPES = re.compile(
    r"^(?:gh[pousr]_|github_pat_|glpat-|xox[abprs]-|sk-|sk_live_|rk_live_|AKIA|ASIA|hf_|npm_|pypi-|AIza|ya29\.|eyJ)"
    r"[\w.-]{8,}$"
)
"""Values shaped like a well-known kind of token (GitHub, GitLab, Slack, OpenAI, Stripe, AWS, Hugging Face, npm,
PyPI, Google, a JWT), whatever option carries them."""
_SECRET_OPTIONS = frozenset({"auth", "p", "pass", "pw", "password", "passwd", "token", "secret", "key", "apikey"})
"""Short option names that take a password or token (``-p X``, ``--auth X``), besides ``is_secret_name``'s."""
_SCHEME_VALUE = re.compile(r"(?i)\b(?:bearer|token|basic)\s+([^\s\"',;]+)")
_HEADER = re.compile(r"^\s*([A-Za-z][\w-]*)\s*:\s*(\S.*?)\s*$")
_PAIR = re.compile(r"^-{0,2}([A-Za-z_][\w.-]*)[=:](\S+)$")
"""``NAME=VALUE`` (``env TOKEN=X``, ``-e API_KEY=X``), ``--name=VALUE``, ``--name:VALUE``."""
_QUERY = re.compile(r"[?&;]([^=&#\s/?]+)=([^&#\s\"']+)")
_PORTISH = re.compile(r"^\d[\d:.]*(?:/(?:tcp|udp|sctp))?$")
"""``-p 8080:80``, ``-p 5432/tcp``: a port, not a password."""


def _secret_option(name: str) -> bool:
    name = name.replace("-", "_")
    return name.lower() in _SECRET_OPTIONS or is_secret_name(name) or name.lower() == "authorization"


def _word_secrets(word: str) -> list[str]:
    """The secret values inside one word or argument (see ``argument_secrets``)."""
    found: list[str] = []
    if _TOKEN_SHAPES.match(word):
        found.append(word)
    found += _SCHEME_VALUE.findall(word)
    header = _HEADER.match(word)
    if header is not None and " " in word and _secret_option(header.group(1)):
        found.append(header.group(2))
    pair = _PAIR.match(word)
    if pair is not None and _secret_option(pair.group(1)):
        found.append(pair.group(2))
    found += [value for name, value in _QUERY.findall(word) if _secret_option(name)]
    password = url_password(word)
    return [*found, password] if password else found


def argument_secrets(args: tuple[str, ...] | list[str]) -> list[str]:
    """The secret values in a command line's arguments (or a URL), longest first: a token-shaped value, the
    value of ``NAME=VALUE`` / ``--name=VALUE`` / ``--name:VALUE`` with a secret name (``env GITHUB_TOKEN=X``,
    ``-e API_KEY=X``), the word after such an option (``--token X``, ``-p X``, ``--auth X``, ``--password -X``),
    an ``Authorization: Bearer X`` header, a URL query value with a secret name (``?api_key=X``), a URL's
    password (``https://user:X@host``); also inside
    an argument a shell runs (``sh -c "TOKEN=X exec srv"``)."""
    found: list[str] = []
    words: list[str] = []
    for argument in args:
        found += _word_secrets(argument)
        pieces = [piece.strip("\"'") for piece in argument.split()]
        words += pieces or [argument]
        if len(pieces) > 1:
            found += [value for piece in pieces for value in _word_secrets(piece)]
    for index, word in enumerate(words[:-1]):
        if not word.startswith("-") or "=" in word or ":" in word:
            continue
        name, value = word.lstrip("-"), words[index + 1]
        if not _secret_option(name) or value.startswith("--") or not value:
            continue
        if name == "p" and _PORTISH.match(value):
            continue
        found.append(value)
    values = {value.strip("\"'") for value in found}
    return sorted((value for value in values if value and value != MASK), key=len, reverse=True)


def _masked_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = re.sub(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", MASK, text)
    return text


def secret_arguments(args: tuple[str, ...] | list[str]) -> set[int]:
    """The indexes of the arguments that are secrets as a whole (``argument_secrets``)."""
    secrets = set(argument_secrets(args))
    return {index for index, argument in enumerate(args) if argument in secrets}


def _remember_secrets(config: McpServerConfig) -> None:
    """Mask a server's secrets wherever they show later (its stderr, an error quoting its command line)."""
    values = argument_secrets(config.args) + argument_secrets([config.url or ""])
    values += [value for name, value in config.env.items() if is_secret_name(name)]
    values += [value for name, value in config.headers.items() if _secret_option(name)]
    for value in values:
        add_secret_value(value)
        if value.lower().startswith(("bearer ", "token ", "basic ")):
            add_secret_value(value.split(" ", 1)[1])


def _strings(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{what} must be an object of strings")
    return {key: str(item) for key, item in value.items()}


def _milliseconds(name: str, entry: Mapping[str, Any], key: str, default: int) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f'server {name!r}: "{key}" must be a number of milliseconds above 0')
    return int(value)


def server_config(name: str, entry: Any) -> McpServerConfig:
    """One ``mcpServers`` entry, checked; ``ValueError`` saying what is wrong (never quoting values)."""
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise ValueError(f"server name {name!r} must use only letters, digits, '_' and '-'")
    if len(name) > MAX_SERVER_NAME:
        raise ValueError(f"server name {name[:MAX_SERVER_NAME]}... is longer than {MAX_SERVER_NAME} characters")
    if "__" in name or name.startswith("_") or name.endswith("_"):
        raise ValueError(
            f"server name {name!r} must not contain '__' nor start or end with '_' (the '__' of "
            "<server>__<tool> separates server and tool names)"
        )
    if not isinstance(entry, Mapping):
        raise ValueError(f'server {name!r}: expected an object with "command" or "url"')
    command, url = entry.get("command"), entry.get("url") or entry.get("httpUrl")
    if bool(command) == bool(url):
        raise ValueError(f'server {name!r}: give either "command" (stdio) or "url" (streamable HTTP)')
    if command is not None and not isinstance(command, str):
        raise ValueError(f'server {name!r}: "command" must be a string')
    if url is not None and not (isinstance(url, str) and re.match(r"(?i)^https?://\S+$", url)):
        raise ValueError(f'server {name!r}: "url" must be an http:// or https:// URL')
    args = entry.get("args", [])
    if not isinstance(args, (list, tuple)) or not all(isinstance(arg, (str, int, float)) for arg in args):
        raise ValueError(f'server {name!r}: "args" must be a list of strings')
    timeout = _milliseconds(name, entry, "timeout", DEFAULT_TIMEOUT_MS)
    start_timeout = _milliseconds(name, entry, "startTimeout", DEFAULT_START_TIMEOUT_MS)
    trust = entry.get("trustReadOnlyHint", False)
    if not isinstance(trust, bool):
        raise ValueError(f'server {name!r}: "trustReadOnlyHint" must be true or false')
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError(f'server {name!r}: "cwd" must be a string')
    config = McpServerConfig(
        name=name,
        command=command,
        args=tuple(str(arg) for arg in args),
        env=_strings(entry.get("env"), f'server {name!r}: "env"'),
        cwd=cwd,
        url=url,
        headers=_strings(entry.get("headers"), f'server {name!r}: "headers"'),
        timeout_ms=timeout,
        start_timeout_ms=start_timeout,
        trust_read_only_hint=trust,
    )
    _remember_secrets(config)
    return config


def parse_servers(mapping: Mapping[str, Any], problems: list[str] | None = None) -> dict[str, McpServerConfig]:
    """Every valid entry of ``mapping``; each bad one is left out and described in ``problems``
    (``ValueError`` at the first when ``problems`` is ``None``)."""
    servers: dict[str, McpServerConfig] = {}
    for name, entry in mapping.items():
        try:
            servers[name] = server_config(name, entry)
        except ValueError as error:
            if problems is None:
                raise
            problems.append(f"MCP: {error}; that server is left out.")
    return servers
