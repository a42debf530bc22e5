"""Benchmark: one batch of 8 tool calls that each wait 200 ms, run in parallel.

Two batches: 8 async tools (``await asyncio.sleep(0.2)``) and 8 sync tools
(``time.sleep(0.2)``, on the tool worker threads). A batch's wall time is from
its first ``tool_execution_start`` to its last ``tool_execution_end``; the
target is 1.15 x 200 ms, so the calls must really overlap, and the 8 sync ones
must not queue behind a small thread pool (the loop's default executor has 6
workers on 2 cores). The baseline is the same batch with
``tool_execution="sequential"`` (about 8 x 200 ms).

Run from the repository root: ``python benchmarks/parallel.py``. Exits 1 when a
batch misses the target.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from scripted_model import ScriptedModel, text_message, tool_call, tool_call_message  # noqa: E402

from pi_kernel.agent import Agent, AgentTool, AgentToolResult, ToolExecutionMode  # noqa: E402
from pi_kernel.ai import TextContent  # noqa: E402

CALLS = 8
WAIT = 0.2
TARGET = 1.15 * WAIT
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def wait_async(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    await asyncio.sleep(WAIT)
    return AgentToolResult([TextContent(f"async {params['n']}")])


def wait_sync(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
    time.sleep(WAIT)
    return AgentToolResult([TextContent(f"sync {params['n']}")])


async def batch_wall_time(execute: Any, mode: ToolExecutionMode, calls: int = CALLS) -> float:
    tool = AgentTool(name="wait", description="Wait a moment", parameters=SCHEMA, execute=execute)
    requests = [tool_call("wait", {"n": index}) for index in range(calls)]
    model = ScriptedModel([tool_call_message(*requests), text_message("done")], record=False)
    agent = Agent(model.model, stream_fn=model, tools=[tool], tool_execution=mode)
    marks: list[float] = []

    def listener(event: Any) -> None:
        if event.type in ("tool_execution_start", "tool_execution_end"):
            marks.append(time.perf_counter())

    agent.subscribe(listener)
    await agent.prompt("wait eight times")
    results = [message for message in agent.state.messages if message.role == "tool_result"]
    assert len(results) == calls and not any(result.is_error for result in results)
    return marks[-1] - marks[0]


async def main() -> int:
    # Warm up: the first validation imports and compiles (jsonschema alone takes
    # over a second to import here); that is not what this measures.
    await batch_wall_time(wait_async, "parallel", calls=1)
    # The tool thread pool starts its threads on first use; a kernel session pays
    # that once. Shown apart, then measured warm.
    cold = await batch_wall_time(wait_sync, "parallel")
    print(f"{CALLS} tool calls waiting {WAIT * 1000:.0f} ms each, one batch")
    print(f"target: parallel / one call's wait <= {TARGET / WAIT:.2f}x; baseline: the same batch run sequentially")
    header = f"{'':<12} {'parallel':>10} {'sequential':>11} {'par / wait':>11} {'par / seq':>10}  verdict"
    print(header)
    failed = 0
    for name, execute in (("async tools", wait_async), ("sync tools", wait_sync)):
        parallel = await batch_wall_time(execute, "parallel")
        sequential = await batch_wall_time(execute, "sequential")
        verdict = "PASS" if parallel <= TARGET else "FAIL"
        failed += parallel > TARGET
        print(
            f"{name:<12} {parallel * 1000:>7.0f} ms {sequential * 1000:>8.0f} ms"
            f" {parallel / WAIT:>10.2f}x {parallel / sequential:>9.3f}x  {verdict}"
        )
    print(f"(sync tools, first batch with a cold thread pool: {cold * 1000:.0f} ms)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
