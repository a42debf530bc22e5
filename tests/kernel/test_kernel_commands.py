"""The README's ``%pi`` commands for a waiting call, typed in a console while a ``%%pi`` cell waits.

A person at ``jupyter console --existing`` (or a JupyterLab console, which
runs on a kernel subshell) answers a call the notebook's cell waits for: the
test's cell runs on the main shell with a ``pi.approval`` comm open (so the
call waits, as it does for a widget front-end), and when the approval request
arrives the command is sent on a subshell, typed exactly as a person would.
Also: ``%pi help`` lists what the README lists; a ``%%pi`` turn is a task on
the kernel's event loop, so a cell that cannot await there (``%autoawait
off``, a ``%%pi`` cell inside ``%%capture``) says what to do instead of
running; outside a kernel a ``%autoawait off`` cell blocks the shell, so its
approvals are answered on stdin or denied at once with what to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import (
    ADD_TOOL_CELL,
    REPO,
    KernelDriver,
    approval_comm,
    approval_requests,
    assert_one_result_per_call,
    kernel_env,
)

pytestmark = pytest.mark.kernel

SETUP = ADD_TOOL_CELL


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
        yield driver


def run_answered_from_a_console(kernel: KernelDriver, prompt: str, command: str, cell_id: str) -> tuple[Any, str]:
    """Run ``%%pi prompt`` and, at its first approval request, ``command`` on a subshell; returns the
    cell's result and what the command printed."""
    subshell = kernel.create_subshell()
    sent: dict[str, str] = {}

    def on_iopub(message: dict[str, Any]) -> None:
        if approval_requests(message) and not sent:
            sent["id"] = kernel.execute_request(command, subshell_id=subshell)
        elif (
            sent
            and message["parent_header"].get("msg_id") == sent["id"]
            and message["msg_type"]
            in (
                "stream",
                "error",
            )
        ):
            content = message["content"]
            sent["printed"] = sent.get("printed", "") + content.get("text", content.get("evalue", ""))

    with approval_comm(kernel):
        result = kernel.run(f"%%pi\n{prompt}", cell_id=cell_id, on_iopub=on_iopub, timeout=30)
    return result, sent.get("printed", "")


def tool_results(server: FakeOpenAI) -> list[str]:
    return [message["content"] for message in server.last_body["messages"] if message["role"] == "tool"]


def test_deny_with_a_reason_typed_as_a_person_would(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 1})]), text_chunks("Understood."))
    command = "%pi deny call_0 Don't call add: it's 2, use mental arithmetic"
    result, printed = run_answered_from_a_console(kernel, "Add 1 and 1", command, "deny")
    assert result.status == "ok" and "Understood." in result.text
    assert printed.strip() == "deny: call_0"
    assert tool_results(server)[-1] == "Don't call add: it's 2, use mental arithmetic"  # apostrophes kept
    assert_one_result_per_call(server.last_body["messages"])


def test_allow_with_edited_arguments(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 1})]), text_chunks("It is 15."))
    command = '%pi allow call_0 --args {"a": 10, "b": 5}'  # unquoted JSON with spaces, as typed
    result, printed = run_answered_from_a_console(kernel, "Add 1 and 1", command, "args")
    assert result.status == "ok" and printed.strip() == "approve: call_0"
    assert tool_results(server)[-1] == "15"  # the tool ran with the edited arguments


def test_allow_always_stops_asking_in_later_turns(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("3."))
    result, printed = run_answered_from_a_console(kernel, "Add 1 and 2", "%pi allow call_0 --always", "always1")
    assert result.status == "ok" and printed.strip() == "always: call_0" and tool_results(server)[-1] == "3"
    server.enqueue(tool_call_chunks([("add", {"a": 3, "b": 4})]), text_chunks("7."))
    try:
        with approval_comm(kernel):
            asked: list[Any] = []
            later = kernel.run(
                "%%pi\nAdd 3 and 4", cell_id="always2", on_iopub=lambda m: asked.append(approval_requests(m))
            )
        assert later.status == "ok" and tool_results(server)[-1] == "7"
        assert [request for request in asked if request] == []  # nobody was asked this time
        assert "always allowed: add" in kernel.run("%pi approve").text
        # A stricter mode chosen later wins over the earlier "always allow": read-only means nothing writes.
        server.enqueue(tool_call_chunks([("add", {"a": 5, "b": 6})]), text_chunks("Refused."))
        assert kernel.run("%%pi --approve read-only\nAdd 5 and 6", cell_id="always3").status == "ok"
        assert "this session is read-only" in tool_results(server)[-1]
        for mode, refusal in (("read-only", "this session is read-only"), ("deny", "approval policy: deny")):
            kernel.run(f"%pi approve {mode}")
            server.enqueue(tool_call_chunks([("add", {"a": 5, "b": 6})]), text_chunks("Refused."))
            assert kernel.run("%%pi\nAdd 5 and 6", cell_id=f"always-{mode}").status == "ok"
            assert refusal in tool_results(server)[-1]
    finally:
        kernel.run("%pi approve ask")
        kernel.run("from pi_kernel.kernel.extension import get_session; get_session().policy.always_allowed.clear()")


