"""The outgoing choke point (``pi_kernel.kernel.outgoing``): what the kernel sends is masked, the user's own
Python cells are left alone, and ``%unload_ext`` puts ``Session.send`` back.

A stock ipykernel with ``%load_ext pi_kernel``: the Pi kernel attaches the same way (``extension.attach``).
Its own iopub log holds the key on purpose, so it is not the kernel of the modules that check no key ever
leaves (test_kernel_agent, test_kernel_extension).

A key sent in pieces leaves a pi cell masked (real kernel).

Found by an adversary: in a pi cell, a key printed in 10-character pieces, each its own ``stream`` message,
or split by empty markup tags, reached the front-end whole. Each pi request's stdout and stderr now go
through one ``MaskedStream`` (what may begin a key waits for the next piece), and the mask reads markup
tags and separators out of the way. The user's own cells are left alone.

Pi's output stays masked however pi is run from a cell whose code does not name it.

The outgoing mask (``pi_kernel.kernel.outgoing``) judges a cell from its code and also claims a cell as pi's when
pi runs in it; the ``%pi`` printer masks as it prints, for output captured in the cell before it is sent. Each test
runs a real Pi kernel against the scripted OpenAI server; the model echoes the key.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import FAKE_KEY, KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

PRINT_KEY = "import os\nprint('key:', os.environ['OPENAI_API_KEY'])"


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    root = tmp_path_factory.mktemp("stock")
    spec = root / "kernels" / "stock"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "stock", "language": "python"}))
    with KernelDriver("stock", env=kernel_env("http://127.0.0.1:9/v1"), jupyter_path=root) as driver:
        assert driver.run("%load_ext pi_kernel").status == "ok"
        yield driver


def test_what_a_pi_cell_sends_is_masked_on_its_way_out(stock: KernelDriver) -> None:
    """Output no view composed (a cell that talks to pi prints the key itself) still leaves masked: on
    iopub (``stream``, the ``execute_input`` echo), on stdin (an ``input_request``) and in comm messages."""
    printed = stock.run("import pi_kernel\n" + PRINT_KEY)
    assert printed.text.strip() == "key: ***"
    with_magic = stock.run("%pi\n" + PRINT_KEY)
    assert with_magic.status == "ok" and "key: ***" in with_magic.text and FAKE_KEY not in with_magic.text
    prompts: list[str] = []
    asked = stock.run(
        "import os, pi_kernel\nanswer = input('key ' + os.environ['OPENAI_API_KEY'] + '? ')",
        allow_stdin=True,
        on_input=lambda prompt: prompts.append(prompt) or "y",
    )
    assert asked.status == "ok" and prompts == ["key ***? "]
    opened = stock.run(
        "import os, pi_kernel\nfrom ipykernel.comm import Comm\n"
        "comm = Comm(target_name='anything', data={'key': os.environ['OPENAI_API_KEY']})"
    )
    assert opened.status == "ok"
    comm_opens = [m for m in stock.iopub_log if m["msg_type"] == "comm_open"]
    assert comm_opens and comm_opens[-1]["content"]["data"] == {"key": "***"}  # a widget's state, say
    pi_messages = [m for m in stock.iopub_log if m["parent_header"].get("msg_id") in _ids(printed, with_magic)]
    assert pi_messages and FAKE_KEY not in json.dumps([m["content"] for m in pi_messages])


def test_a_pi_command_error_quoting_a_key_is_masked_in_its_output_and_its_reply(stock: KernelDriver) -> None:
    result = stock.run(f"%pi allow {FAKE_KEY}")
    assert result.status == "error" and "nothing waits for approval under '***'" in result.text
    assert FAKE_KEY not in json.dumps(result.reply) and FAKE_KEY not in json.dumps(
        [m["content"] for m in result.messages]
    )


TERMINAL_IPYTHON = f"""
import os
os.environ["OPENAI_API_KEY"] = {FAKE_KEY!r}
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("%load_ext pi_kernel")
shell.run_cell("%pi allow {FAKE_KEY}")
shell.run_cell("%pi model https://me:hunter2-secret@example.com/v1")
shell.run_cell({"import pi_kernel" + chr(10) + PRINT_KEY!r})
shell.run_cell({PRINT_KEY!r})
"""


def test_ipython_without_a_kernel_masks_what_pi_cells_print() -> None:
    """No kernel, no messages: the terminal's ``sys.stdout`` / ``sys.stderr`` mask while a pi cell runs."""
    env = kernel_env()
    ran = subprocess.run([sys.executable, "-c", TERMINAL_IPYTHON], capture_output=True, text=True, timeout=60, env=env)
    lines = ran.stdout.splitlines()
    assert "UsageError: nothing waits for approval under '***' (waiting: none)" in lines, ran.stdout + ran.stderr
    assert "hunter2-secret" not in ran.stdout and "https://***@example.com/v1" in ran.stdout
    assert lines[-2:] == ["key: ***", f"key: {FAKE_KEY}"]  # a cell naming pi_kernel, then the user's own


