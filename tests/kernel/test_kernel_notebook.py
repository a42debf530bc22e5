"""The agent sees the notebook and writes back into it (issue 12), in a real kernel with the scripted server.

- ``inspect`` and ``cells`` run with no approval request in ``ask`` mode (and in ``read-only``) and
  return a DataFrame's columns and a failed cell's error;
- the first request of a turn after a failing cell names the error (the automatic notebook context),
  and the prompt text reaches the model exactly as written;
- ``%%pi --cells`` (and ``%pi cells on``) put the ``python`` tool's code in a ``set_next_input`` payload.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, approval_comm, approval_requests, kernel_env

pytestmark = pytest.mark.kernel

FRAME = 'import pandas as pd\nfruit = pd.DataFrame({"fruit": ["apple", "pear"], "price": [0.5, None]})'


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """Tool call id → the result text the model got in this turn (after the last user message)."""
    messages = body["messages"]
    start = max(index for index, message in enumerate(messages) if message["role"] == "user")
    return {message["tool_call_id"]: message["content"] for message in messages[start:] if message["role"] == "tool"}


def last_user_parts(body: dict[str, Any]) -> list[str]:
    """The text parts of the request's last user message."""
    user = [message for message in body["messages"] if message["role"] == "user"][-1]
    content = user["content"]
    return [content] if isinstance(content, str) else [part["text"] for part in content if part["type"] == "text"]


