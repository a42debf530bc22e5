"""The Pi kernel end to end: jupyter_client → the real kernel → the fake OpenAI server over HTTP.

One kernel serves the whole module (tests leave its approval policy at
``ask`` and close the comms they open). The model is scripted per test with
``server.enqueue``; what the kernel sent is read back from ``server.bodies``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Chunks, FakeOpenAI, HTTPError, text_chunks, tool_call_chunks, usage_dict
from kernel_helpers import (
    FAKE_KEY,
    KernelDriver,
    approval_comm,
    approval_requests,
    assert_one_result_per_call,
    kernel_env,
)

pytestmark = pytest.mark.kernel

SETUP = '''
from pi_kernel import tool

@tool(approval="ask")
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()
'''


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model", "other-model")) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
        yield driver


def decide(kernel: KernelDriver, comm_id: str, seen: list[dict[str, Any]], **decision: Any) -> Any:
    """An ``on_iopub`` that answers every approval request on ``comm_id`` with ``decision``."""

    def on_iopub(message: dict[str, Any]) -> None:
        request = approval_requests(message)
        if request is not None:
            seen.append(request)
            kernel.comm_send(comm_id, {"action": "resolve", "tool_call_id": request["tool_call_id"], **decision})

    return on_iopub


def tool_result_texts(body: dict[str, Any]) -> list[str]:
    return [message["content"] for message in body["messages"] if message["role"] == "tool"]


def test_prompt_streams_the_answer(kernel: KernelDriver, server: FakeOpenAI) -> None:
    answer = "Hello from the fake model, " + "and more " * 40
    server.enqueue(text_chunks(answer, parts=80))
    result = kernel.run("%%pi\nSay hello", cell_id="hello")
    assert result.status == "ok"
    assert answer.strip() in result.text
    assert server.last_body["messages"][-1]["content"][0]["text"] == "Say hello"
    assert {tool["function"]["name"] for tool in server.last_body["tools"]} >= {"add", "shout"}
    outputs = [m for m in result.messages if m["msg_type"] in ("display_data", "update_display_data", "clear_output")]
    live, updates = outputs[0], [m for m in outputs if m["msg_type"] == "update_display_data"]
    display_id = live["content"]["transient"]["display_id"]
    assert live["msg_type"] == "display_data" and updates, "the answer streams into one display updated in place"
    assert {m["content"]["transient"]["display_id"] for m in updates} == {display_id}
    assert len(updates) < 20, f"80 deltas arriving at once gave {len(updates)} updates: not throttled"
    # Then the live display is cleared (once the final output arrives) and the static rendering shown afresh.
    clear, final = outputs[-2:]
    assert clear["msg_type"] == "clear_output" and clear["content"]["wait"] is True
    assert final["msg_type"] == "display_data" and "display_id" not in final["content"].get("transient", {})
    assert set(final["content"]["data"]) == {"text/html", "text/markdown", "text/plain"}
    assert final["content"]["data"]["text/markdown"].startswith(answer.strip())
    assert final["content"]["metadata"]["pi_kernel"]["model"] == "fake-model"
    assert [m["msg_type"] for m in outputs[1:-2]] == ["update_display_data"] * (len(outputs) - 3)


def test_approval_by_comm_while_the_cell_runs(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 3})]), text_chunks("The sum is 5."))
    seen: list[dict[str, Any]] = []
    with approval_comm(kernel) as comm_id:
        result = kernel.run(
            "%%pi\nAdd 2 and 3", cell_id="add", on_iopub=decide(kernel, comm_id, seen, decision="approve")
        )
    assert result.status == "ok", result.text
    assert [request["tool_name"] for request in seen] == ["add"]
    assert tool_result_texts(server.last_body) == ["5"]
    assert "The sum is 5." in result.text
    shown = [m["content"]["data"]["text/plain"] for m in result.messages if m["msg_type"] == "update_display_data"]
    assert any("waiting for approval (call_0)" in text and "%pi allow call_0" in text for text in shown)


def test_malformed_arguments_never_reach_approval(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """``add`` asks for approval, but a call whose arguments fail validation is answered with the
    validation error at once: nobody is asked."""
    server.enqueue(tool_call_chunks([("add", {"a": "two", "b": 3})]), text_chunks("I will fix the arguments."))
    seen: list[dict[str, Any]] = []
    with approval_comm(kernel) as comm_id:
        result = kernel.run(
            "%%pi\nAdd two and 3", cell_id="malformed", on_iopub=decide(kernel, comm_id, seen, decision="approve")
        )
    assert result.status == "ok", result.text
    assert seen == []
    error = tool_result_texts(server.last_body)[-1]
    assert error.startswith('Validation failed for tool "add":') and '"a": "two"' in error
    assert_one_result_per_call(server.last_body["messages"])


def test_a_queued_cell_runs_after_the_waiting_cell(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """Run All: the next cell is already queued when the approval is asked. The comm answer is still
    handled (ipykernel >= 7.4), and the queued cell only starts once the ``%%pi`` cell is done."""
    server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 2})]), text_chunks("Four."))
    queued: dict[str, str] = {}
    with approval_comm(kernel) as comm_id:

        def on_iopub(message: dict[str, Any]) -> None:
            request = approval_requests(message)
            if request is not None:
                queued["id"] = kernel.execute_request("print('the next cell ran')")
                kernel.comm_send(
                    comm_id, {"action": "resolve", "tool_call_id": request["tool_call_id"], "decision": "approve"}
                )

        result = kernel.run("%%pi\nAdd 2 and 2", cell_id="runall", on_iopub=on_iopub)
        assert result.status == "ok" and tool_result_texts(server.last_body)[-1] == "4"
        early = [m["msg_type"] for m in kernel.iopub_log if m["parent_header"].get("msg_id") == queued["id"]]
        assert "execute_input" not in early and "stream" not in early, early
        printed = kernel.wait_iopub(
            lambda m: m["parent_header"].get("msg_id") == queued["id"] and m["msg_type"] == "stream"
        )
    assert printed["content"]["text"] == "the next cell ran\n"


def test_decision_from_a_subshell_thread(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """``%pi allow`` run on a kernel subshell (another thread) while the main shell's cell waits."""
    subshell = kernel.create_subshell()
    server.enqueue(tool_call_chunks([("add", {"a": 20, "b": 22})]), text_chunks("42."))
    sent: dict[str, str] = {}

    def on_iopub(message: dict[str, Any]) -> None:
        if approval_requests(message) and not sent:
            sent["id"] = kernel.execute_request(
                "import threading\nprint(threading.current_thread().name)\n%pi allow all", subshell_id=subshell
            )
        elif sent and message["parent_header"].get("msg_id") == sent["id"] and message["msg_type"] == "stream":
            sent["printed"] = sent.get("printed", "") + message["content"]["text"]

    with approval_comm(kernel):
        result = kernel.run("%%pi\nAdd 20 and 22", cell_id="subshell", on_iopub=on_iopub, timeout=30)
    assert result.status == "ok" and tool_result_texts(server.last_body)[-1] == "42"
    assert sent["printed"].startswith("subshell-") and "approve: call_0" in sent["printed"]


