"""Seam: budget vs manual compaction.

docs/long-sessions.md: "Before every model request (a summary request ... included) the agent compares
what the session spent ... with the budget". Agent.compact() (``%pi compact``) calls compact_context
directly, never before_request/_check_budget, so the summary request is sent (and paid) past the budget.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks, usage_dict
from kernel_helpers import KernelDriver, kernel_env, write_test_kernelspecs


@pytest.fixture()
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KernelDriver, FakeOpenAI]]:
    with FakeOpenAI(models=("fake-model",)) as server:
        path = str(write_test_kernelspecs(tmp_path_factory.mktemp("jupyter")))
        with KernelDriver(env=kernel_env(server.base_url), jupyter_path=path) as driver:
            yield driver, server


def test_pi_compact_respects_an_exhausted_token_budget(kernel: tuple[KernelDriver, FakeOpenAI]) -> None:
    driver, server = kernel
    server.enqueue(text_chunks("One.", usage=usage_dict(2000, 100)))
    assert driver.run("%%pi\nfirst " + "x" * 400, cell_id="a").status == "ok"
    server.enqueue(text_chunks("Two.", usage=usage_dict(2500, 100)))
    assert driver.run("%%pi\nsecond", cell_id="b").status == "ok"
    driver.run("%pi budget --tokens 1000")  # 4,700 tokens already spent: nothing more may be sent
    sent = len(server.bodies)
    server.enqueue(text_chunks("SUMMARY", usage=usage_dict(3000, 50)))
    out = driver.run("%pi compact").text
    assert len(server.bodies) == sent, f"%pi compact sent a paid summary request past the budget: {out!r}"