TERMINAL_HELPER = f"""
import os
os.environ["OPENAI_API_KEY"] = {FAKE_KEY!r}
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("%load_ext pi_kernel")
shell.run_cell("def allow(name):" + chr(10) + "    get_ipython().run_line_magic('pi', 'allow ' + name)")
shell.run_cell("import os")
shell.run_cell("allow(os.environ['OPENAI_API_KEY'])")
shell.run_cell({PRINT_KEY!r})
"""


def test_ipython_without_a_kernel_masks_pi_run_from_a_helper() -> None:
    """The terminal too: a cell is pi's once pi runs in it, whatever its code names."""
    ran = subprocess.run(
        [sys.executable, "-c", TERMINAL_HELPER], capture_output=True, text=True, timeout=60, env=kernel_env()
    )
    lines = ran.stdout.splitlines()
    assert "UsageError: nothing waits for approval under '***' (waiting: none)" in lines, ran.stdout + ran.stderr
    assert lines[-1] == f"key: {FAKE_KEY}"  # the next cell, the user's own, is left alone again


TERMINAL_CAPTURE = f"""
import os
os.environ["OPENAI_API_KEY"] = {FAKE_KEY!r}
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("%load_ext pi_kernel")
shell.run_cell("%%capture cap" + chr(10) + "%pi allow {FAKE_KEY}")
shell.run_cell("print('captured:', repr(cap.stdout))")
"""


def test_ipython_without_a_kernel_masks_a_captured_usage_error() -> None:
    """A usage error is printed on the cell's ``sys.stdout``: captured (``%%capture``), still masked, shown
    later by the user's own cell."""
    ran = subprocess.run(
        [sys.executable, "-c", TERMINAL_CAPTURE], capture_output=True, text=True, timeout=60, env=kernel_env()
    )
    assert "captured:" in ran.stdout and "under '***'" in ran.stdout, ran.stdout + ran.stderr
    assert FAKE_KEY not in ran.stdout + ran.stderr


def test_the_users_own_python_cells_are_left_alone(stock: KernelDriver) -> None:
    assert stock.run(PRINT_KEY).text.strip() == f"key: {FAKE_KEY}"  # README: prints what you asked for
    code = f"secret = {FAKE_KEY!r}\nprint(secret)"
    typed = stock.run(code)
    assert typed.text.strip() == FAKE_KEY
    assert [m["content"]["code"] for m in typed.messages if m["msg_type"] == "execute_input"] == [code]


HELPER = """
from pi_kernel.kernel.extension import get_session
from pi_kernel.ai import UserMessage, TextContent
get_session().replace_conversation([UserMessage([TextContent("connect to postgres://me:hunter2pw@db/x")])])
def hist():
    get_ipython().run_line_magic("pi", "history")
"""


def test_pi_output_from_a_cell_that_names_no_pi_is_masked(stock: KernelDriver) -> None:
    """A cell becomes pi's when pi runs in it: a helper calling ``%pi history`` names neither ``%pi`` nor
    ``pi_kernel``, yet the history it prints leaves masked (so does a command error)."""
    assert stock.run(HELPER).status == "ok"
    direct = stock.run("%pi history")
    assert "postgres://***@db/x" in direct.text and "hunter2pw" not in direct.text
    helper = stock.run("hist()")
    assert "postgres://" in helper.text and "hunter2pw" not in helper.text
    failed = stock.run(f"get_ipython().run_line_magic(magic_name='pi', line='allow {FAKE_KEY}')")
    assert failed.status == "error" and "'***'" in failed.text
    shown = [m["content"] for m in failed.messages if m["msg_type"] != "execute_input"]  # the echo: as typed
    assert FAKE_KEY not in json.dumps(shown) + json.dumps(failed.reply)


