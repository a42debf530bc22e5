"""inspect and the process environment: reading the kernel's environment always asks a person.

The project rule (approval / tools.paths, tests/test_kernel_secret_reads.py): python code
`print(os.environ)` asks even in auto mode, so an inspect of "os.environ" asks too (denied in deny mode),
and inspect itself refuses a path through a module (pd.io.common.os.environ) or to an os.environ mapping,
so AWS_SECRET_ACCESS_KEY or DATABASE_PASSWORD never reach the model through it; a string variable
named like a secret (a getpass() password) is not previewed, and values of secret-named environment
variables are masked (as the result enters the transcript).
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd
import pytest
from builtin_helpers import entered

from pi_kernel.tools.approval import ApprovalPolicy
from pi_kernel.tools.builtin import builtin_tools
from pi_kernel.tools.builtin.inspect_tool import run_inspect

BUILTINS = {definition.name: definition for definition in builtin_tools()}
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"


def _args(tool: str, **values: Any) -> Any:
    return BUILTINS[tool].parameters(**values)  # type: ignore[operator]


@pytest.mark.parametrize("mode", ["ask", "auto", "read-only", "deny"])
def test_inspect_of_the_environment_asks_like_python_does(mode: str) -> None:
    policy = ApprovalPolicy(mode=mode)  # type: ignore[arg-type]
    assert policy.decide(BUILTINS["python"], _args("python", code="import os\nos.environ")) in ("ask", "deny")
    assert policy.decide(BUILTINS["inspect"], _args("inspect", name="os.environ")) in ("ask", "deny")


def test_inspect_does_not_hand_the_environment_to_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    for path in ("os.environ", "pd.io.common.os.environ"):
        try:
            text = run_inspect(path, {"os": os, "pd": pd}, limit=4000, hidden=set())
        except ValueError as refused:  # the tool's error result
            text = str(refused)
        assert SECRET not in text, path
        assert "does not read" in text, text


def test_a_password_typed_into_getpass_is_not_previewed_to_the_model() -> None:
    """getpass() is how notebooks keep secrets out of cell sources; the value then lives in a variable.
    inspect runs with no approval in every mode, so a string under a secret-like name is never previewed."""
    namespace = {"db_password": "correct-horse-battery-staple", "aws_secret_access_key": SECRET, "n": 3}
    listing = run_inspect(None, namespace, limit=4000, hidden=set())
    assert "correct-horse" not in listing and SECRET not in listing
    assert "correct-horse" not in run_inspect("db_password", namespace, limit=4000, hidden=set())


def test_a_value_equal_to_an_environment_secret_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_PASSWORD", SECRET)
    namespace = {"connection": f"postgres://db/{SECRET}"}
    assert SECRET not in entered(run_inspect(None, namespace, limit=4000, hidden=set()))
    assert SECRET not in entered(run_inspect("connection", namespace, limit=4000, hidden=set()))
