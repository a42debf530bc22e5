"""Tokens on an MCP server's command line or URL are masked in ``describe`` (``%pi mcp``) and its stderr.

Found by an adversary: ``env GITHUB_TOKEN=X npx srv``, ``docker run -e API_KEY=X``, an
``Authorization: Bearer X`` header argument, ``-p X`` / ``--auth X``, a shell's ``TOKEN=X exec srv``,
``--password -X``, ``--token:X``, ``token=X`` and a URL's ``?api_key=X`` showed the token.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from pi_kernel.ai.secrets import mask
from pi_kernel.tools.mcp.server_config import server_config


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "env", "args": ["GITHUB_TOKEN={s}", "npx", "srv"]},
        {"command": "docker", "args": ["run", "-e", "API_KEY={s}", "img"]},
        {"command": "srv", "args": ["--header", "Authorization: Bearer {s}"]},
        {"command": "mysql-mcp", "args": ["-p", "{s}"]},
        {"command": "srv", "args": ["--auth", "{s}"]},
        {"command": "sh", "args": ["-c", "TOKEN={s} exec srv"]},
        {"command": "srv", "args": ["--password", "-{s}"]},
        {"command": "srv", "args": ["--token:{s}"]},
        {"command": "srv", "args": ["token={s}"]},
        {"command": "srv", "args": ["--url=https://h/x?api_key={s}&page=1"]},
        {"url": "https://h.example/mcp?token={s}"},
    ],
)
def test_a_secret_on_the_command_line_is_masked(entry: dict[str, Any]) -> None:
    secret = f"s3cr3t{uuid.uuid4().hex[:12]}"  # new each case: a value masked once stays masked
    entry = json.loads(json.dumps(entry).replace("{s}", secret))
    config = server_config("srv", entry)
    shown = config.describe()
    assert secret not in shown
    assert "***" in shown
    assert secret not in mask(f"server stderr: bad credentials {secret}")  # remembered for the server's output


def test_ordinary_arguments_stay_readable() -> None:
    config = server_config("srv", {"command": "docker", "args": ["run", "-p", "8080:80", "-e", "TZ=UTC", "img"]})
    assert config.describe() == "docker run -p 8080:80 -e TZ=UTC img"