def test_a_users_own_widget_state_is_left_alone(stock: KernelDriver) -> None:
    """Comm messages are masked only for pi's comms: the user's own widget keeps its value."""
    ran = stock.run(
        "from ipykernel.comm import Comm\nmine = Comm(target_name='mine', data={'value': 'postgres://me:pw@db/x'})"
    )
    assert ran.status == "ok"
    opens = [m for m in stock.iopub_log if m["msg_type"] == "comm_open"]
    assert opens[-1]["content"]["data"] == {"value": "postgres://me:pw@db/x"}


def test_unload_puts_the_session_send_back(stock: KernelDriver) -> None:
    assert stock.run("'send' in vars(get_ipython().kernel.session)").text.strip() == "True"
    assert stock.run("%unload_ext pi_kernel").status == "ok"
    assert stock.run("'send' in vars(get_ipython().kernel.session)").text.strip() == "False"
    assert stock.run("import pi_kernel\n" + PRINT_KEY).text.strip() == f"key: {FAKE_KEY}"  # nothing masks now
    assert stock.run("%load_ext pi_kernel").status == "ok"
    assert stock.run("import pi_kernel\n" + PRINT_KEY).text.strip() == "key: ***"


def _ids(*results: object) -> set[str]:
    return {m["parent_header"].get("msg_id") for result in results for m in getattr(result, "messages", [])}


PI_COMM = """
import os, pi_kernel
from ipykernel.comm import Comm
old = Comm(target_name='pi-like')
old.on_msg(lambda msg: old.send({'echo': os.environ['OPENAI_API_KEY']}))
"""


def _echo_of(stock: KernelDriver, comm_id: str) -> dict:
    stock.iopub_log.clear()
    stock.comm_send(comm_id, {"click": 1})
    message = stock.wait_iopub(lambda m: m["msg_type"] == "comm_msg" and m["content"].get("comm_id") == comm_id)
    return message["content"]["data"]


def test_a_pi_comm_stays_masked_however_many_comms_pi_opens_later(stock: KernelDriver) -> None:
    """A comm opened under a pi cell is pi's; its messages (here: a reply to a click, as a pi widget or the
    pi.approval comm answers) are masked, however many comms pi opens later (each widget, Layout and Style
    model is one): pi's comms are not forgotten as old cells are."""
    assert stock.run(PI_COMM).status == "ok"
    comm_id = stock.run("print(old.comm_id)").text.strip()
    assert _echo_of(stock, comm_id) == {"echo": "***"}  # pi's comm: masked
    assert stock.run("import pi_kernel\nmany = [Comm(target_name='w') for _ in range(1001)]").status == "ok"
    assert _echo_of(stock, comm_id) == {"echo": "***"}, "the key left the kernel on pi's comm"


def test_a_user_cell_naming_api_kernel_is_the_users_own(stock: KernelDriver) -> None:
    """A cell is pi's when it names ``pi_kernel`` as a word, not inside another name (``api_kernel``): the
    user's own cell prints what it was asked for (README)."""
    assert stock.run("api_kernel = 'gateway'\n" + PRINT_KEY).text.strip() == f"key: {FAKE_KEY}"


def test_a_reload_after_many_pi_widgets_still_shows_the_first_pi_widget_masked(stock: KernelDriver) -> None:
    """As tests/test_widgets_kernel.py::test_the_widget_managers_states_show_pi_widgets_masked, but after the
    pi cells opened 400 more widgets (an HTML widget is 3 comms: itself, its Layout, its Style)."""
    first = "import os, pi_kernel, ipywidgets\npis = ipywidgets.Text(value=os.environ['OPENAI_API_KEY'])"
    assert stock.run(first).status == "ok"
    assert stock.run("import pi_kernel, ipywidgets\nlater = [ipywidgets.HTML('x') for _ in range(400)]").status == "ok"
    stock.iopub_log.clear()
    control = stock.comm_open("jupyter.widget.control", metadata={"version": "1.0.0"})
    stock.comm_send(control, {"method": "request_states"})
    reply = stock.wait_iopub(
        lambda m: m["msg_type"] == "comm_msg" and (m["content"].get("data") or {}).get("method") == "update_states"
    )
    assert FAKE_KEY not in json.dumps(reply["content"]["data"]["states"]), "pi's widget state left unmasked"


