"""Shared pytest fixtures. One section per concern; keep each fixture small and documented."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
# The working tree's ``pi_kernel`` (the repo is not pip-installed), also under the bare
# ``pytest`` script, which unlike ``python -m pytest`` does not put the cwd on sys.path.
if os.path.dirname(_TESTS) not in sys.path:
    sys.path.insert(0, os.path.dirname(_TESTS))
# Test helpers (fake_openai, ...) live next to the tests and import as top-level modules.
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from fake_openai import FakeOpenAI  # noqa: E402 - needs the path above

# --------------------------------------------------------------------------- fake OpenAI server


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started scripted OpenAI-compatible server on 127.0.0.1 (see tests/fake_openai.py).

    ``fake_openai.enqueue(...)`` / ``.responder = fn`` script it, ``.base_url``
    goes into a ``Model``, ``.bodies`` / ``.requests`` show what was sent.
    """
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- Pi kernel (kernel engineer's section)


@pytest.fixture(scope="session")
def pi_jupyter_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ``JUPYTER_PATH`` entry holding the ``pi`` kernelspec for this interpreter and working tree."""
    from kernel_helpers import write_test_kernelspecs

    return str(write_test_kernelspecs(tmp_path_factory.mktemp("jupyter")))