def set_next_input(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [payload for payload in reply.get("payload", []) if payload.get("source") == "set_next_input"]


def test_inspect_and_cells_run_without_approval_in_ask_mode(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run(FRAME).status == "ok"
    failed = kernel.run('fruit["weight"].sum()')
    assert failed.status == "error"
    server.enqueue(
        tool_call_chunks([("inspect", {"name": "fruit"}), ("inspect", {}), ("cells", {"last": 2})]),
        text_chunks("The frame has fruit and price; the last cell asked for a missing column."),
    )
    requests: list[dict[str, Any]] = []
    with approval_comm(kernel):  # a call that asks would wait here and show up as a request
        result = kernel.run(
            "%%pi\nWhat is in fruit, and what went wrong?",
            cell_id="ask-inspect",
            on_iopub=lambda message: requests.extend([r for r in [approval_requests(message)] if r]),
        )
    assert result.status == "ok", result.text
    assert requests == []
    described, listing, cells = tool_results(server.last_body).values()
    assert "2 rows x 2 columns" in described
    assert "fruit: str" in described or "fruit: object" in described
    assert "price: float64, 1 null" in described
    assert "- fruit: pandas.DataFrame shape (2, 2)" in listing
    assert "pd:" not in listing and "In:" not in listing  # modules and IPython's own names left out
    assert "KeyError" in cells and "'weight'" in cells
    assert 'fruit["weight"].sum()' in cells
    assert "\x1b[" not in cells  # no ANSI colour codes


def test_inspect_runs_in_read_only_mode_and_an_unknown_name_lists_close_matches(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    kernel.run(FRAME)
    server.enqueue(tool_call_chunks([("inspect", {"name": "fruits"})]), text_chunks("No such variable."))
    result = kernel.run("%%pi --approve read-only\nDescribe fruits.", cell_id="read-only")
    assert result.status == "ok", result.text
    (text,) = tool_results(server.last_body).values()
    assert "No variable named 'fruits'" in text and "Close matches: fruit" in text


def test_the_turn_after_a_failing_cell_names_the_error_and_cells_brings_back_the_fix(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    server.enqueue(text_chunks("Hello."))
    assert kernel.run("%%pi\nHi.", cell_id="before").status == "ok"  # the previous turn
    assert kernel.run("ratio = 3 / 0").status == "error"
    fix = "ratio = 3 / 1\nratio"
    server.enqueue(tool_call_chunks([("python", {"code": fix})]), text_chunks("Dividing by zero failed; fixed."))
    sent = len(server.bodies)
    prompt = "why did that fail? fix it"
    result = kernel.run(f"%%pi --cells --approve auto\n{prompt}", cell_id="fix-it")
    assert result.status == "ok", result.text

    first = server.bodies[sent]
    asked, context = last_user_parts(first)
    assert asked == prompt
    assert context.startswith("\n\nNotebook context")
    assert "ratio = 3 / 0" in context and "ZeroDivisionError: division by zero" in context
    (payload,) = set_next_input(result.reply)
    assert payload["text"] == f"# pi: python call 1 of 1\n{fix}"
    assert payload["replace"] is False
    assert "ratio = 3 / 1" in result.text  # the python card shows the code
    assert kernel.run("print(ratio)").text.strip() == "3.0"


def test_prompts_reach_the_model_as_written_and_context_can_be_switched_off(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    assert "notebook context: off" in kernel.run("%pi context off").text
    assert "notebook:  context off, code cells off" in kernel.run("%pi").text
    kernel.run("x = 1")
    prompt = 'Use {x} and $x and {"a": 1} and {{braces}} and $(echo hi) as they are.'
    server.enqueue(text_chunks("Done."))
    result = kernel.run(f"%%pi\n{prompt}", cell_id="verbatim")
    assert result.status == "ok", result.text
    assert last_user_parts(server.last_body) == [prompt]  # no context part, nothing expanded
    assert "notebook context: on" in kernel.run("%pi context on").text


def test_pi_cells_on_brings_back_every_turns_code_and_failed_calls_are_left_out(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    assert "code cells: on" in kernel.run("%pi cells on").text
    server.enqueue(
        tool_call_chunks([("python", {"code": "1 / 0"})]),
        tool_call_chunks([("python", {"code": "half = 1 / 2"})]),
        tool_call_chunks([("python", {"code": "twice = half * 2"})]),
        text_chunks("Done."),
    )
    result = kernel.run("%%pi --approve auto\nCompute half and twice.", cell_id="cells-on")
    assert result.status == "ok", result.text
    (payload,) = set_next_input(result.reply)
    assert payload["text"] == "# pi: python call 1 of 2\nhalf = 1 / 2\n\n# pi: python call 2 of 2\ntwice = half * 2"
    assert "code cells: off" in kernel.run("%pi cells off").text
    server.enqueue(tool_call_chunks([("python", {"code": "y = 2"})]), text_chunks("Done."))
    quiet = kernel.run("%%pi --approve auto\nSet y.", cell_id="cells-off")
    assert quiet.status == "ok" and set_next_input(quiet.reply) == []


def test_the_offered_code_cell_is_the_code_that_ran_even_with_url_credentials(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    """The reply's ``set_next_input`` payload is not masked (only its error fields are): the cell offered is
    the code as it ran, credentials in a URL included (contract: running it runs the same code again)."""
    code = "url = 'postgres://me:pw@db/x'\nlen(url)"
    server.enqueue(tool_call_chunks([("python", {"code": code})]), text_chunks("Done."))
    result = kernel.run("%%pi --cells --approve auto\nstore my url postgres://me:pw@db/x", cell_id="url-cell")
    assert result.status == "ok", result.text
    (payload,) = set_next_input(result.reply)
    assert payload["text"] == f"# pi: python call 1 of 1\n{code}"


def test_code_cell_follows_the_order_the_calls_ran() -> None:
    from pi_kernel.ai import AssistantMessage, TextContent, ToolCall, ToolResultMessage
    from pi_kernel.kernel.cell_runner import code_cell_text

    calls = [ToolCall("a", "python", {"code": "second = 2"}), ToolCall("b", "python", {"code": "first = 1"})]
    messages = [
        AssistantMessage(content=list(calls)),
        ToolResultMessage("a", "python", [TextContent("")], details={"run": 8, "code": "second = 2"}),
        ToolResultMessage("b", "python", [TextContent("")], details={"run": 7, "code": "first = 1"}),
    ]
    assert code_cell_text(messages) == "# pi: python call 1 of 2\nfirst = 1\n\n# pi: python call 2 of 2\nsecond = 2"
