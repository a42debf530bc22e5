"""``%pi undo`` in the real kernel reverts what a ``%%pi`` turn's tools did: variables, objects changed in
place, files; what it cannot revert is named, and the user's own later changes are never overwritten."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import KernelDriver, setup_kernel

pytestmark = pytest.mark.kernel

SETUP = """
import pandas as pd
df = pd.DataFrame({"x": [1.0, 2.0, 3.0]})
items = [1, 2]
keep = "old"
doomed = [9]
"""


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    with setup_kernel(server.base_url, pi_jupyter_path, SETUP) as driver:
        assert driver.run("%pi approve auto").status == "ok"
        yield driver


def turn(kernel: KernelDriver, server: FakeOpenAI, calls: list[tuple[str, dict[str, Any]]], cell_id: str) -> None:
    specs = [
        {"name": name, "arguments": arguments, "id": f"{cell_id}_{n}"} for n, (name, arguments) in enumerate(calls)
    ]
    server.enqueue(tool_call_chunks(specs), text_chunks("Done."))
    result = kernel.run(f"%%pi\nchange things ({cell_id})", cell_id=cell_id)
    assert result.status == "ok", result.text


def value(kernel: KernelDriver, expression: str) -> Any:
    return json.loads(kernel.run(f"import json; print(json.dumps({expression}))").text)


def python(code: str) -> tuple[str, dict[str, Any]]:
    return ("python", {"code": code})


def test_undo_restores_variables_objects_changed_in_place_and_files(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    edited, written, created = tmp_path / "edited.txt", tmp_path / "written.txt", tmp_path / "new" / "created.txt"
    edited.write_text("alpha\nbeta\n")
    written.write_text("old content")
    code = "df['x'] *= 10\ndf['y'] = 0\nitems.append(3)\nkeep = 'new'\ndel doomed\nfresh = 1"
    turn(
        kernel,
        server,
        [
            python(code),
            ("edit", {"path": str(edited), "edits": [{"oldText": "beta", "newText": "gamma"}]}),
            ("write", {"path": str(written), "content": "new content"}),
            ("write", {"path": str(created), "content": "hello"}),
        ],
        "u1",
    )
    assert value(kernel, "[df['x'].tolist(), items, keep, 'fresh' in globals()]") == [
        [10.0, 20.0, 30.0],
        [1, 2, 3],
        "new",
        True,
    ]
    assert edited.read_text() == "alpha\ngamma\n" and created.exists()
    report = kernel.run("%pi undo").text
    assert "Restored 3 variables, 2 objects changed in place, 3 files." in report, report
    assert value(kernel, "[df.columns.tolist(), df['x'].tolist(), items, keep, doomed, 'fresh' in globals()]") == [
        ["x"],
        [1.0, 2.0, 3.0],
        [1, 2],
        "old",
        [9],
        False,
    ]
    assert edited.read_text() == "alpha\nbeta\n" and written.read_text() == "old content" and not created.exists()


def test_an_object_over_the_budget_is_named_as_not_restored(kernel: KernelDriver, server: FakeOpenAI) -> None:
    assert kernel.run("import numpy as np; big = np.zeros(1000); small = [1]").status == "ok"
    assert kernel.run("get_ipython().kernel.pi_session.settings.undo_memory = 4000").status == "ok"
    try:
        turn(kernel, server, [python("big[0] = 7\nsmall.append(2)")], "u2")
        report = kernel.run("%pi undo").text
    finally:
        kernel.run("get_ipython().kernel.pi_session.settings.undo_memory = 1 << 30")
    assert "Not restored: big (a ndarray, 7.8 KB): over PI_UNDO_MEMORY" in report, report
    assert value(kernel, "[float(big[0]), small]") == [7.0, [1]]


def test_the_users_change_after_the_turn_is_refused_and_named(
    kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path
) -> None:
    path = tmp_path / "mine.txt"
    turn(kernel, server, [python("mine = 'by the agent'"), ("write", {"path": str(path), "content": "agent"})], "u3")
    path.write_text("user")
    assert kernel.run("mine = 'by the user'").status == "ok"
    report = kernel.run("%pi undo").text
    assert "Not restored: mine: changed since the turn; left as it is" in report, report
    assert f"Not restored: {path}: changed since the turn; left as it is" in report
    assert path.read_text() == "user" and value(kernel, "mine") == "by the user"


def test_a_bash_command_is_named_as_not_undone(kernel: KernelDriver, server: FakeOpenAI, tmp_path: Path) -> None:
    calls = [("bash", {"command": f"touch {tmp_path}/side_effect"}), python("made_by_the_turn = 1")]
    turn(kernel, server, calls, "u4")
    report = kernel.run("%pi undo").text
    assert "Restored 1 variable." in report, report
    assert "Not restored: bash `touch /" in report and "`: what a command did is not undone" in report, report
    assert (tmp_path / "side_effect").exists() and value(kernel, "'made_by_the_turn' in globals()") is False


def test_the_next_turn_tells_the_model_what_was_undone(kernel: KernelDriver, server: FakeOpenAI) -> None:
    turn(kernel, server, [python("told = 1")], "u5")
    assert "Restored 1 variable." in kernel.run("%pi undo").text
    server.enqueue(text_chunks("Noted."))
    assert kernel.run("%%pi\nwhat now?", cell_id="u6").status == "ok"
    last = server.last_body["messages"][-1]["content"]
    told = " ".join(part["text"] for part in last)
    assert "The user undid an earlier turn's changes with %pi undo:" in told and "Restored 1 variable." in told


def test_an_object_the_user_changed_in_place_after_the_turn_is_kept_and_named(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    assert kernel.run("data = [1, 2]").status == "ok"
    turn(kernel, server, [python("data.append(3)")], "u6")
    assert kernel.run("data.append('USER')").status == "ok"
    report = kernel.run("%pi undo").text
    assert "Not restored: data: changed in place since the turn; your version is kept" in report, report
    assert "changed in place" not in report.split("\n")[1], report  # not counted as restored
    assert value(kernel, "data") == [1, 2, 3, "USER"]


def test_what_a_called_function_changed_comes_back_and_its_reach_is_named(
    kernel: KernelDriver, server: FakeOpenAI
) -> None:
    assert kernel.run("other = {'k': 'v'}\ndef touch():\n    other['k'] = 'changed'").status == "ok"
    turn(kernel, server, [python("touch()")], "u7")
    assert value(kernel, "other") == {"k": "changed"}
    report = kernel.run("%pi undo").text
    assert "Restored 1 object changed in place." in report, report
    assert "Not restored: code `touch()`: effects outside the variables it names" in report, report
    assert value(kernel, "other") == {"k": "v"}
