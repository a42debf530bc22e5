"""Secret reads must ask whatever the mode; keys reaching a tool result must be masked.

The scan is a tripwire, and masking is the net -- but the net only knows the key's literal text,
so each tripwire miss below sends the key to the model in another encoding.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from pi_kernel.ai.secrets import mask
from pi_kernel.tools.approval import ApprovalPolicy
from pi_kernel.tools.builtin import builtin_tools

BUILTINS = {d.name: d for d in builtin_tools()}
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def _args(name: str, **values: str) -> Any:
    return BUILTINS[name].parameters(**values)  # type: ignore[operator]


@pytest.mark.parametrize(
    "command",
    [
        "base64 /proc/self/env*",  # glob: the word never contains "environ"
        "base64 /proc/self/envir?n",
        "xxd -p /proc/$PPID/e[n]viron",
        "cat .e''nv | base64",  # quotes split the word
        "base64 .en?",
        "cat .{e,}nv",  # a brace list
        "cat ${HOME}/.a?s/cred*",
        "env -0 | base64",
        "set | grep KEY=",
        "ps eww",
        "awk 'BEGIN { for (k in ENVIRON) print k, ENVIRON[k] }'",
        "perl -e 'print %ENV'",
        "node -e 'console.log(process.env)'",
    ],
)
def test_bash_secret_reads_through_globs_and_quotes_ask_in_auto_mode(command: str) -> None:
    policy = ApprovalPolicy(mode="auto")
    assert policy.decide(BUILTINS["bash"], _args("bash", command=command)) == "ask"


@pytest.mark.parametrize(
    "code",
    [
        "import os\nprint(getattr(os, 'envi' 'ron')['OPENAI' '_API_KEY'].encode().hex())",
        "print(open('/proc/self/env' + 'iron', 'rb').read().hex())",
        "import os\nprint(dict(vars(os)['envi'+'ron']))",
        "import os\nprint(os.environb)",
        "print(open(''.join(['/proc/self/', 'environ'])).read())",
    ],
)
def test_python_secret_reads_by_built_names_ask_in_auto_mode(code: str) -> None:
    policy = ApprovalPolicy(mode="auto")
    assert policy.decide(BUILTINS["python"], _args("python", code=code)) == "ask"


@pytest.mark.parametrize(
    "encoded",
    [
        base64.b64encode(f"OPENAI_API_KEY={KEY}\0".encode()).decode(),  # `base64 /proc/self/env*`
        KEY.encode().hex(),
        "\n".join(KEY[i : i + 8] for i in range(0, len(KEY), 8)),  # the key in 8-char lines
        base64.b64encode(f"X={KEY}".encode()).decode(),  # another alignment
        base64.b64encode(f"XY={KEY}".encode()).decode(),
        KEY.encode().hex().upper(),
    ],
    ids=["base64", "hex", "split-lines", "base64-shift-1", "base64-shift-2", "HEX"],
)
def test_the_key_in_another_encoding_is_masked_in_a_tool_result(encoded: str) -> None:
    shown = mask(f"output:\n{encoded}\n", [KEY])
    recovered = shown
    for decode in (
        lambda s: base64.b64decode(s.split("\n")[1]).decode("latin-1"),
        lambda s: bytes.fromhex(s.split("\n")[1]).decode("latin-1"),
        lambda s: s.replace("\n", ""),
    ):
        try:
            recovered += "|" + decode(shown)
        except Exception:  # noqa: BLE001
            pass
    assert KEY not in recovered, "the model can decode the key from the masked tool result"


def test_the_key_in_wrapped_base64_is_masked() -> None:
    wrapped = base64.encodebytes(f"PATH=/usr/bin\0OPENAI_API_KEY={KEY}\0HOME=/root\0".encode()).decode()
    shown = mask(wrapped, [KEY])  # `base64` wraps at 76 columns: the key's form is split by a line break
    joined = shown.replace("\n", "")
    assert "***" in shown
    for part in joined.split("***"):
        for start in range(4):  # every alignment of what is left
            piece = part[start:][: (len(part) - start) // 4 * 4]
            try:
                decoded = base64.b64decode(piece)
            except ValueError:
                continue
            assert KEY[:12].encode() not in decoded and KEY[-12:].encode() not in decoded


@pytest.mark.parametrize(
    ("tool", "text"),
    [
        ("bash", "ls *"),
        ("bash", "for f in *.txt; do wc -l $f; done"),
        ("bash", "cat data/*.csv | head"),
        ("bash", "find . -name '*.py' | xargs grep -n TODO"),
        ("bash", "echo 'setting up the environment'"),
        ("bash", "/usr/bin/env python3 script.py"),
        ("python", "x = set()\nprint(f'{x}/{len(x)}', 3*4/2)"),
    ],
)
def test_ordinary_commands_still_run_in_auto_mode(tool: str, text: str) -> None:
    policy = ApprovalPolicy(mode="auto")
    values = {"command": text} if tool == "bash" else {"code": text}
    assert policy.decide(BUILTINS[tool], _args(tool, **values)) == "run"


@pytest.mark.parametrize(
    "command",
    ["echo $AWS_ACCESS_KEY_ID", "echo ${STRIPE_KEY}", "curl -u me:$DB_PWD host", "echo $GOOGLE_CREDENTIALS"],
)
def test_a_variable_named_like_a_secret_by_the_one_list_asks(command: str) -> None:
    """``secret_paths`` (now in ``tools.paths``) kept its own regex of secret-name shapes, narrower than
    ``ai.secrets.is_secret_name`` (the list every other surface uses): ``*ACCESS_KEY*``, a ``KEY`` word, ``*PWD``,
    ``*CREDENTIAL*`` ran unasked."""
    policy = ApprovalPolicy(mode="auto")
    assert policy.decide(BUILTINS["bash"], _args("bash", command=command)) == "ask", command


@pytest.mark.parametrize("command", ["cd $PWD && ls", "echo $HOME $OLDPWD", "cat $GITHUB_TOKEN_FILE | wc -c"])
def test_a_variable_not_named_like_a_secret_runs(command: str) -> None:
    policy = ApprovalPolicy(mode="auto")
    assert policy.decide(BUILTINS["bash"], _args("bash", command=command)) == "run", command