WAITING = """
import asyncio, os, pi_kernel
from ipykernel.comm import Comm
from pi_kernel.kernel.extension import get_session
from pi_kernel.tools.approval import ApprovalRequest
many = [Comm(target_name='w') for _ in range(COUNT)]  # a long session's pi widgets
request = ApprovalRequest('call_k', 'python', {'code': 'key = ' + repr(os.environ['OPENAI_API_KEY'])}, 'python')
waiting = asyncio.ensure_future(get_session().broker.request(request))
"""


@pytest.mark.parametrize("count", [10, 1001])
def test_the_approval_comm_never_shows_a_waiting_calls_key(stock: KernelDriver, count: int) -> None:
    """A ``pi.approval`` comm is claimed once, when it opens; its ``pending`` answer and ``resolved`` broadcast
    (the waiting call's arguments) stay masked however many comms pi opens after it."""
    approval = stock.comm_open("pi.approval")
    assert stock.run("pass").status == "ok"
    assert stock.run(WAITING.replace("COUNT", str(count))).status == "ok"
    stock.iopub_log.clear()
    stock.comm_send(approval, {"action": "pending"})
    pending = stock.wait_iopub(lambda m: m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == approval)
    stock.comm_send(approval, {"tool_call_id": "call_k", "decision": "deny"})
    resolved = stock.wait_iopub(
        lambda m: m["msg_type"] == "comm_msg" and m["content"]["data"].get("event") not in (None, "ack", "pending")
    )
    stock.comm_close(approval)
    assert FAKE_KEY not in json.dumps(pending["content"]), "pending answer"
    assert FAKE_KEY not in json.dumps(resolved["content"]), "resolved broadcast"


# --------------------------------------------------------------------------- kernel outgoing pieces


PIECES = """import pi_kernel, os, sys, time
key = os.environ["OPENAI_API_KEY"]
for start in range(0, len(key), 10):
    sys.{stream}.write(key[start : start + 10]{after})
    sys.{stream}.flush()
    time.sleep(0.15)
print("end")
"""


@pytest.fixture(scope="module")
def kernel(pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env("http://127.0.0.1:9/v1"), jupyter_path=pi_jupyter_path) as driver:
        yield driver


