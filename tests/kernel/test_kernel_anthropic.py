"""The Pi kernel on the native Anthropic provider: jupyter_client → the real kernel → the ``anthropic`` SDK →
the scripted Messages server (tests/fake_anthropic.py), with an approved tool call, thinking and caching."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_anthropic import Events, FakeAnthropic, message_events, thinking, tool_use
from kernel_helpers import ADD_TOOL_CELL, KernelDriver, approval_comm, approval_requests, kernel_env

pytestmark = pytest.mark.kernel

KEY = "sk-ant-kernel-test-0123456789"
THOUGHT = "Two small numbers; the add tool does it."


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeAnthropic, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=server.base_url, PI_MODEL="anthropic:claude-sonnet-4-5")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(ADD_TOOL_CELL).status == "ok"
        yield driver


def approve_all(kernel: KernelDriver, comm_id: str, seen: list[dict[str, Any]]) -> Any:
    def on_iopub(message: dict[str, Any]) -> None:
        request = approval_requests(message)
        if request is not None:
            seen.append(request)
            kernel.comm_send(
                comm_id, {"action": "resolve", "tool_call_id": request["tool_call_id"], "decision": "approve"}
            )

    return on_iopub


def test_a_turn_with_thinking_and_an_approved_tool_call(kernel: KernelDriver, server: FakeAnthropic) -> None:
    server.enqueue(
        Events(
            message_events(
                thinking(THOUGHT, "sig-kernel=="),
                tool_use("add", {"a": 2, "b": 3}, "toolu_add"),
                usage={"input_tokens": 40, "cache_creation_input_tokens": 1500, "output_tokens": 30},
            )
        ),
        Events(
            message_events(
                "The sum is 5.",
                usage={"input_tokens": 30, "cache_read_input_tokens": 1500, "cache_creation_input_tokens": 90},
            )
        ),
    )
    seen: list[dict[str, Any]] = []
    with approval_comm(kernel) as comm_id:
        result = kernel.run(
            "%%pi --thinking low\nAdd 2 and 3", cell_id="add", on_iopub=approve_all(kernel, comm_id, seen)
        )
    assert result.status == "ok", result.text
    assert [request["tool_name"] for request in seen] == ["add"]
    first, second = server.bodies[-2:]
    assert first["model"] == "claude-sonnet-4-5" and first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "add" in {tool["name"] for tool in first["tools"]}
    # The second request: the thinking replayed with its signature before the call, then the approved result,
    # which carries the breakpoint of the conversation's latest turn.
    assistant, results = second["messages"][-2:]
    assert assistant["content"][0] == {"type": "thinking", "thinking": THOUGHT, "signature": "sig-kernel=="}
    assert assistant["content"][1]["type"] == "tool_use" and assistant["content"][1]["input"] == {"a": 2, "b": 3}
    [tool_result] = results["content"]
    assert tool_result["tool_use_id"] == "toolu_add" and tool_result["content"][0]["text"] == "5"
    assert tool_result["cache_control"] == {"type": "ephemeral"}
    # What the notebook keeps: the answer and the cached tokens, not the thinking (PI_SAVE_THINKING is off).
    final = [m for m in result.messages if m["msg_type"] == "display_data"][-1]["content"]["data"]
    assert "The sum is 5." in final["text/plain"] and "1,500 cached" in final["text/plain"]
    assert THOUGHT not in json.dumps(final)
    live = [m["content"]["data"]["text/plain"] for m in result.messages if m["msg_type"] == "update_display_data"]
    assert any(THOUGHT in text for text in live), "the thinking is shown while it streams"
    assert KEY not in json.dumps(kernel.iopub_log, default=str)


def test_usage_and_thinking_commands(kernel: KernelDriver, server: FakeAnthropic) -> None:
    assert f"anthropic:claude-sonnet-4-5 at {server.base_url}" in kernel.run("%pi model").text
    listed = kernel.run("%pi models").text
    assert "* anthropic:claude-sonnet-4-5" in listed and "anthropic:claude-haiku-4-5" in listed
    usage = kernel.run("%pi usage")
    assert usage.status == "ok"
    assert "anthropic:claude-sonnet-4-5" in usage.text and "cached" in usage.text and "to cache" in usage.text
    assert "thinking: high" in kernel.run("%pi thinking high").text
    server.enqueue(Events(message_events("ok")))
    assert kernel.run("%%pi --no-tools\nsay ok").status == "ok"
    assert server.bodies[-1]["thinking"]["budget_tokens"] == 16384
    assert "thinking: off" in kernel.run("%pi thinking off").text
    server.enqueue(Events(message_events("ok")))
    assert kernel.run("%%pi --no-tools\nsay ok").status == "ok"
    assert "thinking" not in server.bodies[-1]


def test_a_forced_tool_with_thinking_finishes_its_tool_loop(kernel: KernelDriver, server: FakeAnthropic) -> None:
    """``%%pi --tool add --thinking low``: the forced first request goes without thinking (the API refuses
    both), so the request after the tool result does too (the API refuses thinking in a loop that began
    without it; the scripted server answers 400 as it would)."""
    server.enqueue(
        Events(message_events(tool_use("add", {"a": 1, "b": 2}, "toolu_forced"))),
        Events(message_events("One and two make 3.")),
    )
    seen: list[dict[str, Any]] = []
    with approval_comm(kernel) as comm_id:
        result = kernel.run(
            "%%pi --tool add --thinking low\nAdd 1 and 2", cell_id="forced", on_iopub=approve_all(kernel, comm_id, seen)
        )
    assert result.status == "ok", result.text
    forced, after = server.bodies[-2:]
    assert forced["tool_choice"] == {"type": "tool", "name": "add"} and "thinking" not in forced
    assert "thinking" not in after and after["messages"][-1]["content"][0]["type"] == "tool_result"
    final = [m for m in result.messages if m["msg_type"] == "display_data"][-1]["content"]["data"]["text/plain"]
    assert "One and two make 3." in final and "400" not in final
