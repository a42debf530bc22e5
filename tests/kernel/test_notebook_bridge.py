"""The notebook tools over the ``pi.notebook`` comm, with a scripted front-end (``notebook_frontend``).

A real Pi kernel, the scripted OpenAI-compatible server as the model, and a
front-end that answers the bridge's requests from an in-memory nbformat
notebook. Each test checks what the notebook holds afterwards, what the model
was told, and that every tool call got exactly one result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
from kernel_helpers import (
    KernelDriver,
    approval_comm,
    approval_requests,
    assert_one_result_per_call,
    conversation_tool_calls,
    kernel_env,
)
from notebook_frontend import ScriptedFrontend, new_notebook

pytestmark = pytest.mark.kernel

PI_CELL = "%%pi\nFix the notebook"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def kernel(server: FakeOpenAI, pi_jupyter_path: str) -> Iterator[KernelDriver]:
    env = kernel_env(server.base_url, PI_NOTEBOOK_TIMEOUT="3")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        yield driver


@pytest.fixture
def frontend(kernel: KernelDriver) -> Iterator[ScriptedFrontend]:
    kernel.run("%pi reset")
    kernel.run("%pi approve auto")
    notebook = new_notebook(["x = 20", "y = x +* 2\ny", ("markdown", "# Notes"), PI_CELL])
    front = ScriptedFrontend(kernel, notebook).connect()
    yield front
    front.disconnect()
    kernel.run("%pi approve ask")


def run_pi(kernel: KernelDriver, front: ScriptedFrontend, **kwargs: Any) -> Any:
    """Run the notebook's ``%%pi`` cell (its last cell) with its id, the front-end answering."""
    pi_cell = next(cell for cell in front.notebook.cells if cell.source.startswith("%%pi"))
    kwargs.setdefault("on_iopub", front.on_iopub)
    kwargs.setdefault("timeout", 60)
    return kernel.run(pi_cell.source, cell_id=pi_cell.id, **kwargs)


def tool_result(server: FakeOpenAI, call_id: str = "call_0") -> str:
    results = server.tool_results(call_id)
    assert results, f"no result for {call_id}"
    return str(results[-1])


