"""Once broken (fixed):
text that enters the view model unmasked (views no longer mask when drawing).

``turn_state`` masks arguments, live output, results, notices and streamed text as they enter, but not a
call's *name* (``ToolCallBlock.name`` / ``label``, from the model's stream or a ``tool_execution_start``) nor
an approval decision's *reason* (``ApprovalDecision.reason``, drawn by ``render.decision_text``). The policy's
own deny reason quotes ``secret_reason``, which quotes the command word it matched: in ``deny`` mode a bash
call naming ``~/.ssh/id_rsa<key>`` is denied with the key in the reason, and the static HTML, markdown,
plain text and the ``pi_kernel`` metadata saved in the notebook all show it.

(In a kernel, iopub messages of a pi cell pass ``outgoing``'s mask too; what ``%%capture`` keeps of a
``%%pi`` cell in the user's namespace, or any other consumer of ``render_static``, does not.)
"""

from __future__ import annotations

import json

import pytest

from pi_kernel.agent.types import AgentToolResult, ToolExecutionEndEvent, ToolExecutionStartEvent
from pi_kernel.ai import TextContent
from pi_kernel.tools.approval import ApprovalDecision, ApprovalPolicy, ApprovalRequest, decide
from pi_kernel.tools.builtin import builtin_tools
from pi_kernel.widgets.render import render_static
from pi_kernel.widgets.turn_state import TurnState

KEY = "sk-live-Zq8Lm2Np4Rt6Vx8Bq0Wc"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def _shown(state: TurnState) -> list[str]:
    state.finish()
    output = render_static(state)
    return [*output.data.values(), json.dumps(output.metadata)]


def _leaks(texts: list[str]) -> list[str]:
    return [text[:80] for text in texts if KEY[8:20] in text]


def test_a_tool_name_holding_a_key_is_masked_in_the_static_output() -> None:
    state = TurnState(model="m")
    state.apply(ToolExecutionStartEvent("c1", KEY, {}))
    state.apply(ToolExecutionEndEvent("c1", KEY, AgentToolResult([TextContent("Tool not found")]), True))
    assert _leaks(_shown(state)) == []


def test_the_policy_deny_reason_quoting_a_command_word_is_masked_in_the_static_output() -> None:
    bash = next(iter(builtin_tools(names=["bash"])))
    args = {"command": f"cat ~/.ssh/id_rsa_{KEY}"}
    decision = decide(bash, "bash", args, ApprovalPolicy(mode="deny").state())
    assert decision.verdict == "deny" and decision.reason is not None
    assert KEY in decision.reason  # the reason quotes the command word
    state = TurnState(model="m")
    state.apply(ToolExecutionStartEvent("c1", "bash", args))
    request = ApprovalRequest("c1", "bash", args)
    request.decision = ApprovalDecision("deny", decision.reason, source="policy")
    state.apply_approval("resolved", request)  # what ApprovalGate._deny_by_policy announces
    assert _leaks(_shown(state)) == []
