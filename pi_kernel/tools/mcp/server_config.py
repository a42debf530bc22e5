"""MCP server configuration: the ecosystem's ``mcpServers`` shape, checked.

One entry per server name, as Claude Desktop, VS Code and Gemini CLI write it::

    {"mcpServers": {
        "time": {"command": "python", "args": ["-m", "mcp_server_time"], "env": {"TZ": "UTC"}},
        "docs": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ..."}}
    }}

``command`` (+ ``args``, ``env``, ``cwd``) starts a stdio server; ``url`` (+
``headers``) connects to a streamable HTTP server. pi-kernel reads two more
optional keys: ``timeout`` (milliseconds for one request, as in Gemini CLI;
default 10 minutes), ``startTimeout`` (milliseconds to start and list the
tools; default 30 s) and ``trustReadOnlyHint`` (``true``: the server's ``readOnlyHint``
annotations are believed, see ``adapt.py``). Unknown keys (``type``,
``disabled``, ...) are ignored, so a file written for another client works.

This module does not import the ``mcp`` SDK: configuration is checked before
any server starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pi_kernel.tools.builtin.secret_names import MASK, add_secret_value, is_secret_name, masked

DEFAULT_TIMEOUT_MS = 600_000
DEFAULT_START_TIMEOUT_MS = 30_000
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_SERVER_NAME = 40
"""Longer names would leave too little of a 64-character tool name: a name cut before its ``__`` would
escape the per-server rules (``<server>__*=deny``)."""
"""A server name becomes the first part of tool names, which providers restrict to ``[A-Za-z0-9_-]``."""


@dataclass(frozen=True)
class McpServerConfig:
    """One configured MCP server."""

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
        """How the server is reached, for ``%pi mcp``: never the values of ``env`` or ``headers``, and
        masked (``secret_names.masked``: credentials in a URL, keys, the environment's secrets; a secret in
        the arguments: ``secret_arguments``)."""
        if self.command:
            hidden = secret_arguments(self.args)
            shown = [MASK if index in hidden else _option_masked(arg) for index, arg in enumerate(self.args)]
            return str(masked(" ".join([self.command, *shown])))
        return str(masked(str(self.url)))


_TOKEN_SHAPES = re.compile(
    r"^(?:gh[pousr]_|github_pat_|glpat-|xox[abprs]-|sk-|AKIA|ASIA|hf_|npm_|pypi-|AIza|ya29\.|eyJ)[\w.-]{8,}$"
)
"""Values shaped like a well-known kind of token (GitHub, GitLab, Slack, OpenAI, AWS, Hugging Face, npm, PyPI,
Google, a JWT), whatever option carries them."""


def _option_name(argument: str) -> str:
    return argument.lstrip("-").split("=", 1)[0].replace("-", "_")


def _option_masked(argument: str) -> str:
    """``--password=hunter2`` as ``--password=***``; other arguments as they are."""
    if argument.startswith("-") and "=" in argument and is_secret_name(_option_name(argument)):
        return argument.split("=", 1)[0] + "=" + MASK
    return MASK if _TOKEN_SHAPES.match(argument) else argument


def secret_arguments(args: tuple[str, ...] | list[str]) -> set[int]:
    """The indexes of the arguments that are secrets: the value after an option named like a secret
    (``--token ghp_...``, ``-p``-less ``--api-key KEY``), a value shaped like a token."""
    hidden: set[int] = set()
    for index, argument in enumerate(args):
        if _TOKEN_SHAPES.match(argument):
            hidden.add(index)
        elif argument.startswith("-") and "=" not in argument and is_secret_name(_option_name(argument)):
            if index + 1 < len(args) and not args[index + 1].startswith("-"):
                hidden.add(index + 1)
    return hidden


def _remember_secrets(config: McpServerConfig) -> None:
    """Mask a server's secrets wherever they show later (its stderr, an error quoting its command line)."""
    values = [config.args[index] for index in secret_arguments(config.args)]
    values += [arg.split("=", 1)[1] for arg in config.args if _option_masked(arg).endswith("=" + MASK)]
    values += [value for name, value in config.env.items() if is_secret_name(name)]
    values += [value for name, value in config.headers.items() if name.lower() in ("authorization", "x-api-key")]
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
