"""Issue 11 point 2 (re-run replacement), review r11b: a turn during which the conversation is compacted.

A compaction during the turn replaces the message list with a shorter one (summary + kept messages);
the turn's messages are taken from their ``message_end`` events, not by index, so a re-run that
compacts keeps its new answer and a turn that fails after a compaction ends in error.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, HTTPError, text_chunks, usage_dict
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

BIG = "word " * 1000  # about 1,250 tokens by the chars/4 estimate: more than the quarter of the window kept


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_CONTEXT_WINDOW="3000")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


def history(kernel: KernelDriver) -> str:
    return kernel.run("%pi history").text


def fill(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """Three turns, none compacted: the second answer is long and reports 2,200 + 10 tokens; the third
    2,300 + 5 (the compaction threshold of a 3,000-token window is 2,250)."""
    kernel.run("%pi reset")
    server.enqueue(text_chunks("ok one", usage=usage_dict(50, 5)))
    assert kernel.run("%%pi\none", cell_id="r1").status == "ok"
    server.enqueue(text_chunks(BIG, usage=usage_dict(2200, 10)))
    assert kernel.run("%%pi\ntwo", cell_id="r2").status == "ok"
    server.enqueue(text_chunks("ok three", usage=usage_dict(2300, 5)))
    assert kernel.run("%%pi\nthree", cell_id="r3").status == "ok"
    assert "[compacted" not in history(kernel) and server.pending == 0


def test_a_rerun_that_compacts_keeps_its_new_answer(kernel: KernelDriver, server: FakeOpenAI) -> None:
    fill(kernel, server)
    # Re-run r3 with a longer prompt: 2,210 + about 100 tokens would not fit, so the conversation is
    # compacted first (the summary, the long answer kept, the new prompt), then answered.
    server.enqueue(text_chunks("SUMMARY of one and two"), text_chunks("NEW ANSWER three", usage=usage_dict(400, 5)))
    result = kernel.run("%%pi\nthree again " + "please " * 60, cell_id="r3")
    assert result.status == "ok" and "NEW ANSWER three" in result.text, result.text
    shown = history(kernel)
    assert "NEW ANSWER three" in shown, shown
    assert "[compacted" in shown


def test_a_compaction_during_a_turn_can_be_undone(kernel: KernelDriver, server: FakeOpenAI) -> None:
    fill(kernel, server)
    server.enqueue(text_chunks("SUMMARY of one and two"), text_chunks("ok four", usage=usage_dict(400, 5)))
    assert kernel.run("%%pi\nfour " + "please " * 60, cell_id="r4").status == "ok"
    assert "[compacted" in history(kernel)
    kernel.run("%pi undo")
    shown = history(kernel)
    assert "[compacted" not in shown and "[assistant] ok one" in shown, shown


def test_a_turn_that_fails_after_a_compaction_says_so(kernel: KernelDriver, server: FakeOpenAI) -> None:
    fill(kernel, server)
    server.enqueue(text_chunks("SUMMARY of one and two"), HTTPError(400, message="Bad request after compaction"))
    result = kernel.run("%%pi\nfour", cell_id="r4")
    assert result.status == "error", result.text