def test_deny_all_denies_each_waiting_call_with_the_reason(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """Preflight is sequential (as in pi), so the two calls wait one after the other; ``%pi deny all`` is typed
    at each request and answers whatever waits."""
    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]), text_chunks("OK."))
    subshell = kernel.create_subshell()
    commands: dict[str, str] = {}
    printed: dict[str, str] = {}

    def on_iopub(message: dict[str, Any]) -> None:
        request = approval_requests(message)
        if request is not None and request["tool_call_id"] not in commands:
            commands[request["tool_call_id"]] = kernel.execute_request("%pi deny all Not today", subshell_id=subshell)
        parent = message["parent_header"].get("msg_id")
        if parent in commands.values() and message["msg_type"] in ("stream", "error"):
            content = message["content"]
            printed[parent] = printed.get(parent, "") + content.get("text", content.get("evalue", ""))

    with approval_comm(kernel):
        result = kernel.run("%%pi\nAdd twice", cell_id="deny-all", on_iopub=on_iopub, timeout=30)
    assert result.status == "ok" and "OK." in result.text
    assert sorted(commands) == ["call_0", "call_1"]
    assert sorted(text.strip() for text in printed.values()) == ["deny: call_0", "deny: call_1"]
    assert tool_results(server)[-2:] == ["Not today", "Not today"]
    assert_one_result_per_call(server.last_body["messages"])