def test_deny_with_a_reason_reaches_the_model(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 1})]), text_chunks("Understood."))
    seen: list[dict[str, Any]] = []
    with approval_comm(kernel) as comm_id:
        on_iopub = decide(kernel, comm_id, seen, decision="deny", reason="Use mental arithmetic")
        result = kernel.run("%%pi\nAdd 1 and 1", cell_id="deny", on_iopub=on_iopub)
    assert result.status == "ok"
    assert tool_result_texts(server.last_body)[-1] == "Use mental arithmetic"
    assert_one_result_per_call(server.last_body["messages"])
    assert [request["tool_name"] for request in seen] == ["add"]


def test_edited_arguments_are_revalidated_then_run(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 3})]), text_chunks("15 it is."))
    seen: list[dict[str, Any]] = []
    with approval_comm(kernel) as comm_id:
        on_iopub = decide(kernel, comm_id, seen, decision="approve", args={"a": "10", "b": 5})
        assert kernel.run("%%pi\nAdd", cell_id="edit", on_iopub=on_iopub).status == "ok"
    assert tool_result_texts(server.last_body)[-1] == "15"  # "10" was coerced by validation
    server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 3})]), text_chunks("Bad edit."))
    with approval_comm(kernel) as comm_id:
        on_iopub = decide(kernel, comm_id, seen, decision="approve", args={"a": "ten"})
        assert kernel.run("%%pi\nAdd", cell_id="edit2", on_iopub=on_iopub).status == "ok"
    assert "Validation failed" in tool_result_texts(server.last_body)[-1]