def _shown(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """Everything the front-end got (streams and displays, in order) and how many stream messages."""
    parts: list[str] = []
    streams = 0
    for message in messages:
        content = message["content"]
        if message["msg_type"] == "stream":
            parts.append(content["text"])
            streams += 1
        elif message["msg_type"] in ("display_data", "execute_result"):
            parts += [str(value) for value in content.get("data", {}).values()]
    return "".join(parts), streams


def _assert_masked(shown: str) -> None:
    plain = re.sub(r"<[^>]*>", "", shown)
    for start in range(len(FAKE_KEY) - 11):
        assert FAKE_KEY[start : start + 12] not in plain, shown


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("after", ["", " + '<b></b>'", " + '<i></i>'[:0]"])
def test_a_key_in_ten_character_messages_is_masked(kernel: KernelDriver, stream: str, after: str) -> None:
    result = kernel.run(PIECES.format(stream=stream, after=after))
    assert result.status == "ok"
    shown, streams = _shown(result.messages)
    assert streams >= 1 and shown.rstrip().endswith("end") and "***" in shown, shown
    _assert_masked(shown)


def test_a_key_split_by_empty_tags_is_masked_in_a_display(kernel: KernelDriver) -> None:
    code = (
        "import pi_kernel, os\nfrom IPython.display import HTML, display\nkey = os.environ['OPENAI_API_KEY']\n"
        "display(HTML('<b></b>'.join(key[i : i + 10] for i in range(0, len(key), 10))))"
    )
    result = kernel.run(code)
    shown, _ = _shown(result.messages)
    assert result.status == "ok" and "***" in shown
    _assert_masked(shown)


def test_the_users_own_cell_prints_what_it_was_asked_for(kernel: KernelDriver) -> None:
    code = PIECES.replace("import pi_kernel, ", "import ").format(stream="stdout", after="")
    shown, streams = _shown(kernel.run(code).messages)
    assert FAKE_KEY in shown
    # The setup the masked variants rely on: the key really leaves in separate stream messages.
    assert streams >= 4, streams


def test_text_held_back_is_sent_before_the_cell_ends(kernel: KernelDriver) -> None:
    """A tail that may begin a key waits, but never past the request: the front-end sees all of it."""
    code = "import pi_kernel, sys\nsys.stdout.write('ready: s')\nsys.stdout.flush()"
    shown, _ = _shown(kernel.run(code).messages)
    assert shown == "ready: s"


# --------------------------------------------------------------------------- kernel outgoing indirect runs


ECHO_TOOL = '''
from pi_kernel import tool

@tool(approval="ask")
def echo(text: str) -> str:
    """Echo a text."""
    return text
'''


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def indirect_kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(ECHO_TOOL).status == "ok"
        server.enqueue(text_chunks(f"Remembered. (Your key {FAKE_KEY} is safe.)"))
        shown = driver.run("%%pi\nRemember blue", cell_id="remember")
        assert shown.status == "ok" and FAKE_KEY not in shown.text  # a %%pi cell: masked
        yield driver


def test_automagic_pi_history_is_masked(indirect_kernel: KernelDriver) -> None:
    """IPython's automagic (on by default): ``pi history`` is ``%pi history`` without the ``%``."""
    result = indirect_kernel.run("pi history")
    assert result.status == "ok" and "Remembered" in result.text, result.text  # it really ran %pi history
    assert FAKE_KEY not in result.text


def test_automagic_pi_model_shows_no_url_credentials(indirect_kernel: KernelDriver) -> None:
    """The same, for ``%pi model URL``: test_kernel_outgoing pins this masked for ``%pi model`` (terminal)."""
    result = indirect_kernel.run("pi model https://me:hunter2-secret@127.0.0.1:9/v1")
    assert "127.0.0.1:9" in result.text, result.text  # it really ran %pi model
    assert "hunter2-secret" not in result.text
    indirect_kernel.run("%pi model fake-model")


def test_alias_magic_history_is_masked(indirect_kernel: KernelDriver) -> None:
    """``%alias_magic ask pi`` (IPython's own feature), then ``%ask history``."""
    assert indirect_kernel.run("%alias_magic ask pi").status == "ok"
    history = indirect_kernel.run("%ask history")
    assert "Remembered" in history.text and FAKE_KEY not in history.text


def test_awaited_runner_turn_is_masked(indirect_kernel: KernelDriver, server: FakeOpenAI) -> None:
    """``run_pi_cell`` imported under a short name once, then awaited from plain cells: while a call waits
    for approval the live text view shows the finished answer (``update_display_data``), masked."""
    assert indirect_kernel.run(ECHO_TOOL + "\nfrom pi_kernel.kernel.extension import run_pi_cell as ask").status == "ok"
    server.enqueue(tool_call_chunks([("echo", {"text": "hi"})], text=f"Your key is {FAKE_KEY}."), text_chunks("ok"))
    result = indirect_kernel.run("await ask('go')", cell_id="awaited", allow_stdin=True, on_input=lambda prompt: "n")
    assert result.status == "ok", result.text
    users = [m["content"][0]["text"] for m in server.last_body["messages"] if m["role"] == "user"]
    assert users[-1] == "go"  # a real turn
    leaked = [m["msg_type"] for m in result.messages if FAKE_KEY in json.dumps(m["content"], default=str)]
    assert leaked == []


def test_captured_pi_history_is_masked(indirect_kernel: KernelDriver, tmp_path: Path) -> None:
    """``%%capture`` (or ``redirect_stdout``) keeps ``%pi history`` inside the kernel, before
    ``Session.send``: shown by a later plain cell, or written to a file, it is masked all the same."""
    assert indirect_kernel.run("%%capture cap\n%pi history").status == "ok"
    shown = indirect_kernel.run("print(cap.stdout)")
    assert "Remembered" in shown.text and FAKE_KEY not in shown.text
    path = tmp_path / "history.txt"
    code = (
        "import contextlib, io\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
        f"    get_ipython().run_line_magic('pi', 'history')\nopen({str(path)!r}, 'w').write(buf.getvalue())"
    )
    assert indirect_kernel.run(code).status == "ok"
    assert "Remembered" in path.read_text() and FAKE_KEY not in path.read_text()
