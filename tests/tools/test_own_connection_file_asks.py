"""This kernel's own connection file asks to be read, whatever its name and however a command reaches it.

A plain ``KernelManager`` (nbclient, papermill) names it ``/tmp/tmpXXXX.json``: no name rule knows it.
A glob of its name, a ``${VAR:-default}`` path, a recursive read of its folder or a path through
``/proc/<pid>/root`` read it without a question in ``auto`` mode.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pi_kernel.tools.approval import ApprovalPolicy
from pi_kernel.tools.builtin import builtin_tools

BUILTINS = {d.name: d for d in builtin_tools()}


def _bash(command: str) -> str:
    args: Any = BUILTINS["bash"].parameters(command=command)  # type: ignore[operator]
    return ApprovalPolicy(mode="auto").decide(BUILTINS["bash"], args)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding this kernel's connection file, named as a plain KernelManager names it."""
    where = tmp_path / "dir"
    where.mkdir()
    connection = where / "tmpq3v9zk1x.json"
    connection.write_text('{"key": "a3f1c0de-hmac"}')
    monkeypatch.setattr(sys, "argv", [sys.argv[0], "-f", str(connection)])
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.chdir(tmp_path)
    return where


@pytest.mark.parametrize(
    "command",
    [
        "find {dir} -name 'tmpq*.json' -exec cat {{}} + | rev",
        "cat ../*/tmpq3v9z*.json",
        "grep -r key {dir}",
        "grep -rh key {parent}",
        "cat ${{TMPDIR:-{dir}}}/tmpq3v9zk1x.json",
        "tar czf - {dir} | base64",
        "cp -r {dir} /tmp/copy",
        "ls {dir}",
        "cat /proc/$PPID/root{dir}/tmpq3v9zk1x.json",
        "cat /proc/1/cwd/x.json",
    ],
)
def test_reaching_the_own_connection_file_asks(command: str, folder: Path) -> None:
    assert _bash(command.format(dir=folder, parent=folder.parent)) == "ask"


@pytest.mark.parametrize(
    "command", ["ls {other}", "grep -r key {other}", "cat {other}/notes.json", "find {other} -name '*.py'"]
)
def test_other_folders_still_run(command: str, folder: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.json").write_text("{}")
    assert _bash(command.format(other=other)) == "run"
