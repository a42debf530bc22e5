"""Long sessions through a stock ipykernel with ``%load_ext pi_kernel`` (issue 15, point 5: the same as the
Pi kernel): the context meter and cost in the footer and ``%pi usage``, cut tool results kept in
``_pi_results``, a budget that stops a turn before its request, compaction (automatic and ``%pi compact``)
visible in the output, in ``%pi history`` and in a saved session.

The kernel's environment sets the long-session settings: ``PI_CONTEXT_WINDOW=3000``,
``PI_TOOL_RESULT_LIMIT=100``. The tests run in file order on one kernel.

The context window the person set (``PI_CONTEXT_WINDOW``, like ``c.PiKernel.context_window``)
holds for every model chosen later too: ``%%pi --model NAME`` and ``%pi model NAME`` fell back to the 128,000
default (the meter was wrong and compaction waited for a provider error).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, ToolCallSpec, text_chunks, tool_call_chunks, usage_dict
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def stock(server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    root = tmp_path_factory.mktemp("stock")
    spec = root / "kernels" / "stock"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "stock", "language": "python"}))
    env = kernel_env(server.base_url, PI_APPROVAL="auto", PI_CONTEXT_WINDOW="3000", PI_TOOL_RESULT_LIMIT="100")
    with KernelDriver("stock", env=env, jupyter_path=root) as driver:
        assert driver.run("%load_ext pi_kernel").status == "ok"
        yield driver


def test_status_shows_the_context_window_that_was_set(stock: KernelDriver) -> None:
    status = stock.run("%pi").text
    assert "context:   0 / 3,000 tokens [set]" in status


def test_footer_and_usage_show_context_use_and_cost(stock: KernelDriver, server: FakeOpenAI) -> None:
    assert "$1 in, $2 out" in stock.run("%pi price fake-model 1 2").text
    server.enqueue(text_chunks("First answer.", usage=usage_dict(1500, 100)))
    result = stock.run("%%pi\nHello", cell_id="c1")
    assert result.status == "ok"
    assert "context 1,600 / 3,000 (53%)" in result.text
    assert "$0.0017" in result.text  # 1,500 in at $1 and 100 out at $2 per million
    usage = stock.run("%pi usage").text.splitlines()
    assert usage[0] == "tokens: 1500 in · 100 out · $0.0017 over 1 model request(s)"
    assert any("openai-compatible:fake-model: 1 request(s)" in row and "$0.0017" in row for row in usage)
    assert any("context " in row and "/ 3,000" in row for row in usage)


def test_a_user_tool_result_reaches_the_model_cut_and_stays_whole_in_the_notebook(
    stock: KernelDriver, server: FakeOpenAI
) -> None:
    stock.run('from pi_kernel import tool\n@tool\ndef big() -> str:\n    """Big."""\n    return "y" * 5000\n')
    server.enqueue(
        tool_call_chunks([ToolCallSpec("big", {}, "call_big")], usage=usage_dict(1600, 10)),
        text_chunks("Seen.", usage=usage_dict(1700, 10)),
    )
    assert stock.run("%%pi\nCall big", cell_id="c2").status == "ok"
    sent = [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"][-1]
    assert sent.startswith("y" * 100 + "\n\n[Tool result cut: showing the first 100 of 5,000 characters")
    assert stock.run("len(_pi_results['call_big'])").text.strip() == "5000"


def test_a_budget_stops_a_turn_before_its_request(stock: KernelDriver, server: FakeOpenAI) -> None:
    assert "$0.0050 of $0.0010 spent" in stock.run("%pi budget 0.001").text  # 4,800 in at $1, 120 out at $2 so far
    sent = len(server.bodies)
    result = stock.run("%%pi\nOne more", cell_id="c3")
    assert "Budget reached" in result.text and "Nothing was sent" in result.text
    assert len(server.bodies) == sent
    assert "budget: none" in stock.run("%pi budget off").text


def test_compaction_happens_when_the_next_request_would_not_fit(stock: KernelDriver, server: FakeOpenAI) -> None:
    # The last answer reported 1,710 tokens; this one reports 2,400 of 3,000: the next request would not fit.
    server.enqueue(text_chunks("Long answer.", usage=usage_dict(2390, 10)))
    assert stock.run("%%pi\nFill it", cell_id="c4").status == "ok"
    sent = len(server.bodies)
    server.enqueue(text_chunks("AUTO-SUMMARY of the work"), text_chunks("After compaction.", usage=usage_dict(300, 5)))
    result = stock.run("%%pi\nGo on", cell_id="c5")
    assert result.status == "ok" and "After compaction." in result.text
    assert re.search(r"compacted \d+ turns? into a summary", result.text), result.text
    summary_request, retry = server.bodies[sent:]
    assert "summarising the earlier part of a conversation" in summary_request["messages"][0]["content"]
    first_user = next(m for m in retry["messages"] if m["role"] == "user")
    assert "AUTO-SUMMARY of the work" in json.dumps(first_user)
    assert "AUTO-SUMMARY" in stock.run("%pi history").text


def test_compact_on_demand_and_a_saved_session_keeps_the_summary(
    stock: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(text_chunks("Answer six.", usage=usage_dict(400, 5)))
    assert stock.run("%%pi\nSix", cell_id="c6").status == "ok"
    server.enqueue(text_chunks("MANUAL-SUMMARY"))
    assert "compacted " in stock.run("%pi compact").text
    history = stock.run("%pi history").text
    assert "[compacted " in history and "MANUAL-SUMMARY" in history
    path = tmp_path / "session.jsonl"
    assert stock.run(f"%pi save {path}").status == "ok"
    assert stock.run("%pi reset").status == "ok"
    assert stock.run(f"%pi load {path}").status == "ok"
    assert "MANUAL-SUMMARY" in stock.run("%pi history").text


def test_the_context_window_is_set_with_the_model(stock: KernelDriver) -> None:
    assert stock.run("%pi model fake-model --context 5000").status == "ok"
    assert "/ 5,000 tokens" in stock.run("%pi").text and "[set]" in stock.run("%pi").text
    assert stock.run("%pi model --context 6k").status == "ok"
    assert "/ 6,000 tokens" in stock.run("%pi").text
    assert "--context" in stock.run("%pi model --context lots").text


# --------------------------------------------------------------------------- kernel context window setting


@pytest.fixture(scope="module")
def window_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(window_server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(window_server.base_url, PI_CONTEXT_WINDOW="3000", PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


def test_a_cell_with_its_own_model_compacts_at_the_window_that_was_set(
    kernel: KernelDriver, window_server: FakeOpenAI
) -> None:
    window_server.enqueue(text_chunks("ok", usage=usage_dict(2_900, 10)))  # 2,910 of the 3,000 set
    assert kernel.run("%%pi\nHello", cell_id="a").status == "ok"
    sent = len(window_server.bodies)
    window_server.enqueue(text_chunks("SUMMARY"), text_chunks("after", usage=usage_dict(300, 5)))
    result = kernel.run("%%pi --model fake-model\nGo on", cell_id="b")
    assert result.status == "ok", result.text
    assert len(window_server.bodies) - sent == 2, "no compaction: the cell's model has the 128,000 default window"


def test_choosing_a_model_keeps_the_window_that_was_set(kernel: KernelDriver) -> None:
    assert "/ 3,000 tokens" in kernel.run("%pi").text
    assert kernel.run("%pi model fake-model").status == "ok"
    assert "/ 3,000 tokens" in kernel.run("%pi").text, kernel.run("%pi").text