def test_always_allow_stops_asking_for_that_tool(kernel: KernelDriver, server: FakeOpenAI) -> None:
    seen: list[dict[str, Any]] = []
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("3."))
    server.enqueue(tool_call_chunks([("add", {"a": 3, "b": 4})]), text_chunks("7."))
    with approval_comm(kernel) as comm_id:
        on_iopub = decide(kernel, comm_id, seen, decision="always")
        assert kernel.run("%%pi\nAdd 1 2", cell_id="always1", on_iopub=on_iopub).status == "ok"
        assert kernel.run("%%pi\nAdd 3 4", cell_id="always2", on_iopub=on_iopub).status == "ok"
    assert len(seen) == 1 and tool_result_texts(server.last_body)[-1] == "7"
    assert "always allowed: add" in kernel.run("%pi approve").text
    kernel.run("from pi_kernel.kernel.extension import get_session; get_session().policy.always_allowed.clear()")


def test_rerunning_a_cell_replaces_its_turn_and_later_ones(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    for cell_id, text in (("first", "one"), ("second", "two"), ("first", "one again")):
        server.enqueue(text_chunks(f"ok {text}"))
        assert kernel.run(f"%%pi\n{text}", cell_id=cell_id).status == "ok"
    sent = [
        (m["role"], m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])
        for m in server.last_body["messages"][1:]
    ]
    assert sent == [("user", "one again")]
    server.enqueue(text_chunks("ok three"))
    assert kernel.run("%%pi\nthree", cell_id="third").status == "ok"
    users = [m["content"][0]["text"] for m in server.last_body["messages"] if m["role"] == "user"]
    assert users == ["one again", "three"]


def test_save_and_load_restore_a_conversation(kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path) -> None:
    kernel.run("%pi reset")
    server.enqueue(text_chunks(f"Remembered: blue. (Your key {FAKE_KEY} is safe.)"))
    shown = kernel.run("%%pi\nMy colour is blue", cell_id="remember")
    assert shown.status == "ok" and "Remembered: blue. (Your key *** is safe.)" in shown.text
    history = kernel.run("%pi history").text
    assert "[user] My colour is blue" in history and "Your key *** is safe" in history and FAKE_KEY not in history
    path = tmp_path / "chat.jsonl"
    assert kernel.run(f"%pi save {path}").status == "ok"
    saved = path.read_text()
    assert FAKE_KEY not in saved and "Your key *** is safe" in saved
    assert json.loads(saved.splitlines()[0])["model"].endswith("fake-model")
    kernel.restart()  # a new kernel process: nothing of the conversation is left but the file
    assert kernel.run(SETUP).status == "ok"
    assert "no conversation yet" in kernel.run("%pi history").text
    assert "Loaded 2 messages" in kernel.run(f"%pi load {path}").text
    server.enqueue(text_chunks("It is blue."))
    assert kernel.run("%%pi\nWhat is my colour?", cell_id="recall").status == "ok"
    users = [m["content"][0]["text"] for m in server.last_body["messages"] if m["role"] == "user"]
    assert users == ["My colour is blue", "What is my colour?"]
    # The saved cell marks came back too: re-running the first cell (edited) replaces its turn and the rest.
    server.enqueue(text_chunks("Remembered: green."), text_chunks("It is green."))
    assert kernel.run("%%pi\nMy colour is green", cell_id="remember").status == "ok"
    assert kernel.run("%%pi\nWhat is my colour?", cell_id="recall").status == "ok"
    users = [m["content"][0]["text"] for m in server.last_body["messages"] if m["role"] == "user"]
    assert users == ["My colour is green", "What is my colour?"]


