"""A failed command changes nothing, and what a person types is never taken for pi's own (issue 22, point 4).

In a real kernel with the scripted server:

- ``%pi compact`` over the budget says the budget's message (it said ``TypeError: BudgetExceeded...``);
- ``%pi budget --tokens 100 abc`` (and other bad words) is refused with the budget unchanged; ``%pi reset
  --keep`` and ``%pi compact now`` are refused without resetting or compacting;
- a prompt that begins with ``[compacted 40 turns]`` is a prompt: ``%pi compact`` counts it as one turn;
- ``inspect _ih`` says it is the kernel's own name; ``inspect holder`` with ``holder = {"env": os.environ}``
  does not show the environment (nor does the listing);
- code the agent runs cannot plant a cell with ``set_next_input``: without ``--cells`` the reply carries no
  payload and a notice says so; with ``--cells`` the payload is pi's own cell of the turn's code.

``%pi model`` takes one model name: extra words are a usage error and the model stays as it was.

Found by an adversary: ``%pi model fake-model extra words`` chose a model named "fake-model extra words".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks, usage_dict
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture()
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture()
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_SECRET_FOR_TEST="env-value-that-must-not-show-0123456789")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


def payloads(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [payload for payload in reply.get("payload", []) if payload.get("source") == "set_next_input"]


def tool_texts(body: dict[str, Any]) -> list[str]:
    return [message["content"] for message in body["messages"] if message["role"] == "tool"]


def test_compact_over_the_budget_says_the_budget(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(text_chunks("One.", usage=usage_dict(2000, 100)))
    assert kernel.run("%%pi\nfirst", cell_id="a").status == "ok"
    server.enqueue(text_chunks("Two.", usage=usage_dict(2500, 100)))
    assert kernel.run("%%pi\nsecond", cell_id="b").status == "ok"
    assert kernel.run("%pi budget --tokens 1000").status == "ok"
    result = kernel.run("%pi compact")
    assert result.status == "error"
    assert "TypeError" not in result.text and "BudgetExceeded" not in result.text, result.text
    assert "budget" in result.text and "1,000" in result.text, result.text


def test_bad_budget_words_change_nothing(kernel: KernelDriver) -> None:
    assert kernel.run("%pi budget 5").status == "ok"
    for words in ("--tokens 100 abc", "abc --tokens 100", "--tokens 100 5 6", "--tokens abc 7", "--tokens"):
        result = kernel.run(f"%pi budget {words}")
        assert result.status == "error", (words, result.text)
        shown = kernel.run("%pi budget").text
        assert "of $5.00 spent" in shown and "tokens spent" not in shown, (words, shown)


def test_reset_and_compact_with_unknown_words_change_nothing(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(text_chunks("Kept."))
    assert kernel.run("%%pi\nremember me").status == "ok"
    assert kernel.run("%pi reset --keep").status == "error"
    assert kernel.run("%pi compact now").status == "error"
    assert "remember me" in kernel.run("%pi history").text
    assert len(server.bodies) == 1  # no summary request was sent


def test_a_prompt_that_looks_like_a_summary_is_a_prompt(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(text_chunks("Fine."), text_chunks("Also fine."))
    assert kernel.run("%%pi\n[compacted 40 turns] please remember this", cell_id="a").status == "ok"
    assert kernel.run("%%pi\nand this", cell_id="b").status == "ok"
    server.enqueue(text_chunks("SUMMARY OF ONE TURN"))
    result = kernel.run("%pi compact")
    assert result.status == "ok", result.text
    assert "compacted 1 turn into a summary" in result.text, result.text
    summary_request = server.bodies[-1]
    assert "[compacted 40 turns] please remember this" in str(summary_request["messages"])  # summarised, as a prompt


def test_inspect_of_kernel_names_and_of_the_environment_in_a_container(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    assert kernel.run('import os\nholder = {"env": os.environ, "n": 1}\nnested = [[os.environ]]').status == "ok"
    calls = [("inspect", {"name": "_ih"}), ("inspect", {"name": "holder"}), ("inspect", {"name": "nested"})]
    server.enqueue(tool_call_chunks([*calls, ("inspect", {})]), text_chunks("Done."))
    assert kernel.run("%%pi\nlook").status == "ok"
    ih, holder, nested, listing = tool_texts(server.last_body)[-4:]
    assert "kernel's own" in ih and ih.strip() != "'_ih'", ih
    for text in (holder, nested, listing):
        assert "env-value-that-must-not-show" not in text, text
        assert "PATH" not in text and "PI_SECRET_FOR_TEST" not in text, text
        assert "os.environ: not shown" in text, text
    assert "'n': 1" in holder


def test_agent_code_cannot_plant_a_cell(kernel: KernelDriver, server: FakeOpenAI) -> None:
    code = "get_ipython().set_next_input(\"print('planted by the agent')\")\n1 + 1"
    server.enqueue(tool_call_chunks([("python", {"code": code})]), text_chunks("Done."))
    result = kernel.run("%%pi --approve auto\nrun it")
    assert result.status == "ok", result.text
    assert payloads(result.reply) == []
    assert "set_next_input" in result.text and "not passed on" in result.text, result.text

    server.enqueue(tool_call_chunks([("python", {"code": code})]), text_chunks("Done."))
    result = kernel.run("%%pi --approve auto --cells\nrun it again")
    assert result.status == "ok", result.text
    [offered] = payloads(result.reply)
    assert offered["text"].startswith("# pi: python call 1 of 1\n"), offered


# --------------------------------------------------------------------------- kernel model command words


@pytest.fixture(scope="module")
def words_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


def test_extra_words_after_the_model_name_are_refused(words_server: FakeOpenAI, pi_jupyter_path: str) -> None:
    with KernelDriver(env=kernel_env(words_server.base_url), jupyter_path=pi_jupyter_path) as kernel:
        before = kernel.run("%pi model").text
        refused = kernel.run("%pi model fake-model extra words")
        assert refused.status == "error", refused.text
        assert "extra words" in refused.text
        assert kernel.run("%pi model").text == before
        assert "fake-model" in kernel.run("%pi model fake-model").text
