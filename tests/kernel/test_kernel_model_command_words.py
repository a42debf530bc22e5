"""``%pi model`` takes one model name: extra words are a usage error and the model stays as it was.

Found by an adversary: ``%pi model fake-model extra words`` chose a model named "fake-model extra words".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


def test_extra_words_after_the_model_name_are_refused(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as kernel:
        before = kernel.run("%pi model").text
        refused = kernel.run("%pi model fake-model extra words")
        assert refused.status == "error", refused.text
        assert "extra words" in refused.text
        assert kernel.run("%pi model").text == before
        assert "fake-model" in kernel.run("%pi model fake-model").text
