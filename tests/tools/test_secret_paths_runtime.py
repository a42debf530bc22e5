"""Jupyter's connection and server files ask to be read wherever they are.

Their keys let anyone run code in the kernel (a connection file's HMAC key) or use the server (a
``jpserver-*.json`` token). They were recognised only under a ``jupyter/runtime`` folder path: with
``JUPYTER_RUNTIME_DIR`` set (containers, JupyterHub, CI: often under ``/tmp``) or a connection file
passed from elsewhere (``-f /tmp/kernel-x.json``) they were read without asking.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pi_kernel.tools.approval import ApprovalPolicy
from pi_kernel.tools.builtin import builtin_tools

BUILTINS = {d.name: d for d in builtin_tools()}


def _args(name: str, **values: str) -> Any:
    return BUILTINS[name].parameters(**values)  # type: ignore[operator]


@pytest.mark.parametrize(
    "name", ["kernel-5f0c2b1e-6a7d-4e1f-9b8a-2c3d4e5f6a7b.json", "jpserver-4242.json", "other.json"]
)
def test_a_file_in_a_custom_runtime_dir_asks(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / name).write_text('{"key": "a3f1c0de-hmac", "token": "t"}')
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    policy = ApprovalPolicy(mode="auto")
    assert policy.decide(BUILTINS["read"], _args("read", path=str(runtime / name))) == "ask"
    assert policy.decide(BUILTINS["bash"], _args("bash", command=f"cat {runtime}/*.json")) == "ask"


@pytest.mark.parametrize(
    "name", ["kernel-1234.json", "jpserver-4242.json", "jpserver-4242-open.html", "nbserver-77.json"]
)
def test_a_connection_or_server_file_anywhere_asks(name: str, tmp_path: Path) -> None:
    (tmp_path / name).write_text("{}")
    policy = ApprovalPolicy(mode="auto")
    assert policy.decide(BUILTINS["read"], _args("read", path=str(tmp_path / name))) == "ask"
    assert policy.decide(BUILTINS["bash"], _args("bash", command=f"cat {tmp_path}/{name}")) == "ask"
    assert policy.decide(BUILTINS["bash"], _args("bash", command="cat /tmp/somewhere/kernel-*.json")) == "ask"


def test_an_ordinary_json_file_elsewhere_still_reads_unasked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rt"))
    (tmp_path / "data.json").write_text("{}")
    policy = ApprovalPolicy(mode="auto")
    assert policy.decide(BUILTINS["read"], _args("read", path=str(tmp_path / "data.json"))) == "run"
