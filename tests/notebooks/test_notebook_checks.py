"""The checks of ``test_notebooks`` accept every run the tutorials allow (issue 11, point 1), and no more.

Each case is a run the local model can produce at temperature 0 on some build or thread count: the checks
must accept it, and reject what the lesson rules out (a wrong result, a call that ran though it was denied,
a repeated notebook context). Tool cells force their tool (``--tool``), so which tool is called is not left
to sampling; on the local model pi-kernel opens the answer with the tool's result, so answer checks hold by
construction there. Every tool cell has a turn limit, so a greedy model repeating a denied call ends the
cell rather than running into nbclient's timeout.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
from test_notebooks import NOTEBOOKS, check_every_turn, check_mcp


def _cell(source: str, record: dict[str, Any], text: str = "") -> Any:
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": text}, metadata={"pi_kernel": record})]
    return cell


def _call(name: str, arguments: dict[str, Any], status: str = "done") -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "status": status, "result": {"is_error": False, "text": "ok"}}


def test_a_max_turns_cell_that_ends_on_its_tool_calls_passes() -> None:
    """08: ``%%pi --max-turns 2`` and the model calls the time tool in both turns: the limit ends the run with
    every call answered, the last message's stop reason is ``tool_use``."""
    call = _call("time__get_current_time", {"timezone": "UTC"})
    record = {"errors": [], "stop_reason": "tool_use", "tool_calls": [call, call]}
    check_every_turn(nbformat.v4.new_notebook(cells=[_cell("%%pi --max-turns 2\nWhat time is it now in UTC?", record)]))


def test_a_cell_without_a_limit_must_still_end_in_an_answer() -> None:
    record = {"errors": [], "stop_reason": "tool_use", "tool_calls": [_call("add", {})]}
    try:
        check_every_turn(nbformat.v4.new_notebook(cells=[_cell("%%pi\nAdd.", record)]))
    except AssertionError:
        return
    raise AssertionError("a turn that ended on tool_use without a turn limit passed the check")


def _mcp_notebook(call: dict[str, Any]) -> Any:
    return nbformat.v4.new_notebook(
        cells=[
            _cell("mcp add time", {}, "time: running\ntime__get_current_time [asks]"),
            _cell("%pi approve time__*=auto", {}, "time__*=auto"),
            _cell(
                "%%pi --tool time__get_current_time --max-turns 2\nWhat time is it now in UTC?",
                {"errors": [], "stop_reason": "stop", "tool_calls": [call], "answer": "It is noon."},
            ),
            _cell("%pi mcp remove time", {}, "MCP server time removed."),
        ]
    )


def test_the_mcp_check_needs_the_time_tool_to_return_a_time() -> None:
    """08's lesson is an MCP call: a turn that used a notebook tool instead, or got no time back, fails."""
    good = _call("time__get_current_time", {"timezone": "UTC"})
    good["result"]["text"] = '{"timezone": "UTC", "datetime": "2026-12-06T05:00:00+00:00", "is_dst": false}'
    check_mcp(_mcp_notebook(good), "auto", Path("."))
    for bad in (_call("cells", {}), _call("time__get_current_time", {"timezone": "UTC"})):
        try:
            check_mcp(_mcp_notebook(bad), "auto", Path("."))
        except AssertionError:
            continue
        raise AssertionError(f"the MCP check passed a turn without a time from the time server: {bad}")


def test_every_tutorial_pi_cell_with_tools_has_a_turn_limit() -> None:
    unbounded = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            first = cell.source.splitlines()[0] if cell.source else ""
            if cell.cell_type == "code" and first.startswith("%%pi") and "--no-tools" not in first:
                if not re.search(r"--max-turns \d", first):
                    unbounded.append(f"{path.name}: {first}")
    assert unbounded == [], unbounded