def test_headless_policies(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """No comm, no widgets: deny, auto, read-only, a per-tool policy, and ask without stdin (denied with
    how to allow it)."""
    kernel.run("%pi reset")
    kernel.run("%pi approve deny")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("Denied."))
    assert kernel.run("%%pi\nAdd", cell_id="h1").status == "ok"
    assert "approval policy: deny" in tool_result_texts(server.last_body)[-1]
    kernel.run("%pi approve auto")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("3."))
    assert kernel.run("%%pi\nAdd", cell_id="h2").status == "ok"
    assert tool_result_texts(server.last_body)[-1] == "3"
    kernel.run("%pi approve read-only")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("Read-only."))
    assert kernel.run("%%pi\nAdd", cell_id="h4").status == "ok"
    assert tool_result_texts(server.last_body)[-1] == 'Tool "add" was not run: this session is read-only.'
    try:
        assert "per tool: add=auto" in kernel.run("%pi approve ask add=auto").text
        server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 2})]), text_chunks("4."))
        assert kernel.run("%%pi\nAdd", cell_id="h5").status == "ok"
        assert tool_result_texts(server.last_body)[-1] == "4"
    finally:
        kernel.run("from pi_kernel.kernel.extension import get_session; get_session().policy.overrides.clear()")
    kernel.run("%pi approve ask")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("Nobody."))
    assert kernel.run("%%pi\nAdd", cell_id="h3").status == "ok"
    reason = tool_result_texts(server.last_body)[-1]
    assert "nobody can approve" in reason and "PI_APPROVAL=auto" in reason
    assert_one_result_per_call(server.last_body["messages"], expected_calls=5)  # every denial answered its call


def test_ask_on_stdin(kernel: KernelDriver, server: FakeOpenAI) -> None:
    prompts: list[str] = []
    answers = iter(["n: not today", "y"])

    def on_input(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    server.enqueue(tool_call_chunks([("add", {"a": 4, "b": 4})]), text_chunks("Fine."))
    assert kernel.run("%%pi\nAdd", cell_id="in1", allow_stdin=True, on_input=on_input).status == "ok"
    assert tool_result_texts(server.last_body)[-1] == "not today"
    server.enqueue(tool_call_chunks([("add", {"a": 4, "b": 4})]), text_chunks("8."))
    assert kernel.run("%%pi\nAdd", cell_id="in2", allow_stdin=True, on_input=on_input).status == "ok"
    assert tool_result_texts(server.last_body)[-1] == "8"
    assert len(prompts) == 2 and prompts[0].startswith('Allow add {"a": 4, "b": 4}?')


def test_unanswered_approval_times_out_as_denied(kernel: KernelDriver, server: FakeOpenAI) -> None:
    configured = kernel.run("from pi_kernel.kernel.extension import get_session; get_session().broker.timeout")
    assert configured.text.strip() == "60.0"  # PI_APPROVAL_TIMEOUT=60 in the kernel's environment
    kernel.run("get_session().broker.timeout = 0.3")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("Timed out."))
    try:
        with approval_comm(kernel):
            assert kernel.run("%%pi\nAdd", cell_id="timeout").status == "ok"
    finally:
        kernel.run("get_session().broker.timeout = 60")
    assert "Approval timed out after 0.3 s" in tool_result_texts(server.last_body)[-1]


