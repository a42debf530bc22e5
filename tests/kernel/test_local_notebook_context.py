"""The notebook context and the local model in the real kernel: not sent unless ``%pi context local``.

SmolLM2-135M answered "Say hello in five words" with the context's text (issue 23), so by default the local
model's prompt is the prompt alone; ``%pi context local`` sends the context to it too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kernel_helpers import KernelDriver, kernel_env

pytestmark = [pytest.mark.kernel, pytest.mark.local_model]

LAST_USER_MESSAGE = """
from pi_kernel import agent
user = [m for m in agent.state.messages if m.role == "user"][-1]
print(len(user.content), "|", user.content[-1].text)
"""


@pytest.fixture(scope="module")
def kernel(pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(), jupyter_path=pi_jupyter_path) as driver:
        setup = "from pi_kernel import agent\nfrom pi_kernel.ai import StreamOptions\n"
        assert driver.run(setup + "agent.stream_options = StreamOptions(max_tokens=16, temperature=0)").status == "ok"
        yield driver


def test_the_local_model_is_not_told_the_notebook_context_unless_asked(kernel: KernelDriver) -> None:
    assert "local:" in kernel.run("%pi model").text
    assert "on (not for the local model)" in kernel.run("%pi context").text
    kernel.run("numbers = [1, 2, 3]")
    assert kernel.run("%%pi --no-tools --max-turns 1\nSay hello.", cell_id="a").status == "ok"
    assert kernel.run(LAST_USER_MESSAGE).text.strip() == "1 | Say hello."

    assert "on, the local model too" in kernel.run("%pi context local").text
    kernel.run("letters = 'abc'")
    assert kernel.run("%%pi --no-tools --max-turns 1\nSay hello again.", cell_id="b").status == "ok"
    told = kernel.run(LAST_USER_MESSAGE).text
    assert told.startswith("2 |") and "Notebook context" in told and "letters" in told
