"""CellHistory.post_run_cell runs for EVERY cell (agent used or not), on the kernel thread: recording a
cell's result costs no more than IPython showing it (its pretty printer, max_seq_length, _repr_pretty_),
never a full plain repr() IPython did not run (a 4M-item list, a lazy query object), and the hook
never raises (an exception whose str() fails is still recorded).

%%pi --cells: the new cell must hold the code that RAN, not the code the model first proposed.

A person approves a python call with edited arguments (the approval panel's edit, or a
before_tool_call hook that rewrites code). The edited code runs; the code cell offered
through set_next_input must carry that code (cell_runner.code_cell_text
must not read the assistant message's ToolCall.arguments), else the user would run a cell that
does what they explicitly refused. The python tool records the code it ran in details["code"].
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from IPython.lib.pretty import pretty
from scripted_model import ScriptedModel, run_loop, text_message, tool_call, tool_call_message, user

from pi_kernel.agent import BeforeToolCallContext, BeforeToolCallResult
from pi_kernel.kernel.cell_runner import code_cell_text
from pi_kernel.kernel.notebook_context import CellHistory
from pi_kernel.tools.builtin import create_python_tool
from pi_kernel.tools.definition import ToolContext, wrap_tool_definition


class LazyQuery:
    """Shows itself cheaply in the notebook; its plain repr runs the query."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("<LazyQuery: SELECT * FROM big>")

    def __repr__(self) -> str:
        time.sleep(3)
        return "<all rows>"


def result(value: Any) -> Any:
    info = SimpleNamespace(raw_cell="query", silent=False)
    return SimpleNamespace(info=info, result=value, execution_count=3, error_in_exec=None, error_before_exec=None)


def test_recording_a_cell_does_not_run_a_slow_repr_ipython_never_ran() -> None:
    query = LazyQuery()
    started = time.monotonic()
    assert pretty(query) == "<LazyQuery: SELECT * FROM big>"  # what the notebook showed, at once
    CellHistory().post_run_cell(result(query))
    assert time.monotonic() - started < 1.5


class BadMessage(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this exception fails")


def test_an_exception_whose_str_fails_is_still_recorded() -> None:
    """IPython shows such an error ("<exception str() failed>"); the hook must not raise (IPython would
    print "Error in callback" after the cell and the cell would be missing from cells/context)."""
    try:
        raise BadMessage()
    except BadMessage as error:
        failed = error
    info = SimpleNamespace(raw_cell="raise BadMessage()", silent=False)
    history = CellHistory()
    history.post_run_cell(
        SimpleNamespace(info=info, result=None, execution_count=4, error_in_exec=failed, error_before_exec=None)
    )
    (record,) = history.recent(1)
    assert record.error is not None and record.error.type == "BadMessage"


def test_recording_a_big_list_result_costs_what_ipython_showing_it_cost() -> None:
    """IPython shows a big list through pretty() (first 1000 items, milliseconds); the hook must not build
    the FULL repr (hundreds of MB, seconds) on the kernel thread to keep 200 characters of it."""
    big = [(i, i) for i in range(4_000_000)]
    started = time.monotonic()
    pretty(big)
    shown = time.monotonic() - started
    started = time.monotonic()
    CellHistory().post_run_cell(result(big))
    recorded = time.monotonic() - started
    assert recorded < max(0.5, 10 * shown), (recorded, shown)


# --------------------------------------------------------------------------- cells show what ran


DANGEROUS = "import shutil\nshutil.rmtree('data')  # model's proposal\nresult = 1"
EDITED = "result = 1  # what the person approved"


async def test_code_cell_holds_the_edited_code_that_ran() -> None:
    namespace: dict[str, Any] = {}
    python = wrap_tool_definition(create_python_tool(namespace=namespace), ToolContext(namespace=namespace))

    def approve_edited(ctx: BeforeToolCallContext, signal: Any) -> BeforeToolCallResult:
        return BeforeToolCallResult(args={"code": EDITED})

    model = ScriptedModel([tool_call_message(tool_call("python", {"code": DANGEROUS})), text_message("done")])
    _events, messages = await run_loop(model, [user("x")], tools=[python], before_tool_call=approve_edited)
    assert namespace.get("result") == 1  # the edited code is what ran
    cell = code_cell_text(messages)
    assert "rmtree" not in cell, cell
    assert EDITED in cell
