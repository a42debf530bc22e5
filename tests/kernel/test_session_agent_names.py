"""``pi_kernel.session().agent`` names the session's agent; ``from pi_kernel import agent`` still does.

Run in plain IPython (no kernel) in a fresh interpreter, so the package attribute is
what a notebook written against either spelling sees.
"""

from __future__ import annotations

import subprocess
import sys

from kernel_helpers import kernel_env

IN_IPYTHON = """
import pi_kernel
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("%load_ext pi_kernel")
import pi_kernel.agent as package
from pi_kernel import agent
session = pi_kernel.session()
print(type(session).__name__, type(session.agent) is package.Agent, pi_kernel.session() is session)
print(agent.state is session.agent.state, agent.is_running is False)
"""

OUTSIDE = """
import pi_kernel
try:
    pi_kernel.session()
except RuntimeError as error:
    print("RuntimeError:", error)
"""


def run(script: str) -> str:
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=kernel_env())
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout


def test_session_agent_and_the_older_spelling_are_the_same_agent() -> None:
    assert run(IN_IPYTHON).splitlines() == ["PiSession True True", "True True"]


def test_without_ipython_there_is_no_session() -> None:
    assert run(OUTSIDE).startswith("RuntimeError: pi_kernel's session needs IPython")
