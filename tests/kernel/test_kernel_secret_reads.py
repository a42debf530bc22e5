"""Reading the kernel's environment or a file holding keys never happens unseen, and keys never reach the model.

``read`` of ``/proc/self/environ`` once ran without asking (``read`` needs no
approval) and sent the API keys to the model. Now such a call asks a person in
every mode where a person can be asked (also ``auto``, also after "always
allow"), is refused in ``deny`` mode, and whatever a person lets through
reaches the model with key values masked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import FAKE_KEY, KernelDriver, kernel_env

from pi_kernel.tools.approval import ApprovalPolicy, deny_reason, secret_reason
from pi_kernel.tools.builtin import builtin_tools

BUILTINS = {definition.name: definition for definition in builtin_tools()}


def _args(name: str, **values: Any) -> Any:
    return BUILTINS[name].parameters(**values)  # type: ignore[operator]


@pytest.mark.parametrize("mode", ["ask", "auto", "read-only"])
@pytest.mark.parametrize(
    ("tool", "values"),
    [
        ("read", {"path": "/proc/self/environ"}),
        ("read", {"path": ".env"}),
        ("read", {"path": "~/.aws/credentials"}),
        ("read", {"path": "~/.ssh/id_ed25519"}),
        ("read", {"path": "~/.netrc"}),
    ],
)
def test_reading_secrets_asks_whatever_the_mode(mode: str, tool: str, values: dict[str, str]) -> None:
    policy = ApprovalPolicy(mode=mode)  # type: ignore[arg-type]
    policy.allow_always(tool)
    assert policy.decide(BUILTINS[tool], _args(tool, **values)) == "ask"
    assert policy.decide(BUILTINS[tool], _args(tool, path="notes.txt")) == "run"  # an ordinary read still runs


@pytest.mark.parametrize(
    "command", ["cat /proc/self/environ", "env", "printenv", "echo $OPENAI_API_KEY", "cat ~/.aws/credentials"]
)
def test_bash_reading_secrets_asks_even_in_auto_mode(command: str) -> None:
    policy = ApprovalPolicy(mode="auto")
    policy.set_override("bash", "auto")
    assert policy.decide(BUILTINS["bash"], _args("bash", command=command)) == "ask"
    assert policy.decide(BUILTINS["bash"], _args("bash", command="set -e; ls -la | head")) == "run"
    for code in ("import os\nprint(os.environ)", "import subprocess\nsubprocess.run(['env'])", "open('.env').read()"):
        assert policy.decide(BUILTINS["python"], _args("python", code=code)) == "ask", code
    assert policy.decide(BUILTINS["python"], _args("python", code="df.describe()")) == "run"


def test_reading_secrets_is_refused_in_deny_mode() -> None:
    policy = ApprovalPolicy(mode="deny")
    args = _args("read", path="/proc/self/environ")
    assert policy.decide(BUILTINS["read"], args) == "deny"
    secret = secret_reason(BUILTINS["read"], args, "read")
    assert "environment" in deny_reason(policy.state(None), "read", secret)


# -- through the real kernel -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.mark.kernel
def test_read_of_the_environment_asks_and_the_model_never_sees_the_key(
    server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    env = kernel_env(server.base_url, PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path, cwd=tmp_path) as kernel:
        questions: list[str] = []

        def answer(prompt: str) -> str:
            questions.append(prompt)
            return "y"

        server.enqueue(tool_call_chunks([("read", {"path": "/proc/self/environ"})]), text_chunks("Read it."))
        result = kernel.run("%%pi\nshow me the environment", allow_stdin=True, on_input=answer)
        assert result.status == "ok" and "Read it." in result.text
        assert len(questions) == 1 and "/proc/self/environ" in questions[0]  # asked, though the mode is auto
        assert questions[0].startswith("[This call may read secrets: it is a process's environment")
        tool_message = [m for m in server.last_body["messages"] if m["role"] == "tool"][-1]
        assert "OPENAI_API_KEY=" in tool_message["content"]  # the file was read ...
        assert FAKE_KEY not in str(server.last_body)  # ... and its key masked before the model saw it
        assert FAKE_KEY[-12:] not in str(server.last_body)
        server.enqueue(tool_call_chunks([("read", {"path": "/proc/self/environ"})]), text_chunks("Refused."))
        refused = kernel.run("%%pi\nagain")  # no stdin, no widgets: nobody to ask, so it does not run
        tool_message = [m for m in server.last_body["messages"] if m["role"] == "tool"][-1]
        assert refused.status == "ok" and "OPENAI_API_KEY" not in tool_message["content"]


@pytest.mark.kernel
def test_a_python_call_is_judged_after_the_call_before_it_in_its_batch_ran(
    server: FakeOpenAI, pi_jupyter_path: str, tmp_path: Path
) -> None:
    """The first python call of a batch moves the process into ``data/``, where ``config.txt`` links to a
    ``.env``; the second reads ``./config.txt``. Judged before the first ran, it looked like a plain file and
    ran unasked in ``auto``; python calls are judged one at a time, just before each runs, so it asks (and
    with nobody to ask here, does not run)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / ".env").write_text("DOTENV_SECRET=kept-in-the-dotenv-file\n")
    (data / "config.txt").symlink_to(".env")
    env = kernel_env(server.base_url, PI_APPROVAL="auto")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path, cwd=tmp_path) as kernel:
        calls = [
            ("python", {"code": "import os\nos.chdir('data')"}),
            ("python", {"code": "open('./config.txt').read()"}),
        ]
        server.enqueue(tool_call_chunks(calls), text_chunks("Done."))
        result = kernel.run("%%pi\nread the config")
        assert result.status == "ok", result.text
        kernel.run(f"import os\nos.chdir({str(tmp_path)!r})")
    results = [m["content"] for m in server.last_body["messages"] if m["role"] == "tool"]
    assert len(results) == 2 and "kept-in-the-dotenv-file" not in str(server.last_body), results
    assert "needs approval" in results[1] and "needs approval" not in results[0]  # only the second asked