def test_a_base_url_with_credentials_is_shown_masked(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    host = server.base_url.split("://", 1)[1]
    env = kernel_env(server.base_url, OPENAI_BASE_URL=f"http://proxy-user:hunter2-secret@{host}")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        shown = "\n".join(driver.run(command).text for command in ("%pi model", "%pi models", "%pi"))
    assert "hunter2-secret" not in shown and "proxy-user" not in shown
    assert f"http://***@{host}" in shown  # the rest of the URL is still there to check
    assert "fake-model" in shown


def test_help_lists_every_command_the_readme_lists(kernel: KernelDriver) -> None:
    readme = (REPO / "README.md").read_text()
    start = readme.index("| magic | what it does |")  # the README's table of magics
    block = readme[start : readme.index("\n\n", start)].replace("\\|", "|")
    commands = set(re.findall(r"(?<!%)%pi (\w+)", block))
    options = set(re.findall(r"--[a-z][a-z-]*", block))
    assert {"model", "allow", "deny", "save", "load", "system"} <= commands and "--args" in options
    shown = kernel.run("%pi help").text
    assert {name for name in commands if f"%pi {name}" not in shown} == set()
    assert {option for option in options if option not in shown} == set()
    for usage in ("%pi allow ID|all [--always] [--args JSON]", "%pi deny ID|all [REASON]"):
        assert usage in block and usage in shown


def test_pi_lines_are_not_expanded_like_other_magics(kernel: KernelDriver) -> None:
    """IPython would expand ``{...}`` / ``$name`` in a magic's line: ``{"a":1}`` would become ``a``."""
    kernel.run("name = 'add'")
    shown = kernel.run('%pi allow nothing --args {"a":1}').text
    assert "nothing waits for approval under 'nothing'" in shown
    assert "no tool named '$name'" in kernel.run("%pi tools enable $name").text


def test_autoawait_off_in_a_kernel_says_to_turn_it_on(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """A turn is a task on the kernel's event loop (issue 25, one way to run a cell). With ``%autoawait off``
    the cell would block that loop, so it does not run: it says to turn autoawait back on, and the model is
    not asked. (Replaces the private-loop run answered on stdin, which now holds outside a kernel only:
    ``test_autoawait_off_outside_a_kernel_answers_on_stdin_or_denies_at_once``.) The same holds for the
    ``%pi`` lines that wait on the loop."""
    assert kernel.run("%autoawait off").status == "ok"
    try:
        requests = len(server.chat_requests)
        refused = kernel.run("%%pi\nAdd 1 and 2", cell_id="blocking")
        assert refused.status == "error" and refused.reply["ename"] == "PiUsageError", refused.text
        assert "top-level await is off here (%autoawait off)" in refused.text
        assert "run `%autoawait on` (the default) and re-run the cell" in refused.text
        compacting = kernel.run("%pi compact")
        assert compacting.status == "error" and "run `%pi compact` as a cell of its own" in compacting.text
        assert len(server.chat_requests) == requests
    finally:
        kernel.run("%autoawait on")
    server.enqueue(text_chunks("Back on."))
    assert "Back on." in kernel.run("%%pi\nsay it", cell_id="autoawait-on").text


AUTOAWAIT_OFF_IPYTHON = """
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("%load_ext pi_kernel")
shell.run_cell(SETUP)
shell.run_cell("%autoawait off")
result = shell.run_cell("%%pi\\nAdd 1 and 2")
print("cell ok:", result.success)
"""


def test_autoawait_off_outside_a_kernel_answers_on_stdin_or_denies_at_once(server: FakeOpenAI) -> None:
    """IPython without a kernel, ``%autoawait off``: the turn runs to its end on IPython's loop and blocks
    the shell, so only stdin can answer; with no terminal the call is denied at once with what to do."""
    import subprocess
    import sys

    server.enqueue(tool_call_chunks([("add", {"a": 1, "b": 2})]), text_chunks("Not run."))
    script = f"SETUP = {SETUP!r}\n{AUTOAWAIT_OFF_IPYTHON}"
    env = kernel_env(server.base_url, PI_APPROVAL="ask")
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL
    )
    assert "cell ok: True" in ran.stdout and "Not run." in ran.stdout, ran.stdout[-2000:] + ran.stderr[-2000:]
    reason = tool_results(server)[-1]
    assert reason.startswith('Tool "add" needs approval, but this %%pi cell runs with %autoawait off')
    assert "Run `%autoawait on`" in reason and "%pi approve add=auto" in reason


def test_a_pi_cell_inside_capture_says_to_run_it_alone(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """``%%capture`` runs its body as a cell of its own while the kernel's loop runs the outer cell: a
    ``%%pi`` body cannot await on that loop ("This event loop is already running", r14a review). It used to
    run on a private loop in a worker thread; now that a turn is a task on the kernel's loop (issue 25), it
    says so and what to do, without a RuntimeError or a traceback, and the next cell still awaits."""
    requests = len(server.chat_requests)
    result = kernel.run("%%capture cap\n%%pi\nsay ok", cell_id="captured")
    assert "RuntimeError" not in result.text, result.text[-300:]
    assert len(server.chat_requests) == requests  # the model was not asked
    shown = kernel.run("print(cap.stdout, [o.data for o in cap.outputs])").text
    assert "run the %%pi cell as a cell of its own" in result.text + shown
    server.enqueue(text_chunks("Not captured."))
    assert "Not captured." in kernel.run("%%pi\nsay it", cell_id="after").text  # the next cell still awaits


def test_a_comm_handler_that_raises_does_not_stop_later_pi_cells(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """ipykernel fires ``pre_execute`` before a comm handler and skips ``post_execute`` when it raises (a
    user's ``comm.on_msg(lambda m: 1/0)``). The cell nesting is counted on ``pre_run_cell`` /
    ``post_run_cell``, so such a handler does not leave every later ``%%pi`` cell "inside a cell"."""
    kernel.run(
        "def _raising_target(comm, msg):\n    comm.on_msg(lambda message: 1 / 0)\n"
        "get_ipython().kernel.comm_manager.register_target('raising.target', _raising_target)"
    )
    comm_id = kernel.comm_open("raising.target", {})
    kernel.run("pass")
    for _ in range(2):
        kernel.comm_send(comm_id, {"x": 1})
    kernel.run("pass")
    server.enqueue(text_chunks("Still awaiting."))
    result = kernel.run("%%pi\nsay it", cell_id="after-raising-handler", timeout=60)
    assert "busy running the cell" not in result.text, result.text[-300:]
    assert "Still awaiting." in result.text
