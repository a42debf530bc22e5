"""``%pi mcp`` in the real kernel shows no token of a server's command line or URL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

TOKEN = "ghx7Qm2Rk9TzW4pL"
KEY = "sk7Hd93kLq0ZpVx2"


def test_pi_mcp_lists_servers_without_their_tokens(tmp_path: Path, pi_jupyter_path: str) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        "gh": {"command": "env", "args": [f"GITHUB_TOKEN={TOKEN}", "npx", "srv"]},
        "box": {"command": "docker", "args": ["run", "-e", f"API_KEY={KEY}", "img"]},
        "web": {"url": f"http://127.0.0.1:9/mcp?token={TOKEN}"},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    env = kernel_env("http://127.0.0.1:9/v1", PI_MCP_CONFIG=str(config))
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as kernel:
        listing = kernel.run("%pi mcp").text
    assert "gh" in listing and "box" in listing and "web" in listing, listing
    assert "GITHUB_TOKEN=***" in listing, listing
    assert TOKEN not in listing and KEY not in listing, listing