def test_tools_can_be_disabled_and_the_prompt_shown(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run("%pi tools disable shout").status == "ok"
    server.enqueue(text_chunks("ok"))
    kernel.run("%%pi\nHi", cell_id="disabled")
    assert "shout" not in {tool["function"]["name"] for tool in server.last_body["tools"]}
    assert re.search(r"^shout +off ", kernel.run("%pi tools enable add").text, re.MULTILINE)
    kernel.run("%pi tools enable shout")
    assert "Available tools:" in kernel.run("%pi system").text
    assert kernel.run("%pi tools enable nosuchtool").status == "error"


def test_cell_options(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(text_chunks("No tools."))
    assert kernel.run("%%pi --no-tools --model other-model\nHi", cell_id="opts").status == "ok"
    # No tool offered (an empty list where the history holds tool calls: LiteLLM-style proxies need it).
    assert not server.last_body.get("tools") and server.last_body["model"] == "other-model"
    assert "fake-model" in kernel.run("%pi model").text  # --model applied to that cell only
    requests = len(server.bodies)
    server.enqueue(tool_call_chunks([("shout", {"text": "a"})]))  # a second request would get a 500
    result = kernel.run("%%pi --max-turns 1\nShout", cell_id="max")
    assert result.status == "ok" and len(server.bodies) == requests + 1
    assert "── shout (shout) · done" in result.text  # the tool ran; its result went to no second request
    bad = kernel.run("%%pi --max-turns zero\nHi")
    assert bad.status == "error" and "UsageError" in bad.text


def test_models_lists_the_servers_models_and_one_can_be_picked(kernel: KernelDriver, server: FakeOpenAI) -> None:
    listed = kernel.run("%pi models").text.splitlines()
    assert listed[:2] == ["* openai-compatible:fake-model", "  openai-compatible:other-model"]
    assert all(row.startswith("  local:") for row in listed[2:]), listed  # the offline model, when installed
    try:
        picked = kernel.run("%pi model openai-compatible:other-model").text
        assert picked.startswith("model: openai-compatible:other-model at " + server.base_url)
        server.enqueue(text_chunks("From the other model."))
        assert kernel.run("%%pi\nHi", cell_id="other").status == "ok"
        assert server.last_body["model"] == "other-model"
        assert "* openai-compatible:other-model" in kernel.run("%pi models").text
    finally:
        kernel.run("%pi model openai-compatible:fake-model")
    assert kernel.run("%pi model").text.startswith("model: openai-compatible:fake-model at ")


def test_usage_adds_up_the_turns(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    server.enqueue(text_chunks("One.", usage=usage_dict(123, 45)), text_chunks("Two.", usage=usage_dict(7, 5)))
    for cell_id in ("usage1", "usage2"):
        assert kernel.run("%%pi\nCount", cell_id=cell_id).status == "ok"
    assert kernel.run("%pi usage").text.splitlines()[0] == "tokens: 130 in · 50 out over 2 model request(s)"


def test_provider_error_is_shown_without_the_key(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(HTTPError(401, message=f"Incorrect API key provided: {FAKE_KEY}"))
    result = kernel.run("%%pi\nHi", cell_id="err")
    assert result.status == "error" and "Incorrect API key" in result.text
    assert FAKE_KEY not in result.text


def test_session_agent_and_tool_from_python(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(text_chunks("Direct."))
    code = (
        "from pi_kernel import agent, tool\n"
        "import pi_kernel.agent as package\n"
        "before = len(agent.state.messages)\n"
        "await agent.prompt('Called from Python')\n"
        "(len(agent.state.messages) - before, agent.state.messages[-1].text, package.Agent.__name__, tool.__name__)"
    )
    result = kernel.run(code)
    assert result.status == "ok", result.text
    assert "(2, 'Direct.', 'Agent', 'tool')" in result.text
    assert "shout" in kernel.run("%pi tools").text  # @tool in the setup cell registered into the session


def test_a_key_streamed_in_pieces_or_cut_by_a_preview_stays_masked(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """Runs before the widget front-end test, so this is the text view. It redraws a growing answer (a key
    arrives a few characters at a time), and previews cut long values to a length (the cut may fall inside a
    key): no run of the key may show."""
    cell = '@tool\ndef pad(text: str) -> str:\n    """Pad a text."""\n    return "z" * 1980 + text\n'
    assert kernel.run("from pi_kernel import tool\n" + cell).status == "ok"
    server.enqueue(
        tool_call_chunks([("pad", {"text": "x" * 270 + FAKE_KEY})]),
        Chunks(text_chunks(f"Your key is {FAKE_KEY}.", parts=40), delay=0.05),
    )
    start = len(kernel.iopub_log)
    result = kernel.run("%%pi\nPad my key", cell_id="pieces", timeout=30)
    assert result.status == "ok", result.text
    assert kernel.run("%pi history").status == "ok"
    updates = [m for m in kernel.iopub_log[start:] if m["msg_type"] == "update_display_data"]
    assert len(updates) >= 3, result.text[-600:]  # the live text really was redrawn while the key streamed
    assert key_runs(kernel.iopub_log[start:]) == []
    assert "Your key is ***." in result.text


def key_runs(messages: list[dict[str, Any]]) -> list[str]:
    """Runs of 12 characters of the key found anywhere in ``messages``."""
    text = json.dumps(messages, default=str)
    return [FAKE_KEY[i : i + 12] for i in range(len(FAKE_KEY) - 11) if FAKE_KEY[i : i + 12] in text]


def test_widget_frontend_is_detected(kernel: KernelDriver) -> None:
    assert "front-end: text" in kernel.run("%pi").text
    kernel.comm_open("jupyter.widget.control", metadata={"version": "1.0.0"})
    assert "front-end: widgets" in kernel.run("%pi").text


def test_keys_never_leave_the_kernel(kernel: KernelDriver) -> None:
    """Runs last: every iopub message of this module, and the %pi commands that show settings."""
    for command in ("%pi", "%pi model", "%pi models", "%pi usage", "%pi system", "%pi history"):
        assert kernel.run(command).status == "ok"
    leaked = [m["msg_type"] for m in kernel.iopub_log if key_runs([m])]
    assert leaked == []
    assert len(kernel.iopub_log) > 100  # the log really covers the module's traffic
