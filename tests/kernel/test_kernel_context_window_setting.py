"""The context window the person set (``PI_CONTEXT_WINDOW``, like ``c.PiKernel.context_window``)
holds for every model chosen later too: ``%%pi --model NAME`` and ``%pi model NAME`` fell back to the 128,000
default (the meter was wrong and compaction waited for a provider error)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks, usage_dict
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_CONTEXT_WINDOW="3000", PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


def test_a_cell_with_its_own_model_compacts_at_the_window_that_was_set(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    server.enqueue(text_chunks("ok", usage=usage_dict(2_900, 10)))  # 2,910 of the 3,000 set
    assert kernel.run("%%pi\nHello", cell_id="a").status == "ok"
    sent = len(server.bodies)
    server.enqueue(text_chunks("SUMMARY"), text_chunks("after", usage=usage_dict(300, 5)))
    result = kernel.run("%%pi --model fake-model\nGo on", cell_id="b")
    assert result.status == "ok", result.text
    assert len(server.bodies) - sent == 2, "no compaction: the cell's model has the 128,000 default window"


def test_choosing_a_model_keeps_the_window_that_was_set(kernel: KernelDriver) -> None:
    assert "/ 3,000 tokens" in kernel.run("%pi").text
    assert kernel.run("%pi model fake-model").status == "ok"
    assert "/ 3,000 tokens" in kernel.run("%pi").text, kernel.run("%pi").text
