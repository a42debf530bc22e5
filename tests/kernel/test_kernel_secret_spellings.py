"""The keys stay out of reach whatever the spelling (real kernel, scripted model, ``auto`` mode).

Found by an adversary: ``cd /proc/self && cat env*`` and ``cat e{n,x}viron`` ran without asking, ``xxd``'s
default dump and ``od -An -tx1`` sent the keys as spaced hex, the kernel's connection file (named
``/tmp/tmpXXXX.json`` by a plain ``KernelManager``) was read without asking, and ``AWS_SECRET_ACCESS_KEY`` /
``DB_PASSWORD`` reached the model through tool results. The classes closed:

- the ``bash`` tool's processes get an environment without any secret variable;
- a command that can reach a process's environment or the kernel's connection file asks in every mode,
  however the path is spelled (relative to a ``cd``, a glob, a brace list), and so does ``read`` of them;
- the mask catches hex with any separator and grouping;
- one list of secret names serves every surface.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import FAKE_KEY, KernelDriver, kernel_env

from pi_kernel.tools.approval import ApprovalPolicy
from pi_kernel.tools.builtin import builtin_tools

BUILTINS = {definition.name: definition for definition in builtin_tools()}
AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DB = "db-pass-Zq81-kfPl-00aa"
GITHUB = "ghp_B1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R7s8"
SECRETS = (FAKE_KEY, AWS, DB, GITHUB)
HOSTILE = [
    "cd /proc/self && cat env*",
    "cat e{n,x}viron",
    "cd /proc/self && xxd env*",
    "cd /proc/self; cat e{n,x}viron",
    "cd /proc && cd self && cat environ",
    "cd / && cat proc/self/environ",
    "cat /proc/$PPID/environ",
    "cd /proc/$PPID && od -An -tx1 *",
    "cat /proc/*/env?ron",
    "cd /proc/self/ && cat ./e'nv'iron",
    "strings /proc/$PPID/mem | grep sk-",
    "echo $AWS_SECRET_ACCESS_KEY $DB_PASSWORD",
    "cd /; cd proc; cd $PPID; xxd -c4 *",
    "cd / && cd proc && cd $PPID && od -c *",
    "P=proc; cd /$P/$PPID && cat *",
]
"""The issue's spellings and the siblings found: relative after one or two ``cd``, a glob, a brace list,
the parent (the kernel) by ``$PPID``, quotes inside the name, the kernel's memory, a secret variable named,
/proc reached by relative ``cd`` steps from ``/`` or through a variable in the ``cd`` target."""


def _args(name: str, **values: Any) -> Any:
    return BUILTINS[name].parameters(**values)  # type: ignore[operator]


@pytest.mark.parametrize("command", HOSTILE)
def test_every_spelling_of_a_process_environment_asks_in_auto_mode(command: str) -> None:
    policy = ApprovalPolicy(mode="auto")
    policy.allow_always("bash")
    assert policy.decide(BUILTINS["bash"], _args("bash", command=command)) == "ask", command
    assert policy.decide(BUILTINS["bash"], _args("bash", command="cd /tmp && ls -la && cat notes.txt")) == "run"


def test_the_connection_file_by_any_name_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain ``KernelManager`` passes ``-f /tmp/tmpXXXX.json``: the kernel knows that path as its own."""
    connection = tmp_path / "tmpq3v9zk1x.json"
    connection.write_text('{"key": "0123456789abcdef0123456789abcdef"}')
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher", "-f", str(connection)])
    monkeypatch.chdir(tmp_path)
    policy = ApprovalPolicy(mode="auto")
    assert policy.decide(BUILTINS["read"], _args("read", path=str(connection))) == "ask"
    assert policy.decide(BUILTINS["read"], _args("read", path="./tmpq3v9zk1x.json")) == "ask"
    for command in (f"cat {connection}", "cat tmp*.json", "cat *.json", "cd .. && cat */tmpq3v9zk1x.json"):
        assert policy.decide(BUILTINS["bash"], _args("bash", command=command)) == "ask", command
    code = "from ipykernel.connect import get_connection_file\nprint(open(get_connection_file()).read())"
    assert policy.decide(BUILTINS["python"], _args("python", code=code)) == "ask"
    assert policy.decide(BUILTINS["python"], _args("python", code="get_ipython().kernel.session.key")) == "ask"
    (tmp_path / "data.json").write_text("{}")
    assert policy.decide(BUILTINS["read"], _args("read", path="data.json")) == "run"


# -- through the real kernel -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    env = kernel_env(server.base_url, PI_APPROVAL="auto", AWS_SECRET_ACCESS_KEY=AWS, DB_PASSWORD=DB, GITHUB_PAT=GITHUB)
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path, cwd=tmp_path_factory.mktemp("work")) as driver:
        yield driver


def _turn(kernel: Any, server: FakeOpenAI, tool: str, args: dict[str, Any], reply: str = "y") -> tuple[list[str], str]:
    """One ``%%pi`` turn calling ``tool`` (every question answered ``reply``): the questions, and the result
    the model got."""
    questions: list[str] = []

    def answer(prompt: str) -> str:
        questions.append(prompt)
        return reply

    server.enqueue(tool_call_chunks([(tool, args)]), text_chunks("Done."))
    result = kernel.run("%%pi\ngo", allow_stdin=True, on_input=answer, timeout=90)
    assert result.status == "ok", result.text
    tool_message = [m for m in server.last_body["messages"] if m["role"] == "tool"][-1]
    return questions, str(tool_message["content"])


