"""The Pi kernel end to end: jupyter_client → the real kernel → the fake OpenAI server over HTTP.

One kernel serves the whole module (tests leave its approval policy at
``ask`` and close the comms they open). The model is scripted per test with
``server.enqueue``; what the kernel sent is read back from ``server.bodies``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, HTTPError, text_chunks, tool_call_chunks
from kernel_helpers import FAKE_KEY, KernelDriver, approval_requests, kernel_env

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
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
        yield driver


@contextmanager
def approval_comm(kernel: KernelDriver) -> Iterator[str]:
    comm_id = kernel.comm_open("pi.approval")
    try:
        yield comm_id
    finally:
        kernel.comm_close(comm_id)
        kernel.run("pass")  # the close is handled before the next test's cells


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
    server.enqueue(text_chunks("Hello from the fake model.", parts=5))
    result = kernel.run("%%pi\nSay hello", cell_id="hello")
    assert result.status == "ok"
    assert "Hello from the fake model." in result.text
    assert server.last_body["messages"][-1]["content"][0]["text"] == "Say hello"
    assert {tool["function"]["name"] for tool in server.last_body["tools"]} >= {"add", "shout"}
    updates = [m for m in result.messages if m["msg_type"] == "update_display_data"]
    assert updates, "the answer is shown through one display updated in place"


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
    kernel.run("from pi_kernel.kernel.session import get_session; get_session().policy.always_allowed.clear()")


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
    server.enqueue(text_chunks("Remembered: blue."))
    assert kernel.run("%%pi\nMy colour is blue", cell_id="remember").status == "ok"
    path = tmp_path / "chat.jsonl"
    assert kernel.run(f"%pi save {path}").status == "ok"
    saved = path.read_text()
    assert FAKE_KEY not in saved and json.loads(saved.splitlines()[0])["model"].endswith("fake-model")
    kernel.run("%pi reset")
    assert "no conversation yet" in kernel.run("%pi history").text
    assert "Loaded 2 messages" in kernel.run(f"%pi load {path}").text
    server.enqueue(text_chunks("It is blue."))
    assert kernel.run("%%pi\nWhat is my colour?", cell_id="recall").status == "ok"
    users = [m["content"][0]["text"] for m in server.last_body["messages"] if m["role"] == "user"]
    assert users == ["My colour is blue", "What is my colour?"]


def test_headless_policies(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """No comm, no widgets: deny, auto, and ask without stdin (denied with how to allow it)."""
    kernel.run("%pi approve deny")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("Denied."))
    assert kernel.run("%%pi\nAdd", cell_id="h1").status == "ok"
    assert "approval policy: deny" in tool_result_texts(server.last_body)[-1]
    kernel.run("%pi approve auto")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("3."))
    assert kernel.run("%%pi\nAdd", cell_id="h2").status == "ok"
    assert tool_result_texts(server.last_body)[-1] == "3"
    kernel.run("%pi approve ask")
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("Nobody."))
    assert kernel.run("%%pi\nAdd", cell_id="h3").status == "ok"
    reason = tool_result_texts(server.last_body)[-1]
    assert "nobody can approve" in reason and "PI_APPROVAL=auto" in reason


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
    kernel.run("from pi_kernel.kernel.session import get_session; get_session().broker.timeout = 0.3")
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
    assert "[ ] shout" in kernel.run("%pi tools enable add").text
    kernel.run("%pi tools enable shout")
    assert "Available tools:" in kernel.run("%pi system").text
    assert kernel.run("%pi tools enable nosuchtool").status == "error"


def test_cell_options(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(text_chunks("No tools."))
    assert kernel.run("%%pi --no-tools --model other-model\nHi", cell_id="opts").status == "ok"
    assert "tools" not in server.last_body and server.last_body["model"] == "other-model"
    assert "fake-model" in kernel.run("%pi model").text  # --model applied to that cell only
    requests = len(server.bodies)
    server.enqueue(tool_call_chunks([("shout", {"text": "a"})]))  # a second request would get a 500
    result = kernel.run("%%pi --max-turns 1\nShout", cell_id="max")
    assert result.status == "ok" and len(server.bodies) == requests + 1
    assert "✓ shout" in result.text  # the tool ran; its result went to no second request
    bad = kernel.run("%%pi --max-turns zero\nHi")
    assert bad.status == "error" and "UsageError" in bad.text


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


def test_widget_frontend_is_detected(kernel: KernelDriver) -> None:
    assert "front-end: text" in kernel.run("%pi").text
    kernel.comm_open("jupyter.widget.control", metadata={"version": "1.0.0"})
    assert "front-end: widgets" in kernel.run("%pi").text


def test_keys_never_leave_the_kernel(kernel: KernelDriver) -> None:
    """Runs last: every iopub message of this module, and the %pi commands that show settings."""
    for command in ("%pi", "%pi model", "%pi models", "%pi usage", "%pi system", "%pi history"):
        assert kernel.run(command).status == "ok"
    leaked = [m["msg_type"] for m in kernel.iopub_log if FAKE_KEY in json.dumps(m, default=str)]
    assert leaked == []
    assert len(kernel.iopub_log) > 100  # the log really covers the module's traffic
