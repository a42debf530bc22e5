"""Once broken (fixed):
the model's answer spelling the key in hex, streamed in token-sized deltas, reaches
iopub unmasked while the turn runs (real kernel, widget front-end).

``test_widgets_kernel.test_a_key_quoted_by_the_model_or_a_tool_never_reaches_the_front_end`` proves this for
the plain key. In another spelling, each delta passes ``TextBlock``'s ``MaskedStream`` (view model) and then
``outgoing``'s per-request ``MaskedStream`` (the live text goes out as ``stream`` messages): neither holds back
what may begin an *encoded* key, and no piece is a ``FRAGMENT_CHARS`` run of the form, so every hex digit goes
out. Only the final static output (masked whole) hides it, after it was shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks
from kernel_helpers import FAKE_KEY, KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

HEX = FAKE_KEY.encode().hex()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_delay=0.01) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_WIDGETS="1", PI_APPROVAL="ask")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


def test_a_key_spelled_in_hex_by_the_model_never_reaches_the_front_end(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    answer = f"Your key in hex is {HEX} and it is safe."
    server.enqueue(text_chunks(answer, parts=len(answer) // 3))
    start = len(kernel.iopub_log)
    result = kernel.run("%%pi\nWhat is my key in hex?", cell_id="hex", timeout=60)
    assert result.status == "ok", result.text
    sent = kernel.iopub_log[start:]
    live_text = "".join(m["content"]["text"] for m in sent if m["msg_type"] == "stream")
    everything = json.dumps([message["content"] for message in sent])
    assert HEX not in live_text, live_text
    assert HEX not in everything
