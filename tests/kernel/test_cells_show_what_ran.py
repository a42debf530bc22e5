"""%%pi --cells: the new cell must hold the code that RAN, not the code the model first proposed.

A person approves a python call with edited arguments (the approval panel's edit, or a
before_tool_call hook that rewrites code). The edited code runs; the code cell offered
through set_next_input must carry that code (cell_runner.code_cell_text
must not read the assistant message's ToolCall.arguments), else the user would run a cell that
does what they explicitly refused. The python tool records the code it ran in details["code"].
"""

from __future__ import annotations

from typing import Any

from scripted_model import ScriptedModel, run_loop, text_message, tool_call, tool_call_message, user

from pi_kernel.agent import BeforeToolCallContext, BeforeToolCallResult
from pi_kernel.kernel.cell_runner import code_cell_text
from pi_kernel.tools.builtin import create_python_tool
from pi_kernel.tools.definition import ToolContext, wrap_tool_definition

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
