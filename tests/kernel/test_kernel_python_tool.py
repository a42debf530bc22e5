"""The built-in ``python`` tool in a real kernel: it runs in the notebook's own namespace.

The point of the tool is that the agent works on the user's live objects: a
variable an ordinary cell defined is there for the agent's code, and what the
agent's code defines is there for the next ordinary cell. Approval is
``auto`` here so the call runs without a front-end answering.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url, PI_APPROVAL="auto"), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def test_python_tool_shares_the_namespace_of_ordinary_cells(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run("prices = [3, 4, 5]").status == "ok"
    server.enqueue(
        tool_call_chunks([("python", {"code": "total = sum(prices) * 10\ntotal"})]),
        text_chunks("The total is 120."),
    )
    result = kernel.run("%%pi\nMultiply the sum of prices by ten and keep it as total.", cell_id="agent")
    assert result.status == "ok", result.text
    (tool_message,) = [message for message in server.last_body["messages"] if message["role"] == "tool"]
    assert tool_message["content"] == "120\n"  # the tool saw the cell's ``prices``

    after = kernel.run("print(total + 1)")
    assert after.status == "ok", after.text
    assert after.text.strip() == "121"  # the next cell sees the tool's ``total``
