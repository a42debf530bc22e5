"""A stricter mode chosen later wins over an earlier "always allow", also when the tool has a per-tool
``ask`` override (tutorial 03's order: ``%pi approve ask remove_stock=ask``, "Always allow", then
``%pi approve read-only``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import ADD_TOOL_CELL, KernelDriver, kernel_env
from test_kernel_commands import run_answered_from_a_console, tool_results

from pi_kernel.tools.approval import ApprovalPolicy
from pi_kernel.tools.builtin import builtin_tools

BASH = next(d for d in builtin_tools() if d.name == "bash")
READ = next(d for d in builtin_tools() if d.name == "read")


@pytest.mark.parametrize("later", [["read-only"], ["deny"]])
def test_always_allow_with_an_ask_override_is_refused_after_a_stricter_mode(later: list[str]) -> None:
    policy = ApprovalPolicy()
    policy.apply_spec(["bash=ask"])
    policy.allow_always("bash")  # the person clicked "Always allow"
    policy.apply_spec(later)  # %pi approve read-only / deny
    assert policy.decide(BASH, {"command": "rm -rf ~/work"}) == "deny"


def test_always_allow_with_an_ask_override_is_refused_in_a_read_only_cell() -> None:
    policy = ApprovalPolicy()
    policy.apply_spec(["bash=ask"])
    policy.allow_always("bash")
    assert policy.decide(BASH, {"command": "rm -rf ~/work"}, mode="read-only") == "deny"  # %%pi --approve read-only


def test_an_ask_override_restated_with_read_only_asks_even_when_always_allowed() -> None:
    policy = ApprovalPolicy()
    policy.apply_spec(["read-only", "bash=ask"])
    policy.allow_always("bash")
    assert policy.decide(BASH, {"command": "rm -rf ~/work"}) == "ask"


def test_always_allow_still_answers_in_ask_mode_and_for_read_only_tools() -> None:
    policy = ApprovalPolicy()
    policy.apply_spec(["bash=ask"])
    policy.allow_always("bash")
    assert policy.decide(BASH, {"command": "ls"}) == "run"
    policy.allow_always("read")
    assert policy.decide(READ, {"path": "/etc/hostname"}, mode="read-only") == "run"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.mark.kernel
def test_kernel_read_only_refuses_an_always_allowed_tool_with_an_ask_override(
    server: FakeOpenAI, pi_jupyter_path: str
) -> None:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as kernel:
        kernel.run(ADD_TOOL_CELL)
        kernel.run("%pi approve ask add=ask")
        server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("3."))
        result, _ = run_answered_from_a_console(kernel, "Add 1 and 2", "%pi allow call_0 --always", "a1")
        assert result.status == "ok" and tool_results(server)[-1] == "3"
        kernel.run("%pi approve read-only")
        server.enqueue(tool_call_chunks([("add", {"a": 5, "b": 6})]), text_chunks("Refused."))
        assert kernel.run("%%pi\nAdd 5 and 6", cell_id="a2").status == "ok"
        assert "read-only" in tool_results(server)[-1], tool_results(server)[-1]
