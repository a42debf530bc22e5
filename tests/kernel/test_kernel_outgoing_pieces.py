"""A key sent in pieces leaves a pi cell masked (real kernel).

Found by an adversary: in a pi cell, a key printed in 10-character pieces, each its own ``stream`` message,
or split by empty markup tags, reached the front-end whole. Each pi request's stdout and stderr now go
through one ``MaskedStream`` (what may begin a key waits for the next piece), and the mask reads markup
tags and separators out of the way. The user's own cells are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from kernel_helpers import FAKE_KEY, KernelDriver, kernel_env

pytestmark = pytest.mark.kernel

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
