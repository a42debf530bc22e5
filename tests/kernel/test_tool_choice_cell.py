"""``%%pi --tool NAME|any`` in the real kernel, and the compact ``%pi tools`` table (issue 23).

jupyter_client → the Pi kernel → the scripted OpenAI-compatible server: what is asserted is the request
body the cell sent, and the text the commands print.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

SETUP = '''
from pi_kernel import tool

@tool
def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: What to shout.
    """
    return text.upper()

@tool(approval="ask")
def whisper(text: str) -> str:
    """Lower-case a text."""
    return text.lower()
'''


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
        yield driver


def test_tool_forces_that_tool_on_the_first_request_only(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("shout", {"text": "hi"})]), text_chunks("HI."))
    before = len(server.bodies)

    assert kernel.run("%%pi --tool shout --max-turns 3\nShout hi", cell_id="forced").status == "ok"

    first, second = server.bodies[before:]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "shout"}}
    assert "tool_choice" not in second


def test_tool_any_requires_some_tool_and_the_next_cell_is_free_again(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(tool_call_chunks([("shout", {"text": "a"})]), text_chunks("A."), text_chunks("Free."))
    before = len(server.bodies)

    assert kernel.run("%%pi --tool any\nShout a", cell_id="any").status == "ok"
    assert kernel.run("%%pi\nHello", cell_id="free").status == "ok"

    choices = [body.get("tool_choice") for body in server.bodies[before:]]
    assert choices == ["required", None, None]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--tool nosuch", "no tool named 'nosuch'"),
        ("--tool shout --no-tools", "--tool and --no-tools exclude each other"),
    ],
)
def test_a_tool_that_cannot_be_forced_is_a_usage_error_before_any_request(
    kernel: KernelDriver, server: FakeOpenAI, line: str, message: str
) -> None:
    before = len(server.bodies)
    result = kernel.run(f"%%pi {line}\nShout", cell_id="bad")
    assert result.status == "error" and message in result.text
    assert len(server.bodies) == before


def test_a_switched_off_tool_cannot_be_forced(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi tools disable whisper")
    try:
        result = kernel.run("%%pi --tool whisper\nWhisper", cell_id="off")
        assert result.status == "error" and "whisper is switched off" in result.text
    finally:
        kernel.run("%pi tools enable whisper")


def test_the_tools_table_is_one_short_line_a_tool_and_descriptions_come_by_name(kernel: KernelDriver) -> None:
    table = kernel.run("%pi tools disable shout").text
    rows = {line.split()[0]: line for line in table.splitlines() if line and not line.startswith("(")}
    assert re.fullmatch(r"shout +off +runs", rows["shout"]) and re.fullmatch(r"whisper +on +asks", rows["whisper"])
    assert re.fullmatch(r"bash +on +asks", rows["bash"]) and re.fullmatch(r"read +on +runs", rows["read"])
    assert "Upper-case" not in table and all(len(line) < 80 for line in table.splitlines())
    kernel.run("%pi approve whisper=deny")
    try:
        assert re.search(r"^whisper +on +denied \(%pi approve\)$", kernel.run("%pi tools").text, re.MULTILINE)
    finally:
        kernel.run("%pi approve whisper=ask")
    kernel.run("%pi tools enable shout")

    details = kernel.run("%pi tools shout").text
    assert "shout (on, approval: runs)" in details and "Upper-case a text." in details
    assert "text (string): What to shout." in details
