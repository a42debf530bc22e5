"""The ``pi`` kernelspec: where its files live and how to install it.

The wheel ships ``resources/`` as ``share/jupyter/kernels/pi``, so ``pip install`` alone registers the
kernel, with a bare ``python`` that jupyter_client replaces by its own ``sys.executable``. ``install``
writes the running interpreter's path instead, so a Jupyter installed elsewhere still starts this one.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pi_kernel.tools.files import make_dirs, write_file_atomic, write_text_atomic

KERNEL_NAME = "pi"
RESOURCES = Path(__file__).with_name("resources")


def kernel_spec_dict(executable: str | None = None, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """The ``kernel.json`` content, with ``argv[0]`` = ``executable`` (default: the shipped ``python``)."""
    spec: dict[str, Any] = json.loads((RESOURCES / "kernel.json").read_text())
    if executable:
        spec["argv"] = [executable, *spec["argv"][1:]]
    if env:
        spec["env"] = dict(env)
    return spec


def write_kernel_spec(directory: Path, executable: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Write ``kernel.json`` and the logos into ``directory``."""
    make_dirs(directory)
    for logo in RESOURCES.glob("logo-*"):
        write_file_atomic(directory / logo.name, logo.read_bytes())
    write_text_atomic(directory / "kernel.json", json.dumps(kernel_spec_dict(executable, env), indent=2) + "\n")
    return directory


def install(
    user: bool = False,
    prefix: str | None = None,
    kernel_name: str = KERNEL_NAME,
    executable: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Install the kernelspec (``user``: per-user; ``prefix``: ``PREFIX/share/jupyter/kernels``);
    returns the installed directory."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as staging:
        source = write_kernel_spec(Path(staging) / kernel_name, executable or sys.executable, env)
        return KernelSpecManager().install_kernel_spec(str(source), kernel_name, user=user, prefix=prefix)