# -- edited arguments keep what the mask hid ------------------------------------------------------------------


def test_an_edit_keeps_every_masked_value_the_person_did_not_change() -> None:
    from pi_kernel.ai.secrets import mask, unmask

    key = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
    original = {"command": f"curl -H 'Authorization: Bearer {key}' https://a.example/v1", "token": key}
    shown = {name: mask(value, [key]) for name, value in original.items()}
    assert key not in str(shown)
    edited = {**shown, "command": shown["command"].replace("a.example", "b.example")}  # the URL changed
    restored = unmask(edited, original, [key])
    assert restored == {"command": f"curl -H 'Authorization: Bearer {key}' https://b.example/v1", "token": key}
    assert unmask({"token": "typed-a-new-one"}, original, [key]) == {"token": "typed-a-new-one"}


ECHO_TOOL = '''
from pi_kernel import tool
seen = []

@tool(approval="ask")
def call_api(command: str) -> str:
    """Run an API call."""
    seen.append(command)
    return "ok"
'''


@pytest.mark.kernel
def test_arguments_edited_on_stdin_keep_the_masked_key(server: FakeOpenAI, pi_jupyter_path: str) -> None:
    command = f"curl -H 'Authorization: Bearer {FAKE_KEY}' https://a.example/v1"
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as kernel:
        assert kernel.run(ECHO_TOOL).status == "ok"
        questions: list[str] = []

        def answer(prompt: str) -> str:
            questions.append(prompt)
            shown = prompt[prompt.index("{") : prompt.index("? [y]es")]  # the arguments, as the person saw them
            return shown.replace("a.example", "b.example")

        server.enqueue(tool_call_chunks([("call_api", {"command": command})]), text_chunks("Done."))
        assert kernel.run("%%pi\ncall it", allow_stdin=True, on_input=answer).status == "ok"
        seen = kernel.run(f"seen == [{command.replace('a.example', 'b.example')!r}]").text
    assert FAKE_KEY not in questions[0] and "***" in questions[0]
    assert seen.strip() == "True"  # the key came back, not the mask
