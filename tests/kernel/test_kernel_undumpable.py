"""The Pi kernel runs non-dumpable (Linux): a non-root command it starts cannot read its /proc environ or memory.

Run as root (CI) the files stay readable (root passes the check), so the test asserts the flag the
kernel set on itself (``PR_GET_DUMPABLE`` is 0) and that a child ``exec``s as an ordinary, dumpable
process (the bash tool's commands still work).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from kernel_helpers import KernelDriver, kernel_env

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")]


@pytest.fixture(scope="module")
def kernel(pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env("http://127.0.0.1:9/v1"), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def test_the_kernel_process_is_not_dumpable(kernel: KernelDriver) -> None:
    result = kernel.run("import ctypes\nprint('dumpable', ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")
    assert result.status == "ok", result.text
    assert "dumpable 0" in result.text
    child = kernel.run(
        "import subprocess, sys\n"
        "print(subprocess.run([sys.executable, '-c', 'import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))'],"
        " capture_output=True, text=True).stdout)"
    )
    assert child.text.strip() == "1"