def test_cells_lists_the_document_with_positions_and_ids(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    server.enqueue(tool_call_chunks([("cells", {})]), text_chunks("Seen."))
    assert run_pi(kernel, frontend).status == "ok"
    listing = tool_result(server)
    ids = [cell.id for cell in frontend.notebook.cells]
    assert "Notebook: 4 cell(s)" in listing
    for number, cell_id in enumerate(ids, start=1):
        assert f"#{number} id={cell_id}" in listing
    assert "# Notes" in listing and "markdown" in listing  # cells never run are in the document too
    assert f"#4 id={ids[3]} code" in listing and "running now" in listing
    tools = [tool["function"]["name"] for tool in server.last_body["tools"]]
    assert {"edit_cell", "insert_cells", "run_cells", "delete_cells"} <= set(tools)


def test_cells_gives_one_cell_whole_by_position_or_id(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    second = frontend.cell(1).id
    server.enqueue(
        tool_call_chunks([("cells", {"cell": "#2"}), ("cells", {"cell": second}), ("cells", {"cell": "#9"})]),
        text_chunks("Seen."),
    )
    assert run_pi(kernel, frontend).status == "ok"
    assert "y = x +* 2\ny" in tool_result(server, "call_0")
    assert "y = x +* 2\ny" in tool_result(server, "call_1")
    assert "No cell #9: the notebook has 4 cell(s), #1 to #4" in tool_result(server, "call_2")


def test_edit_cell_then_run_cells_fixes_a_failing_cell_in_place(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    edit = {"cell": "#2", "edits": [{"old_text": "x +* 2", "new_text": "x * 2"}]}
    server.enqueue(
        tool_call_chunks([("edit_cell", edit)]),
        tool_call_chunks([{"name": "run_cells", "arguments": {"cells": ["#1", "#2"]}, "id": "call_run"}]),
        text_chunks("Fixed."),
    )
    result = run_pi(kernel, frontend)
    assert result.status == "ok", result.text
    assert frontend.cell(1).source == "y = x * 2\ny"
    outputs = frontend.cell(1).outputs
    assert [output["output_type"] for output in outputs] == ["execute_result"]
    assert outputs[0]["data"]["text/plain"] == "40"
    assert frontend.cell(1).execution_count is not None
    assert "#2" in tool_result(server, "call_run") and "40" in tool_result(server, "call_run")
    assert kernel.run("print(y)").text.strip() == "40"  # it ran in the kernel's namespace
    assert_one_result_per_call(server.last_body["messages"], expected_calls=2)


def test_run_cells_reports_the_error_in_the_cell_and_to_the_model(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    server.enqueue(tool_call_chunks([("run_cells", {"cells": ["#1", "#2", "#1"]})]), text_chunks("It fails."))
    assert run_pi(kernel, frontend).status == "ok"
    outputs = frontend.cell(1).outputs
    assert outputs[-1]["output_type"] == "error" and outputs[-1]["ename"] == "SyntaxError"
    told = tool_result(server)
    assert "raised SyntaxError" in told and "1 cell(s) not run" in told


def test_insert_cells_then_run_and_delete(kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend) -> None:
    cells = [
        {"type": "markdown", "source": "## Squares"},
        {"type": "code", "source": "squares = [i * i for i in range(4)]"},
        {"type": "code", "source": "print(sum(squares))"},
    ]
    server.enqueue(
        tool_call_chunks([("insert_cells", {"after": "#1", "cells": cells})]),
        tool_call_chunks([{"name": "run_cells", "arguments": {"cells": ["#3", "#4"]}, "id": "call_run"}]),
        tool_call_chunks([{"name": "delete_cells", "arguments": {"cells": ["#5"]}, "id": "call_del"}]),
        text_chunks("Done."),
    )
    assert run_pi(kernel, frontend).status == "ok"
    assert frontend.sources()[:4] == [
        "x = 20",
        "## Squares",
        "squares = [i * i for i in range(4)]",
        "print(sum(squares))",
    ]
    assert frontend.cell(3).outputs[0]["text"] == "14\n"
    assert "Inserted 3 cell(s) after #1" in tool_result(server)
    assert "Deleted 1 cell(s): #5" in tool_result(server, "call_del")
    assert "y = x +* 2\ny" not in frontend.sources()


def test_the_running_pi_cell_cannot_be_edited_or_deleted(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    before = frontend.sources()
    server.enqueue(
        tool_call_chunks(
            [("edit_cell", {"cell": "#4", "source": "print('hijacked')"}), ("delete_cells", {"cells": ["#4"]})]
        ),
        text_chunks("Cannot."),
    )
    assert run_pi(kernel, frontend).status == "ok"
    assert frontend.sources() == before
    assert "running this turn; it cannot be edited" in tool_result(server, "call_0")
    assert "running this turn; it cannot be deleted" in tool_result(server, "call_1")


def test_a_bridge_that_disconnects_mid_change_gives_one_clear_error(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    before = frontend.sources()
    frontend.before_reply = lambda request: "close" if request["op"] == "edit" else None
    server.enqueue(tool_call_chunks([("edit_cell", {"cell": "#1", "source": "x = 21"})]), text_chunks("Gone."))
    result = run_pi(kernel, frontend)
    assert result.status == "ok", result.text
    assert frontend.sources() == before
    told = tool_result(server)
    # the front-end may have applied the edit before it went away: the model is not told "nothing was changed"
    assert "disconnected before answering edit; whether the change was applied is unknown" in told, told
    assert "nothing was changed" not in told
    assert_one_result_per_call(server.last_body["messages"], expected_calls=1)


def test_a_front_end_that_does_not_answer_times_out(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    frontend.before_reply = lambda request: "drop" if request["op"] == "edit" else None
    server.enqueue(tool_call_chunks([("edit_cell", {"cell": "#1", "source": "x = 21"})]), text_chunks("Slow."))
    assert run_pi(kernel, frontend).status == "ok"
    told = tool_result(server)
    assert "did not answer edit within 3 s; whether the change was applied is unknown" in told, told
    note = kernel.run(
        "from pi_kernel.kernel.extension import get_session\n"
        "_note = get_session().notebook.uncertain[-1]\nprint(_note.op, _note.cells, _note.applied)"
    ).text.strip()
    assert note == f"edit ('{frontend.cell(0).id}',) None"  # undo can tell the notebook may differ


def approve_when_asked(kernel: KernelDriver, comm_id: str, seen: list[dict[str, Any]], decide: Any = None) -> Any:
    def on_request(message: dict[str, Any]) -> None:
        request = approval_requests(message)
        if request is None:
            return
        seen.append(request)
        fields = decide(request) if decide is not None else {"decision": "approve"}
        kernel.comm_send(comm_id, {"action": "resolve", "tool_call_id": request["tool_call_id"], **fields})

    return on_request


def test_the_approval_card_shows_the_cell_diff_and_highlights_the_cell(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    kernel.run("%pi approve ask")
    seen: list[dict[str, Any]] = []
    displays: list[str] = []
    edit = {"cell": "#2", "edits": [{"old_text": "x +* 2", "new_text": "x * 2"}]}
    server.enqueue(tool_call_chunks([("edit_cell", edit)]), text_chunks("Edited."))
    with approval_comm(kernel) as comm_id:
        answer = approve_when_asked(kernel, comm_id, seen)

        def on_iopub(message: dict[str, Any]) -> None:
            frontend.handle(message)
            if message["msg_type"] in ("display_data", "update_display_data"):
                displays.append(message["content"]["data"].get("text/plain", ""))
            answer(message)

        assert run_pi(kernel, frontend, on_iopub=on_iopub).status == "ok"
    preview = seen[0]["preview"]
    assert preview["title"].startswith("edit cell #2 (code) y = x +* 2")
    assert "-y = x +* 2\n" in preview["diff"] and "+y = x * 2\n" in preview["diff"]
    assert preview["cell_id"] == frontend.cell(1).id
    assert frontend.highlighted == [frontend.cell(1).id, None]  # highlighted while waiting, cleared after
    assert frontend.cell(1).source == "y = x * 2\ny"
    waiting = next(text for text in displays if "waiting for approval" in text)
    assert "\x1b[31m-y = x +* 2\x1b[0m" in waiting and "\x1b[32m+y = x * 2\x1b[0m" in waiting  # the text view


def test_deny_leaves_the_notebook_as_it_was(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    kernel.run("%pi approve ask")
    before = frontend.sources()
    seen: list[dict[str, Any]] = []
    server.enqueue(
        tool_call_chunks([("insert_cells", {"cells": [{"type": "code", "source": "import os"}]})]),
        text_chunks("OK."),
    )
    with approval_comm(kernel) as comm_id:
        answer = approve_when_asked(kernel, comm_id, seen, lambda _request: {"decision": "deny", "reason": "not now"})

        def on_iopub(message: dict[str, Any]) -> None:
            frontend.handle(message)
            answer(message)

        assert run_pi(kernel, frontend, on_iopub=on_iopub).status == "ok"
    assert "+import os" in seen[0]["preview"]["diff"]  # a new cell: added lines
    assert frontend.sources() == before
    assert "not now" in tool_result(server)


def test_a_cell_changed_while_its_diff_waits_is_refused_as_stale(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    kernel.run("%pi approve ask")
    seen: list[dict[str, Any]] = []
    server.enqueue(tool_call_chunks([("edit_cell", {"cell": "#1", "source": "x = 1000"})]), text_chunks("Stale."))

    def user_types_then_approves(_request: dict[str, Any]) -> dict[str, Any]:
        frontend.user_edit(0, "x = 30  # the user's work")
        return {"decision": "approve"}

    with approval_comm(kernel) as comm_id:
        answer = approve_when_asked(kernel, comm_id, seen, user_types_then_approves)

        def on_iopub(message: dict[str, Any]) -> None:
            frontend.handle(message)
            answer(message)

        assert run_pi(kernel, frontend, on_iopub=on_iopub).status == "ok"
    assert frontend.cell(0).source == "x = 30  # the user's work"
    assert "changed while waiting for approval; read it again" in tool_result(server)


def test_a_large_notebook_is_listed_within_its_bound(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    kernel.run("%pi approve auto")
    sources: list[str | tuple[str, str]] = [f"value_{i} = {i}  # a cell of some length" for i in range(10_000)]
    big = "data = [\n" + "    1,\n" * 1_500_000 + "]\n"  # about 10 MB
    sources[5] = big
    sources.append(PI_CELL)
    front = ScriptedFrontend(kernel, new_notebook(sources)).connect()
    try:
        server.enqueue(
            tool_call_chunks(
                [
                    ("cells", {}),
                    ("cells", {"start": 1}),
                    ("edit_cell", {"cell": "#6", "edits": [{"old_text": "data = [", "new_text": "numbers = ["}]}),
                ]
            ),
            text_chunks("Big."),
        )
        assert run_pi(kernel, front, timeout=120).status == "ok"
        around_pi, from_start = tool_result(server, "call_0"), tool_result(server, "call_1")
        assert len(around_pi) < 9000 and len(from_start) < 9000
        assert "Notebook: 10001 cell(s); showing #" in around_pi and "#10001 id=" in around_pi
        assert "#1 id=" in from_start and "#6 id=" in from_start and f"({len(big):,} chars)" in from_start
        assert front.cell(5).source.startswith("numbers = [\n    1,") and len(front.cell(5).source) == len(big) + 3
    finally:
        front.disconnect()
        kernel.run("%pi approve ask")


def test_without_a_bridge_the_notebook_tools_are_not_offered(kernel: KernelDriver, server: FakeOpenAI) -> None:
    kernel.run("%pi reset")
    kernel.run("x_plain = 5")
    server.enqueue(tool_call_chunks([("cells", {})]), text_chunks("Plain."))
    result = kernel.run("%%pi\nWhat ran?", timeout=60)
    assert result.status == "ok"
    tools = {tool["function"]["name"] for tool in server.last_body["tools"]}
    assert "cells" in tools and not tools & {"edit_cell", "insert_cells", "run_cells", "delete_cells"}
    assert "x_plain = 5" in tool_result(server)  # the recent cells, as without the bridge before
    prompt = json.dumps(server.last_body["messages"][0])
    assert "edit_cell" not in prompt


def test_an_interrupt_stops_run_cells(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend, tmp_path: Path
) -> None:
    marker = tmp_path / "state"
    frontend.user_edit(
        0,
        f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('sleeping')\ntime.sleep(60)\nfinished = True",
    )
    server.enqueue(tool_call_chunks([("run_cells", {"cells": ["#1"]})]))
    state: dict[str, float] = {}

    def on_poll() -> None:
        if "at" not in state and marker.exists():
            state["at"] = time.monotonic()
            kernel.interrupt()

    result = run_pi(kernel, frontend, on_poll=on_poll, timeout=90)
    assert "at" in state and time.monotonic() - state["at"] < 10  # not the 60 s the cell would take
    assert result.status == "error" and result.reply["ename"] == "PiInterrupted", result.text
    assert kernel.run("print('finished' in dir())").text.strip() == "False"
    errors = [output for output in frontend.cell(0).outputs if output["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "KeyboardInterrupt"  # the cell shows it was stopped
    conversation_tool_calls(kernel)  # every call of the turn has exactly one result


def test_a_message_that_is_not_a_dict_changes_nothing_and_later_turns_run(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    """A front-end message whose data is not an object (``["junk"]``) or names no waiting request is
    dropped without an error: it used to raise in the bridge's handler, which (ipykernel skipping
    ``post_execute`` after a raising comm handler) made every later ``%%pi`` cell refuse to run."""
    frontend.driver.comm_send(frontend.comm_id, ["junk"])  # type: ignore[arg-type]
    frontend.driver.comm_send(frontend.comm_id, {"reply_to": 7})
    assert kernel.run("print(1 + 1)").text.strip() == "2"
    server.enqueue(tool_call_chunks([("cells", {})]), text_chunks("Seen."))
    result = run_pi(kernel, frontend)
    assert "busy running the cell" not in result.text, result.text[-300:]
    assert result.status == "ok" and "Seen." in result.text
    assert "Notebook: 4 cell(s)" in tool_result(server)


def test_run_cells_does_not_run_a_cell_with_a_pi_command(kernel: KernelDriver, server: FakeOpenAI) -> None:
    """With only ``run_cells`` on auto, the agent must not turn on full auto by running a cell that holds
    ``%pi approve auto`` (a line, inside ``%%time``, or ``x = %pi ...``): such cells are not run."""
    kernel.run("%pi reset")
    kernel.run("%pi approve ask run_cells=auto")
    sources = ["%pi approve auto", "%%time\n%pi approve auto", "x = %pi approve auto", "ran = 'yes'", PI_CELL]
    front = ScriptedFrontend(kernel, new_notebook(sources)).connect()
    try:
        server.enqueue(tool_call_chunks([("run_cells", {"cells": ["#1", "#2", "#3", "#4"]})]), text_chunks("Ok."))
        assert run_pi(kernel, front).status == "ok"
        told = tool_result(server)
        assert told.count("runs a %pi command, not run") == 3, told
        assert "#4 ran" in told and kernel.run("print(ran)").text.strip() == "yes"
        policy = kernel.run("%pi approve").text
        assert "mode: ask" in policy and "run_cells=auto" in policy, policy
    finally:
        front.disconnect()
        kernel.run("%pi approve ask")


def test_policy_and_conversation_commands_are_refused_while_a_turn_runs(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    """The second line of defence: code the agent runs reaches ``%pi`` another way
    (``m = get_ipython().run_line_magic``); a command that changes the policy or the conversation is
    refused while the turn runs, with a clear message, and changes nothing."""
    frontend.user_edit(0, "m = get_ipython().run_line_magic\nm('pi', 'approve deny')")
    server.enqueue(tool_call_chunks([("run_cells", {"cells": ["#1"]})]), text_chunks("Tried."))
    assert run_pi(kernel, frontend).status == "ok"
    told = tool_result(server)
    assert "%pi approve changes the approval policy, and a turn is running" in told, told
    assert "mode: auto" in kernel.run("%pi approve").text  # nothing was changed


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"ok": True, "cells": [{"id": "a", "index": "zz", "type": "code", "source": "s"}]}, "index"),
        ({"ok": True, "cells": [{"id": 5, "index": 0, "type": "code", "source": "s"}]}, "id"),
        ({"ok": True, "cells": [{"id": "a", "index": 0, "type": "code", "source": ["s"]}]}, "source"),
        ({"ok": True, "cells": "all of them"}, "cells is not a list"),
        ({"ok": "yes", "cells": []}, "no ok: true/false"),
    ],
)
def test_a_malformed_read_reply_is_said_as_such(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend, reply: dict[str, Any], problem: str
) -> None:
    """A front-end reply with fields of the wrong type reaches the model as "the notebook front-end sent a
    malformed reply", not as a Python error ("invalid literal for int()")."""
    frontend.before_reply = lambda request: reply if request["op"] == "read" else None
    server.enqueue(tool_call_chunks([("cells", {})]), text_chunks("Odd."))
    assert run_pi(kernel, frontend).status == "ok"
    told = tool_result(server)
    assert "The notebook front-end sent a malformed reply" in told and problem in told, told
    assert "invalid literal" not in told and "Traceback" not in told
    assert_one_result_per_call(server.last_body["messages"], expected_calls=1)


def test_run_cells_leaves_the_execution_counter_and_history_to_the_user(
    kernel: KernelDriver, server: FakeOpenAI, frontend: ScriptedFrontend
) -> None:
    """Cells the agent runs take no execution count of their own: they show the ``%%pi`` cell's number, its
    reply keeps that number (the next one), the next cell the user runs gets the number after it, and
    ``In[n]`` matches the prompts."""
    before = kernel.run("pass").reply["execution_count"]
    server.enqueue(tool_call_chunks([("run_cells", {"cells": ["#1", "#1", "#1"]})]), text_chunks("Ran."))
    result = run_pi(kernel, frontend)
    assert result.status == "ok"
    assert result.reply["execution_count"] == before + 1
    assert frontend.cell(0).execution_count == before + 1
    after = kernel.run("print(In[-1])")
    assert after.reply["execution_count"] == before + 2
    assert after.text.strip() == "print(In[-1])"
    assert kernel.run(f"print('Fix the notebook' in In[{before + 1}])").text.strip() == "True"  # the %%pi cell
