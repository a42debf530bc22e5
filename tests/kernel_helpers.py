"""Driving a real kernel from tests: a kernelspec in a temporary directory, a client that runs cells.

``KernelDriver`` starts a kernel (the Pi kernel, or a stock ipykernel) with
jupyter_client and runs cells the way a front-end does: an ``execute_request``
(with ``metadata.cellId`` when a cell id is given, as JupyterLab sends it),
then every iopub message until the kernel is idle again. While a cell runs,
``on_iopub`` sees each message and may answer (a comm message, an interrupt),
and ``on_input`` answers stdin prompts. Every iopub message is also kept in
``driver.iopub_log`` (so a test can assert a secret never left the kernel).
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

REPO = Path(__file__).resolve().parent.parent
FAKE_KEY = "sk-test-SECRET-0123456789abcdef"
"""The API key the kernels get; tests assert it never appears in any output."""

Message = dict[str, Any]


def write_test_kernelspecs(root: Path) -> Path:
    """``root/kernels/pi`` (this interpreter, the working tree on PYTHONPATH); returns ``root``
    (a ``JUPYTER_PATH`` entry)."""
    from pi_kernel.kernel.kernelspec import write_kernel_spec

    write_kernel_spec(root / "kernels" / "pi", sys.executable, {"PYTHONPATH": str(REPO)})
    return root


ADD_TOOL_CELL = '''
from pi_kernel import tool

@tool(approval="ask")
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b
'''
"""The cell most kernel tests run first: a tool that asks before every call."""


def kernel_env(base_url: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a test kernel: the fake server as the default model, a fake key."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PI_", "OPENAI_", "DEEPSEEK_"))}
    env["PYTHONPATH"] = str(REPO)
    env["PI_APPROVAL_TIMEOUT"] = "60"
    if base_url:
        env.update(OPENAI_BASE_URL=base_url, OPENAI_API_KEY=FAKE_KEY, PI_MODEL="fake-model")
    env.update(extra)
    return env


@dataclass
class CellResult:
    reply: Message
    """The ``execute_reply`` content."""
    messages: list[Message] = field(default_factory=list)
    """The iopub messages of this cell (parented by its request)."""

    @property
    def status(self) -> str:
        return str(self.reply.get("status"))

    @property
    def text(self) -> str:
        """Everything the cell showed as text: streams, the last state of each display, results, errors."""
        displays: dict[str, str] = {}
        parts: list[str] = []
        for message in self.messages:
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                parts.append(content["text"])
            elif kind in ("display_data", "update_display_data", "execute_result"):
                text = content.get("data", {}).get("text/plain", "")
                display_id = content.get("transient", {}).get("display_id")
                if display_id:
                    if display_id not in displays:
                        parts.append(f"\0{display_id}\0")
                    displays[display_id] = text
                else:
                    parts.append(text)
            elif kind == "error":
                parts.append("\n".join(content.get("traceback", [])) or content.get("evalue", ""))
        joined = "\n".join(parts)
        for display_id, text in displays.items():
            joined = joined.replace(f"\0{display_id}\0", text)
        return joined


class KernelDriver:
    def __init__(
        self,
        kernel_name: str = "pi",
        env: Mapping[str, str] | None = None,
        jupyter_path: str | Path | None = None,
        cwd: str | Path | None = None,
    ):
        dirs = [str(Path(jupyter_path) / "kernels")] if jupyter_path else None
        spec_manager = KernelSpecManager(kernel_dirs=dirs) if dirs else KernelSpecManager()
        self.manager = KernelManager(kernel_name=kernel_name, kernel_spec_manager=spec_manager)
        self.env = dict(env or kernel_env())
        self.cwd = str(cwd) if cwd is not None else None
        """The kernel's working directory (where it reads ``.env``); default: this process's."""
        self.client: Any = None
        self.owns_kernel = True
        """``stop`` shuts the kernel down (``False`` for a driver from ``another_client``)."""
        self.iopub_log: list[Message] = []
        self.comm_messages: list[Message] = []
        """``comm_msg`` contents the kernel sent (any comm)."""

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 60) -> KernelDriver:
        self.manager.start_kernel(env=self.env, **({"cwd": self.cwd} if self.cwd else {}))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=timeout)
        self._drain_iopub()
        return self

    def another_client(self, timeout: float = 60) -> KernelDriver:
        """A second front-end on this kernel (like ``jupyter console --existing``): its own client and
        session id; its ``stop`` closes only its channels."""
        from jupyter_client.blocking import BlockingKernelClient

        other = KernelDriver(env=self.env)
        other.manager, other.owns_kernel = self.manager, False
        other.client = BlockingKernelClient(connection_file=self.manager.connection_file)
        other.client.load_connection_file()
        other.client.start_channels()
        other.client.wait_for_ready(timeout=timeout)
        other._drain_iopub()
        return other

    def stop(self) -> None:
        if self.client is not None:
            self.client.stop_channels()
        if self.owns_kernel:
            self.manager.shutdown_kernel(now=True)

    def __enter__(self) -> KernelDriver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def interrupt(self) -> None:
        self.manager.interrupt_kernel()

    def restart(self, timeout: float = 60) -> None:
        """A new kernel process on the same connection (the front-end's Restart)."""
        self.manager.restart_kernel(now=True)
        self.client.wait_for_ready(timeout=timeout)
        self._drain_iopub()

    # -- messages -----------------------------------------------------------------------------

    def send_shell(
        self,
        msg_type: str,
        content: dict[str, Any],
        metadata: dict[str, Any] | None = None,
        subshell_id: str | None = None,
    ) -> str:
        message = self.client.session.msg(msg_type, content, metadata=metadata or {})
        if subshell_id:
            message["header"]["subshell_id"] = subshell_id
        self.client.shell_channel.send(message)
        return str(message["header"]["msg_id"])

    def create_subshell(self) -> str:
        """A kernel subshell (its own thread in the kernel), as JupyterLab makes for comms and consoles."""
        self.client.control_channel.send(self.client.session.msg("create_subshell_request", {}))
        reply = self.client.get_control_msg(timeout=10)
        return str(reply["content"]["subshell_id"])

    def execute_request(
        self, code: str, cell_id: str | None = None, allow_stdin: bool = False, subshell_id: str | None = None
    ) -> str:
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": allow_stdin,
            "stop_on_error": True,
        }
        return self.send_shell("execute_request", content, {"cellId": cell_id} if cell_id else {}, subshell_id)

    def comm_open(self, target: str, data: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None) -> str:
        comm_id = uuid.uuid4().hex
        self.send_shell("comm_open", {"comm_id": comm_id, "target_name": target, "data": data or {}}, metadata)
        return comm_id

    def comm_send(self, comm_id: str, data: dict[str, Any]) -> None:
        self.send_shell("comm_msg", {"comm_id": comm_id, "data": data})

    def comm_close(self, comm_id: str) -> None:
        self.send_shell("comm_close", {"comm_id": comm_id, "data": {}})

    def run(
        self,
        code: str,
        *,
        cell_id: str | None = None,
        allow_stdin: bool = False,
        timeout: float = 60,
        on_iopub: Callable[[Message], None] | None = None,
        on_input: Callable[[str], str | None] | None = None,
        on_poll: Callable[[], None] | None = None,
    ) -> CellResult:
        """Run a cell to its end; ``on_iopub`` / ``on_input`` / ``on_poll`` (every 50 ms) act while it runs."""
        msg_id = self.execute_request(code, cell_id, allow_stdin)
        result = CellResult({})
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cell did not finish in {timeout} s: {code[:80]!r}; got {result.text[-500:]!r}")
            if on_input is not None:
                self._answer_stdin(on_input)
            if on_poll is not None:
                on_poll()
            try:
                message = self.client.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            self._log(message)
            if message["parent_header"].get("msg_id") == msg_id:
                result.messages.append(message)
                if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                    break
            if on_iopub is not None:
                on_iopub(message)
        result.reply = self._shell_reply(msg_id, deadline)
        return result

    def wait_iopub(self, predicate: Callable[[Message], bool], timeout: float = 30) -> Message:
        """Read iopub until a message satisfies ``predicate`` (for tests that drive by hand)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.client.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            self._log(message)
            if predicate(message):
                return message
        raise TimeoutError("no matching iopub message")

    def _answer_stdin(self, on_input: Callable[[str], str | None]) -> None:
        try:
            request = self.client.get_stdin_msg(timeout=0)
        except queue.Empty:
            return
        if request["msg_type"] == "input_request":
            answer = on_input(request["content"]["prompt"])
            if answer is not None:  # None: leave the question unanswered
                self.client.input(answer)

    def _shell_reply(self, msg_id: str, deadline: float) -> Message:
        while time.monotonic() < deadline:
            try:
                reply = self.client.get_shell_msg(timeout=0.1)
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return dict(reply["content"])
        raise TimeoutError("no execute_reply")

    def _log(self, message: Message) -> None:
        self.iopub_log.append(message)
        if message["msg_type"] == "comm_msg":
            self.comm_messages.append(message["content"])

    def _drain_iopub(self) -> None:
        while True:
            try:
                self._log(self.client.get_iopub_msg(timeout=0.2))
            except queue.Empty:
                return


@contextmanager
def approval_comm(kernel: KernelDriver) -> Iterator[str]:
    """A ``pi.approval`` comm, so that calls wait for an answer instead of being denied at once."""
    comm_id = kernel.comm_open("pi.approval")
    try:
        yield comm_id
    finally:
        kernel.comm_close(comm_id)
        kernel.run("pass")  # the close is handled before the next test's cells


def approval_requests(message: Message) -> dict[str, Any] | None:
    """The request of a ``pi.approval`` ``requested`` comm message, else ``None``."""
    if message["msg_type"] != "comm_msg":
        return None
    data = message["content"].get("data", {})
    return data.get("request") if data.get("event") == "requested" else None


NO_RESULT_TEXT = "No result provided"
"""What the provider fills in for a tool call the kernel left without a result (it must never be needed)."""


def assert_one_result_per_call(messages: list[dict[str, Any]], expected_calls: int | None = None) -> None:
    """A replayed chat history (a request body's ``messages``) a real OpenAI server accepts: each assistant
    message's tool calls are answered by exactly one tool message each, right after it; no tool message
    answers anything else; and no result is the provider's stand-in for a missing one."""
    calls_seen = 0
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            previous = next(m for m in reversed(messages[:index]) if m["role"] != "tool")
            assert message["tool_call_id"] in [c["id"] for c in previous.get("tool_calls") or []], message
            assert message["content"] != NO_RESULT_TEXT, f"the kernel lost the result of {message['tool_call_id']}"
        calls = [call["id"] for call in message.get("tool_calls") or []]
        calls_seen += len(calls)
        answers = []
        for following in messages[index + 1 :]:
            if following["role"] != "tool":
                break
            answers.append(following["tool_call_id"])
        if calls:
            assert sorted(answers) == sorted(calls), (calls, answers)
    if expected_calls is not None:
        assert calls_seen == expected_calls, f"{calls_seen} tool calls replayed, expected {expected_calls}"


CONVERSATION_CHECK = """
from pi_kernel.kernel.extension import get_session as _get_session
_messages = _get_session().agent.state.messages
# An assistant message that ended in error or abort never runs its (possibly half-written) calls and is
# left out of every replayed history, as in pi: its calls are not calls to answer.
_ran = [m for m in _messages if m.role == "assistant" and m.stop_reason not in ("error", "aborted")]
_calls = [c.id for m in _ran for c in m.tool_calls]
_results = [m.tool_call_id for m in _messages if m.role == "tool_result"]
print("complete" if sorted(_calls) == sorted(_results) else f"incomplete {_calls} {_results}", len(_calls))
"""


def conversation_tool_calls(kernel: KernelDriver) -> int:
    """Asserts the session's own conversation (not the provider's repaired replay) gives every tool call
    exactly one result; returns how many tool calls it holds."""
    printed = kernel.run(CONVERSATION_CHECK).text.split()
    assert printed[0] == "complete", printed
    return int(printed[-1])


@contextlib.contextmanager
def setup_kernel(base_url: str, jupyter_path: str, setup: str) -> Iterator[KernelDriver]:
    """A Pi kernel on the fake server at ``base_url`` that has run ``setup`` (a module fixture's body)."""
    with KernelDriver(env=kernel_env(base_url), jupyter_path=jupyter_path) as driver:
        assert driver.run(setup).status == "ok"
        yield driver
