"""The notebook bridge ships prebuilt in the wheel: ``pip install`` gets a JupyterLab extension, no Node.js.

Builds the wheel from the working tree (hatchling, as ``pip install`` does)
and checks that it installs the committed build of ``widgets/notebook-bridge``
as ``share/jupyter/labextensions/pi-kernel-notebook-bridge`` with its
``install.json``, that the bundle it loads is there and speaks the protocol's
names, and that the build is not also copied into the importable package.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NAME = "pi-kernel-notebook-bridge"
SOURCE = REPO / "widgets" / "notebook-bridge"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=240,
    )
    [built] = out.glob("pi_kernel-*.whl")
    return zipfile.ZipFile(built)


def shared(wheel: zipfile.ZipFile) -> dict[str, str]:
    """The wheel's files under ``share/jupyter/labextensions/<NAME>/``, by their path below it."""
    pattern = re.compile(rf"^pi_kernel-[^/]+\.data/data/share/jupyter/labextensions/{NAME}/(.+)$")
    return {match[1]: name for name in wheel.namelist() if (match := pattern.match(name))}


def test_the_wheel_installs_the_prebuilt_extension_with_its_install_json(wheel: zipfile.ZipFile) -> None:
    files = shared(wheel)
    built = json.loads(wheel.read(files["package.json"]))
    source = json.loads((SOURCE / "package.json").read_text())
    assert (built["name"], built["version"]) == (source["name"], source["version"]) == (NAME, source["version"])
    install = json.loads(wheel.read(files["install.json"]))
    assert install["packageManager"] == "python" and install["packageName"] == "pi-kernel"
    entry = built["jupyterlab"]["_build"]["load"]
    assert entry in files, f"the bundle JupyterLab loads ({entry}) is not in the wheel"
    bundle = "".join(wheel.read(files[path]).decode() for path in files if path.endswith(".js"))
    for name in ("pi.notebook", "pi.notebook.hello", "pi-bridge-highlight", "set_outputs"):
        assert name in bundle, f"the shipped bundle does not mention {name!r}: rebuild it (make labextension)"


def test_the_build_is_not_also_in_the_importable_package(wheel: zipfile.ZipFile) -> None:
    assert not [name for name in wheel.namelist() if name.startswith("pi_kernel/labextension")]


def test_the_shared_packages_accept_every_jupyterlab_4_from_4_2(wheel: zipfile.ZipFile) -> None:
    built = json.loads(wheel.read(shared(wheel)["package.json"]))
    required = {name: spec["requiredVersion"] for name, spec in built["jupyterlab"]["sharedPackages"].items()}
    assert required["@jupyterlab/notebook"] == "^4.2.0" and required["@jupyterlab/services"] == "^7.2.0"
