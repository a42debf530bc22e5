"""Review of issue #4: behaviours the other tool tests leave open.

Render hooks from ``@tool``; a tool's exception through the loop; ``write``
holding the file queue; 100 parallel edits through symlink aliases; the
channels rebuilt before every request of one prompt; ``bash``'s non-zero exit
with truncated output.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from builtin_helpers import call_tool, make_ctx
from scripted_model import ScriptedModel, run_loop, text_message, tool_call, tool_call_message, tool_results, user

from pi_kernel.tools import PromptConfig, ToolRegistry, tool, wrap_tool_definition
from pi_kernel.tools.builtin import create_bash_tool, create_edit_tool, create_write_tool
from pi_kernel.tools.file_queue import hold_file_mutation_queue


def test_render_hooks_given_to_tool_stay_on_the_definition_the_ui_finds() -> None:
    def show_call(args: Any) -> str:
        return f"querying {args['city']}"

    def show_result(result: Any) -> str:
        return "rendered"

    @tool(registry=False, render_call=show_call, render_result=show_result)
    def weather(city: str) -> str:
        """Weather."""
        return city

    assert (weather.render_call, weather.render_result) == (show_call, show_result)
    wrapped = wrap_tool_definition(weather)
    assert wrapped.definition is weather and wrapped.definition.render_call is show_call
    assert not hasattr(wrapped, "render_call")  # UI-only: not part of what the agent or providers see
    assert weather.fn is not None
    plain = tool(registry=False)(weather.fn)
    assert (plain.render_call, plain.render_result) == (None, None)


async def test_a_tools_exception_becomes_an_error_result_with_its_message() -> None:
    @tool(registry=False)
    def divide(a: float, b: float) -> float:
        """Divide."""
        if b == 0:
            raise ZeroDivisionError("b must not be zero")
        return a / b

    calls = [tool_call("divide", {"a": 1, "b": 0}), tool_call("divide", {"a": 6, "b": 3})]
    model = ScriptedModel([tool_call_message(*calls), text_message("ok")])
    _events, messages = await run_loop(model, [user("go")], tools=[wrap_tool_definition(divide)])
    failed, ok = tool_results(messages)
    assert failed.is_error and failed.content[0].text == "b must not be zero"  # type: ignore[union-attr]
    assert not ok.is_error and ok.content[0].text == "2.0"  # type: ignore[union-attr]


async def test_write_waits_for_the_files_queue(tmp_path: Path) -> None:
    target = tmp_path / "held.txt"
    target.write_text("before")
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with hold_file_mutation_queue(target):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    await asyncio.to_thread(held.wait, 10)
    write = asyncio.create_task(
        call_tool(create_write_tool(), {"path": "held.txt", "content": "after"}, make_ctx(tmp_path))
    )
    for _ in range(20):  # give the write every chance to run if it ignored the queue
        await asyncio.sleep(0.01)
    assert not write.done() and target.read_text() == "before"
    release.set()
    await write
    assert target.read_text() == "after"
    await asyncio.to_thread(thread.join, 10)


async def test_100_parallel_edits_through_symlink_aliases_lose_no_update(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    (real_dir / "shared.txt").write_text("".join(f"value {i} = old\n" for i in range(100)))
    (tmp_path / "alias.txt").symlink_to(real_dir / "shared.txt")
    (tmp_path / "linkdir").symlink_to(real_dir, target_is_directory=True)
    spellings = ["real/shared.txt", "alias.txt", "linkdir/shared.txt", str(real_dir / "shared.txt")]
    calls = [
        tool_call(
            "edit",
            {"path": spellings[i % 4], "edits": [{"old_text": f"value {i} = old", "new_text": f"value {i} = new"}]},
        )
        for i in range(100)
    ]
    model = ScriptedModel([tool_call_message(*calls), text_message("done")])
    tools = [wrap_tool_definition(create_edit_tool(), make_ctx(tmp_path))]
    _events, messages = await run_loop(model, [user("edit")], tools=tools)
    assert [result.is_error for result in tool_results(messages)] == [False] * 100
    assert (real_dir / "shared.txt").read_text() == "".join(f"value {i} = new\n" for i in range(100))
    assert (tmp_path / "alias.txt").is_symlink()


async def test_both_channels_are_rebuilt_before_every_request_of_one_prompt() -> None:
    registry = ToolRegistry(prompt=PromptConfig(cwd="/w", date="2025-01-01"))

    @tool(registry=registry, snippet="Unlock the export tool")
    def unlock() -> str:
        """Unlock."""
        registry.enable("export")
        registry.disable("unlock")
        return "unlocked"

    @tool(registry=registry, snippet="Export the results", guidelines="Export only when asked")
    def export() -> str:
        """Export."""
        return "exported"

    registry.disable("export")
    model = ScriptedModel([tool_call_message(tool_call("unlock")), text_message("done")])
    await run_loop(model, [user("go")], prepare_next_turn=registry.prepare_next_turn)
    first, second = model.requests
    assert first.tool_names == ["unlock"] and second.tool_names == ["export"]
    before, after = first.system_prompt or "", second.system_prompt or ""
    assert "- unlock: Unlock the export tool" in before
    assert "- export:" not in before and "Export only when asked" not in before
    assert "- export: Export the results" in after and "- Export only when asked" in after
    assert "- unlock:" not in after


async def test_bash_non_zero_exit_with_long_output_reports_the_tail_trailer_and_code(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as failed:
        await call_tool(create_bash_tool(), {"command": "seq 1 3000; exit 4"}, make_ctx(tmp_path))
    text = str(failed.value)
    assert text.startswith("1002\n")
    trailer = "\n\n[Showing lines 1002-3001 of 3001. Full output: "
    assert trailer in text and text.endswith("]\n\nCommand exited with code 4")
    saved = text.split("Full output: ")[1].split("]")[0]
    assert Path(saved).read_text() == "".join(f"{i}\n" for i in range(1, 3001))
    os.unlink(saved)
