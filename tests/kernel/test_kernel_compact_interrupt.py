"""Interrupting ``%pi compact`` in the real Pi kernel. The summary request is not stopped (the
compaction has no abort signal and runs in a worker thread the interrupt does not reach); the next ``%%pi``
cell runs meanwhile (the agent is not marked busy), and when the summary arrives the compaction replaces the
conversation with its old snapshot: the later turn is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fake_openai import Chunks, FakeOpenAI, text_chunks
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def test_an_interrupted_compact_does_not_later_erase_the_next_turn(kernel: KernelDriver, server: FakeOpenAI) -> None:
    for turn in range(3):
        server.enqueue(text_chunks(f"answer {turn}"))
        assert kernel.run(f"%%pi\nquestion {turn}", cell_id=f"c{turn}").status == "ok"
    server.enqueue(Chunks(text_chunks("SLOW-SUMMARY", parts=8), delay=0.5))  # about 5 s
    sent = len(server.bodies)
    interrupted: list[float] = []

    def interrupt_once_sent() -> None:
        if len(server.bodies) > sent and not interrupted:
            interrupted.append(time.monotonic())
            kernel.interrupt()

    started = time.monotonic()
    result = kernel.run("%pi compact", on_poll=interrupt_once_sent, timeout=30)
    ended_after = time.monotonic() - (interrupted[0] if interrupted else started)

    server.enqueue(text_chunks("LATER-ANSWER"))
    later = kernel.run("%%pi\nLATER-QUESTION", cell_id="later")
    time.sleep(6)  # the summary request, if it went on, is over now
    history = kernel.run("%pi history").text
    assert result.status == "error", f"the interrupt did not stop %pi compact ({ended_after:.1f} s): {result.text}"
    assert later.status == "ok", later.text
    assert "LATER-QUESTION" in history and "LATER-ANSWER" in history, f"the later turn was lost:\n{history}"
