"""A message typed into a turn's box that the turn ends without taking is dropped, with a notice.

Interrupting a turn after typing a steer into its box (the run stops before it polls steering) must not
leave the message queued on the agent: otherwise the next ``%%pi`` cell, whatever it asks, starts with
the old message ("Yes, delete them all", said about another cell's turn) as part of its request. The
turn that dropped it says so in its output.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env
from test_widgets_steering import type_into_the_box, user_texts

pytestmark = pytest.mark.kernel

STEER = "Yes, delete them all"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_delay=0.01) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_WIDGETS="1", PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


def test_a_steer_left_by_an_interrupted_turn_does_not_reach_the_next_cell(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    slow = tool_call_chunks([{"name": "bash", "arguments": {"command": "sleep 20; echo slept"}, "id": "slow"}])
    server.enqueue(slow, text_chunks("never asked"))
    typing = type_into_the_box(kernel, server, STEER, "enter")
    timer: list[threading.Timer] = []

    def on_iopub(message: dict[str, Any]) -> None:
        typing(message)
        if not timer and len(server.requests) > 0 and "slept" not in str(message):
            # the steer went out with the first request's tool call: interrupt while the tool sleeps
            timer.append(threading.Timer(2.0, kernel.interrupt))
            timer[0].start()

    before = len(server.requests)
    first = kernel.run("%%pi\nList the temp files", cell_id="a", on_iopub=on_iopub, timeout=60)
    assert first.status == "error", first.text  # interrupted
    assert len(server.requests) == before + 1  # the steer was never sent: the run stopped first
    assert "were not sent" in first.text and STEER in first.text, first.text  # the person is told
    server.enqueue(text_chunks("It is 4."))
    second = kernel.run("%%pi\nWhat is 2 + 2?", cell_id="b", timeout=60)
    assert second.status == "ok", second.text
    body = server.bodies[-1]
    assert STEER not in user_texts(body), user_texts(body)