def _no_secret_in(text: str) -> None:
    """No secret, nor a 12-character run of one, in ``text`` in clear or as hex (any separator)."""
    hex_digits = re.sub(r"[^0-9a-f]", "", text.lower())
    for secret in SECRETS:
        for start in range(len(secret) - 11):
            piece = secret[start : start + 12]
            assert piece not in text, (secret, piece)
            assert piece.encode().hex() not in hex_digits, (secret, piece)


@pytest.mark.kernel
@pytest.mark.parametrize(
    "command",
    [
        "cd /proc/self && cat env*",
        "cat e{n,x}viron",
        "cd /proc/self && xxd env*",
    ],
)
def test_hostile_spellings_ask_in_auto_mode(kernel: Any, server: FakeOpenAI, command: str) -> None:
    questions, content = _turn(kernel, server, "bash", {"command": command})
    assert len(questions) == 1 and questions[0].startswith("[This call may read secrets"), questions
    _no_secret_in(content)  # bash's own environment holds no key, whatever it printed


@pytest.mark.kernel
@pytest.mark.parametrize(
    "command",
    ["cd /; cd proc; cd $PPID; xxd -c4 *", "cd / && cd proc && cd $PPID && od -c *", "P=proc; cd /$P/$PPID && cat *"],
)
def test_relative_and_variable_cds_into_proc_ask_in_auto_mode(kernel: Any, server: FakeOpenAI, command: str) -> None:
    """A relative ``cd`` into /proc (``cd /; cd proc``) or one through a variable (``cd /$P/$PPID``) ran
    without a question. Answered no here: dumping every file of a process's folder takes minutes."""
    questions, content = _turn(kernel, server, "bash", {"command": command}, reply="n")
    assert len(questions) == 1 and questions[0].startswith("[This call may read secrets"), questions
    assert "under /proc" in questions[0], questions
    _no_secret_in(content)


@pytest.mark.kernel
def test_bash_processes_hold_no_secret_variable(kernel: Any, server: FakeOpenAI) -> None:
    command = "env; echo ---; printenv; tr '\\0' '\\n' < /proc/self/environ; echo end"
    questions, content = _turn(kernel, server, "bash", {"command": command})
    assert len(questions) == 1  # printing the environment still asks
    assert "PATH=" in content and content.rstrip().endswith("end")  # it ran, with an environment
    for name in ("OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GITHUB_PAT"):
        assert f"{name}=" not in content, name
    _no_secret_in(content)


@pytest.mark.kernel
@pytest.mark.parametrize(
    "command",
    [
        "xxd /proc/$PPID/environ",
        "od -An -tx1 /proc/$PPID/environ",
        "od -x /proc/$PPID/environ",
        "hexdump -C /proc/$PPID/environ",
        "python3 -c \"import sys; d=open('/proc/%s/environ' % sys.argv[1],'rb').read(); print(d.hex(' '))\" $PPID",
        "python3 -c \"import sys; d=open('/proc/%s/environ' % sys.argv[1],'rb').read(); print(d.hex(':', 2))\" $PPID",
        "python3 -c \"import sys; print(''.join(chr(92) + 'x%02x' % b for b in "  # \\x73\\x6b...
        "open('/proc/'+sys.argv[1]+'/environ','rb').read()))\" $PPID",
    ],
)
def test_approved_hex_dumps_of_the_kernel_environment_reach_the_model_masked(
    kernel: Any, server: FakeOpenAI, command: str
) -> None:
    """After approval, the kernel's environment (bash's parent) dumped as hex reaches the model masked."""
    questions, content = _turn(kernel, server, "bash", {"command": command})
    assert len(questions) == 1 and "***" in content, content[:500]
    _no_secret_in(content)


@pytest.mark.kernel
def test_the_kernels_own_connection_file_asks_and_its_key_is_masked(kernel: Any, server: FakeOpenAI) -> None:
    path = kernel.run("from ipykernel.connect import get_connection_file\nprint(get_connection_file())").text.strip()
    assert path.endswith(".json")
    key = kernel.run("print(get_ipython().kernel.session.key.decode())").text.strip()
    assert len(key) >= 16
    questions, content = _turn(kernel, server, "read", {"path": path})
    assert len(questions) == 1 and "connection" in questions[0], questions
    assert key not in content and key not in str(server.last_body)
    questions, content = _turn(kernel, server, "bash", {"command": f"cd {Path(path).parent} && cat *.json"})
    assert len(questions) == 1 and key not in content


@pytest.mark.kernel
def test_secret_variables_are_masked_in_tool_results(kernel: Any, server: FakeOpenAI) -> None:
    """``AWS_SECRET_ACCESS_KEY`` and ``DB_PASSWORD`` once reached the model through tool results while
    ``inspect`` masked them: one list of names for every surface."""
    code = "import os\nprint(os.environ['AWS_SECRET_ACCESS_KEY'], os.environ['DB_PASSWORD'], os.environ['GITHUB_PAT'])"
    questions, content = _turn(kernel, server, "python", {"code": code})
    assert len(questions) == 1 and content.count("***") >= 3, content
    _no_secret_in(content)
    for name in ("AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GITHUB_PAT"):
        for spelling in ("{}.encode().hex()", "{}.encode().hex(' ')", "' '.join({})", "list({})", "'<b></b>'.join({})"):
            code = f"import os\nprint({spelling.format(f'os.environ[{name!r}]')})"
            questions, content = _turn(kernel, server, "python", {"code": code})
            assert len(questions) == 1 and "***" in content, (code, content)
            _no_secret_in(content)
    _no_secret_in(str(server.last_body))
