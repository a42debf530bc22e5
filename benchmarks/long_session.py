"""Benchmark: a session of 300 turns with tool calls against the scripted server (issue 15).

Each turn is one ``Agent.prompt``: the model (the scripted OpenAI-compatible
server over real HTTP, through the real ``openai`` client) calls a ``@tool``
that returns about 2 KB, then answers. The server reports the request's real
size as its usage (characters / 4), as a provider would. The model's context
window is 16,000 tokens, so the conversation outgrows it many times over and
compaction keeps it in: the server writes each summary at once.

Prints, at turns 1, 100 and 300: the size of the turn's first request (JSON
bytes and estimated tokens) and the per-turn overhead (the turn's wall time;
the server answers at once, so this is the kernel-side cost: building the
request from the history, the estimate, events, the tool, compaction when it
happens). Overhead is the median of 10 turns around each point, so a
compaction turn (two extra requests) does not decide it alone; the number of
compactions is printed too. Targets: every request stays under the window;
overhead at turn 300 at most 2x turn 1. Exits 1 when a target fails.
Run from the repository root: ``python benchmarks/long_session.py [turns]``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

TURNS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
WINDOW = 16_000
WARM_UP_TURNS = 5
AROUND = 10
TARGET_RATIO = 2.0


def request_tokens(body: dict[str, Any]) -> int:
    return (len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))) // 4


def responder(body: dict[str, Any]) -> Any:
    from fake_openai import ToolCallSpec, text_chunks, tool_call_chunks, usage_dict

    from pi_kernel.agent.compaction import SUMMARY_PROMPT

    usage = usage_dict(request_tokens(body), 20)
    if body["messages"][0]["content"] == SUMMARY_PROMPT:
        return text_chunks("## Goal\nRead the log.\n## Done\nRead pages.\n## Pending\nMore pages.", usage=usage)
    if body["messages"][-1]["role"] == "user":
        call = ToolCallSpec("read_page", {"page": len(body["messages"])}, f"call_{len(body['messages'])}")
        return tool_call_chunks([call], usage=usage)
    return text_chunks("Page read; nothing unusual.", usage=usage)


async def session(base_url: str, turns: int, server: Any) -> tuple[list[float], list[int], int]:
    from pi_kernel.agent import Agent
    from pi_kernel.ai import Model
    from pi_kernel.tools import ToolRegistry, tool

    registry = ToolRegistry()

    @tool(registry=registry)
    def read_page(page: int) -> str:
        """Read one page of the log.

        Args:
            page: Page number.
        """
        return f"page {page}:\n" + "\n".join(f"{page}.{line} INFO request served in 12 ms" for line in range(60))

    model = Model("fake-model", provider="llamacpp", base_url=base_url, context_window=WINDOW, max_tokens=1_000)
    agent = Agent(model, prepare_next_turn=registry.prepare_next_turn)
    compactions = 0

    def count(event: Any) -> None:
        nonlocal compactions
        compactions += event.type == "compaction"

    agent.subscribe(count)
    times: list[float] = []
    sizes: list[int] = []
    for turn in range(turns):
        first = len(server.bodies)
        started = time.perf_counter()
        await agent.prompt(f"Read the next page of the log ({turn}).")
        times.append(time.perf_counter() - started)
        assert agent.state.messages[-1].text.startswith("Page read"), agent.state.messages[-1].error_message
        sizes.append(max(request_tokens(body) for body in server.bodies[first:]))
    return times, sizes, compactions


def around(values: list[float], turn: int) -> float:
    index = min(max(turn - 1, 0), len(values) - 1)
    start = max(0, min(index - AROUND // 2, len(values) - AROUND))
    return statistics.median(values[start : start + AROUND])


def main() -> int:
    from fake_openai import FakeOpenAI

    with FakeOpenAI(responder=responder) as server:
        asyncio.run(session(server.base_url, WARM_UP_TURNS, server))
        sent_before = len(server.bodies)
        times, sizes, compactions = asyncio.run(session(server.base_url, TURNS, server))
        bodies = server.bodies[sent_before:]
    points = [1, min(100, TURNS), TURNS]
    print(f"long session: {TURNS} turns, each a tool call (~2 KB result) and an answer; window {WINDOW:,} tokens")
    print(f"{'turn':>6} {'request tokens':>15} {'overhead ms (median of 10)':>28}")
    for turn in points:
        print(f"{turn:>6} {sizes[turn - 1]:>15,} {around(times, turn) * 1000:>28.1f}")
    largest = max(request_tokens(body) for body in bodies)
    ratio = around(times, TURNS) / around(times, 1)
    fits = largest < WINDOW
    print(f"compactions: {compactions}; requests: {len(bodies)}; largest request: {largest:,} tokens")
    print(f"request under the window ({WINDOW:,}): {'PASS' if fits else 'FAIL'}")
    print(f"overhead turn {TURNS} / turn 1: {ratio:.2f}x (target <= {TARGET_RATIO}x): ", end="")
    print("PASS" if ratio <= TARGET_RATIO else "FAIL")
    return 0 if fits and ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
