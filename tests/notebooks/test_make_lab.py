"""``make lab`` serves a git-ignored copy of the tutorials and opens the quickstart (issue 23).

A dry run (``make -n``: nothing is installed, copied or started) shows the commands; 04's files go to
a temporary folder, never into ``notebooks/`` (read from the notebook's source, not run).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_serves_the_ignored_copy_and_opens_the_quickstart(tmp_path: Path) -> None:
    dry = subprocess.run(
        ["make", "-n", "lab", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    command = dry.replace("\\\n", " ")
    lab = next(line for line in command.splitlines() if " lab " in f" {line} " and "jupyter" in line)
    assert "--LabApp.default_url=/lab/tree/01_quickstart.ipynb" in lab, lab
    assert re.search(r"--ServerApp\.root_dir=\.tutorials(\s|$)", lab), lab
    assert "--notebook-dir" not in lab  # deprecated by jupyter_server
    copy = next(line for line in command.splitlines() if "cp " in line)
    assert "notebooks/*.ipynb" in copy and '[ -e ".tutorials/' in copy, copy  # an existing copy is kept
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert ".tutorials/" in ignored or ".tutorials" in ignored


def test_04_writes_its_files_into_a_temporary_folder_only() -> None:
    nb = nbformat.read(ROOT / "notebooks" / "04_parallel_and_files.ipynb", as_version=4)
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    assert re.search(r"tempfile\.TemporaryDirectory\(", code) and "SCRATCH = Path(scratch)" in code
    targets = re.findall(r"three_appends\(\w+, ([^\n]*)\)\)", code)
    assert targets and all(target.startswith("str(SCRATCH / ") for target in targets), targets
    assert "mkdtemp" not in code  # a folder nobody removes
    writes = re.findall(r"(?:open|write_text|write_bytes)\(", code)
    assert all("Path(path)" in line for line in code.splitlines() if re.search(r"write_text|write_bytes", line))
    assert "open(" not in writes
