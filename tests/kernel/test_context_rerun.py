"""Re-running a %%pi cell and hostile objects in the namespace (review of issue 12).

- A re-run of a %%pi cell cuts the conversation back to where the cell's turn began; a turn that then
  fails (here: while building its notebook context) must give that conversation back (conversation.settle), and
  an object whose attribute access raises must not break the turn at all.
- That cut also removes the notebook context the cell's previous turn carried, so the re-run is told
  it again: the fix-it loop (run "why did that fail?", edit the prompt, run the same cell again) keeps
  the error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def request_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(part.get("text", "") for part in content)
    return "\n".join(parts)


def test_rerunning_the_fix_it_cell_still_tells_the_model_about_the_error(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    assert kernel.run("ratio = 3 / 0").status == "error"
    server.enqueue(text_chunks("Not sure."))
    assert kernel.run("%%pi\nwhy did that fail?", cell_id="fix-it").status == "ok"
    assert "ZeroDivisionError" in request_text(server.last_body)  # the first run is told
    server.enqueue(text_chunks("Still not sure."))
    assert kernel.run("%%pi\nwhy did that fail? look closer", cell_id="fix-it").status == "ok"  # same cell again
    assert "ZeroDivisionError" in request_text(server.last_body)


HOSTILE = """
class Proxy:  # a callable proxy whose attribute access raises (lazy/remote proxies do this)
    def __call__(self):
        pass
    def __getattribute__(self, name):
        raise RuntimeError("not connected")
proxy = Proxy()
"""


def test_a_hostile_object_neither_breaks_the_turn_nor_loses_the_conversation_on_a_rerun(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    """cell_runner.run_turn calls prompt_message() (-> NotebookContext.take -> is_user_variable reads
    value.__module__ outside any try) AFTER session.conversation.begin() has cut the conversation for a re-run and
    OUTSIDE the try/finally that calls conversation.settle(): the turn fails, and the cut-off turns are gone for good
    (not restored, not kept for %pi undo)."""
    server.enqueue(text_chunks("First answer."))
    assert kernel.run("%%pi\nfirst", cell_id="first").status == "ok"
    server.enqueue(text_chunks("Second answer."))
    assert kernel.run("%%pi\nsecond", cell_id="second").status == "ok"
    count = "from pi_kernel import agent\nprint(len(agent.state.messages))"
    before = kernel.run(count).text.strip()
    assert kernel.run(HOSTILE).status == "ok"
    server.enqueue(text_chunks("First again."))
    rerun = kernel.run("%%pi\nfirst", cell_id="first")  # re-run the first cell
    after = kernel.run("del proxy\n" + count).text.strip()
    assert after == before or rerun.status == "ok", (before, after, rerun.text[-300:])
    assert rerun.status == "ok", rerun.text[-300:]
