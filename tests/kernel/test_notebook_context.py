"""The notebook context keeps the LATEST cells when more than ~2 KB of cells ran since the previous turn:
the one that just failed (what "why did that fail? fix it" is about) and the variables section survive.

Seam: notebook context vs %pi undo / %pi load.

docs/notebook.md (notebook_context.py docstring): "a turn that never reached the conversation (or a
re-run that was undone) leaves the news for the next one". But session.undo() / replace_conversation()
never touch NotebookContext: the news the dropped turn carried is gone from the conversation and the
context mark stays after it, so the model is never told about those cells again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks
from kernel_helpers import KernelDriver, kernel_env, write_test_kernelspecs

from pi_kernel.kernel.notebook_context import CellError, CellHistory, CellRecord, NotebookContext


def test_the_cell_that_just_failed_survives_the_size_limit() -> None:
    history = CellHistory()
    for count in range(1, 31):  # an afternoon of ordinary cells since the agent's previous turn
        source = f"step_{count} = load_and_clean('part_{count}.csv', columns=COLUMNS)  # {'.' * 60}"
        history.add(CellRecord(count, source))
    history.add(CellRecord(31, "total = revenue / count", error=CellError("ZeroDivisionError", "division by zero")))
    text = NotebookContext(history).take({"total_rows": 12})
    assert text is not None and len(text) <= 2000
    assert "ZeroDivisionError" in text
    assert "total_rows" in text


def test_the_cells_kept_are_the_newest_in_order() -> None:
    history = CellHistory()
    for count in range(1, 41):
        history.add(CellRecord(count, f"value_{count} = {count}  # {'.' * 100}"))
    text = NotebookContext(history).take({})
    assert text is not None and len(text) <= 2000
    assert "In [40]" in text and "In [1]:" not in text and "older cell(s) left out" in text
    assert text.index("In [39]") < text.index("In [40]")


# --------------------------------------------------------------------------- context undo load


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(models=("fake-model",)) as fake:
        yield fake


@pytest.fixture()
def kernel(server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    path = str(write_test_kernelspecs(tmp_path_factory.mktemp("jupyter")))
    with KernelDriver(env=kernel_env(server.base_url), jupyter_path=path) as driver:
        yield driver


def request_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(part.get("text", "") for part in content)
    return "\n".join(parts)


def test_undone_rerun_leaves_its_news_for_the_next_turn(kernel: KernelDriver, server: FakeOpenAI) -> None:
    server.enqueue(text_chunks("One."))
    assert kernel.run("%%pi\nfirst", cell_id="a").status == "ok"
    assert kernel.run("marker_variable_xyz = 41").status == "ok"
    server.enqueue(text_chunks("Two."))
    assert kernel.run("%%pi\nfirst again", cell_id="a").status == "ok"  # re-run: told about marker_variable_xyz
    assert "marker_variable_xyz" in request_text(server.last_body)
    assert "Restored" in kernel.run("%pi undo").text  # back to the old turn, which never heard of it
    server.enqueue(text_chunks("Three."))
    assert kernel.run("%%pi\nwhat is new?", cell_id="b").status == "ok"
    # The conversation as sent no longer mentions the cell anywhere: the news was lost.
    assert "marker_variable_xyz" in request_text(server.last_body)


def test_loaded_conversation_is_told_the_news_the_replaced_one_held(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    server.enqueue(text_chunks("One."))
    assert kernel.run("%%pi\nhello", cell_id="c").status == "ok"
    saved = tmp_path / "empty_start.jsonl"
    assert "Saved" in kernel.run(f"%pi save {saved}").text
    assert kernel.run("loaded_marker_qq = 7").status == "ok"
    server.enqueue(text_chunks("Two."))
    assert kernel.run("%%pi\nnote it", cell_id="d").status == "ok"
    assert "loaded_marker_qq" in request_text(server.last_body)
    assert "Loaded" in kernel.run(f"%pi load {saved}").text  # the conversation from before that cell
    server.enqueue(text_chunks("Three."))
    assert kernel.run("%%pi\nwhat do you know?", cell_id="e").status == "ok"
    assert "loaded_marker_qq" in request_text(server.last_body)
