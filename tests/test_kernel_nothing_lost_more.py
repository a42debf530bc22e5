"""Issue 11 point 2 (review r11b), through the real kernel: more members of the "nothing lost" classes.

- a saved conversation whose text holds U+2028/U+2029/U+0085 loads back;
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, text_chunks
from kernel_helpers import KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

SETUP = """
from pi_kernel import tool
"""


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=pi_jupyter_path) as driver:
        assert driver.run(SETUP).status == "ok"
        yield driver


def message_count(kernel: KernelDriver) -> int:
    text = kernel.run("%pi").text
    return int(text.split("messages:")[1].split()[0])


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_saved_conversation_with_a_line_separator_in_its_text_loads_back(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path, separator: str
) -> None:
    """``json.dumps(ensure_ascii=False)`` writes U+2028/U+2029/U+0085 raw; the loader must not cut a record there."""
    kernel.run("%pi reset")
    server.enqueue(text_chunks(f"first{separator}second"))
    assert kernel.run(f"%%pi\nSay two lines{separator}please", cell_id="sep").status == "ok"
    path = tmp_path / "sep.jsonl"
    assert "Saved 2 messages" in kernel.run(f"%pi save {path}").text
    loaded = kernel.run(f"%pi load {path}")
    assert loaded.status == "ok" and "Loaded 2 messages" in loaded.text, loaded.text
