"""Benchmark: what prompt caching saves over a 50-turn session on the native Anthropic provider (issue 24).

Each turn is one ``Agent.prompt``: the model (the scripted Anthropic Messages
server, ``tests/fake_anthropic.py``, over real HTTP through the real
``anthropic`` SDK) calls a ``@tool`` that returns about 1 KB, then answers;
two requests a turn. The server models the API's prompt cache
(``PromptCache``: a prefix up to a ``cache_control`` breakpoint that an
earlier request wrote is read back; prefixes under 1,024 tokens are not
cached) and reports that usage, as the API would, so the agent's cost is
what the provider code made of real usage numbers.

From the request bodies, per request: the share of its input (tokens, about
four characters each, in cache order: tools, system, messages) that sits
before its last cache breakpoint, and the share read from the cache. Then
the session's cost at the model table's prices (claude-sonnet-4-5): with
caching (cache reads and writes at their own prices, as the agent counted
them) against the same requests without caching (every input token at the
input price). Targets: every request from turn 3 on has at least 90 % of its
input before a breakpoint; with caching the session costs at most 0.3x.
Exits 1 when a target fails. Run from the repository root:
``python benchmarks/prompt_caching.py [turns]``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

TURNS = 50
MODEL_ID = "claude-sonnet-4-5"
FROM_TURN = 3
TARGET_SHARE = 0.90
TARGET_RATIO = 0.30
OUTPUT_TOKENS = 60
"""Tokens of each scripted answer, in the usage the server reports."""


def share_before_breakpoint(body: dict[str, Any]) -> float:
    from fake_anthropic import prompt_segments

    segments = prompt_segments(body)
    total = sum(count for count, _ in segments)
    running, before = 0, 0
    for count, breakpoint in segments:
        running += count
        if breakpoint:
            before = running
    return before / total if total else 0.0


def make_responder(cache: Any) -> Any:
    from fake_anthropic import Events, message_events, tool_use

    def responder(body: dict[str, Any]) -> Any:
        usage = {**cache.usage_for(body), "output_tokens": OUTPUT_TOKENS}
        last = body["messages"][-1]["content"][-1]
        if last.get("type") == "tool_result":
            return Events(message_events("Page read; nothing unusual.", usage=usage))
        page = len(body["messages"])
        return Events(message_events(tool_use("read_page", {"page": page}, f"toolu_{page}"), usage=usage))

    return responder


async def session(base_url: str, turns: int) -> tuple[Any, list[int]]:
    """Run the session; the agent's usage ledger and the number of requests before each turn."""
    from pi_kernel.agent import Agent
    from pi_kernel.ai import Model, StreamOptions
    from pi_kernel.tools import ToolRegistry, tool

    registry = ToolRegistry()

    @tool(registry=registry)
    def read_page(page: int) -> str:
        """Read one page of the service log.

        Args:
            page: Page number.
        """
        return f"page {page}:\n" + "\n".join(f"{page}.{line} INFO request served in 12 ms" for line in range(30))

    model = Model(MODEL_ID, provider="anthropic", base_url=base_url)
    agent = Agent(
        model, prepare_next_turn=registry.prepare_next_turn, stream_options=StreamOptions(api_key="bench-key-0000")
    )
    starts: list[int] = []
    requests = 0

    def count(event: Any) -> None:
        nonlocal requests
        requests += event.type == "message_start" and getattr(event.message, "role", "") == "assistant"

    agent.subscribe(count)
    for turn in range(turns):
        starts.append(requests)
        await agent.prompt(f"Read the next page of the log ({turn}).")
        last = agent.state.messages[-1]
        assert last.text.startswith("Page read"), last.error_message
    return agent.usage, starts


def measure(turns: int) -> dict[str, Any]:
    """Run the session. ``rows``: per request ``(turn, input tokens, share before a breakpoint, share read
    from the cache)``; ``totals``: the agent's usage; ``cached`` / ``uncached``: the session's cost in US
    dollars with caching (as the agent counted it) and without (every input token at the input price)."""
    from fake_anthropic import FakeAnthropic, PromptCache, prompt_segments

    from pi_kernel.ai.models import known_cost

    with FakeAnthropic(responder=make_responder(PromptCache())) as server:
        ledger, _ = asyncio.run(session(server.base_url, turns))
        bodies = server.bodies
    price = known_cost(MODEL_ID)
    assert price is not None and len(bodies) == 2 * turns, (price, len(bodies))
    replay = PromptCache()  # the same cache model over the bodies, for the read share per request
    rows = []
    uncached = 0.0
    for number, body in enumerate(bodies):
        total = sum(count for count, _ in prompt_segments(body))
        read = replay.usage_for(body)["cache_read_input_tokens"]
        rows.append((number // 2 + 1, total, share_before_breakpoint(body), read / total))
        uncached += (total * price.input + OUTPUT_TOKENS * price.output) / 1_000_000
    [totals] = ledger.by_model.values()
    return {"rows": rows, "totals": totals, "cached": totals.cost, "uncached": uncached}


def main(turns: int = TURNS) -> int:
    result = measure(turns)
    rows, totals = result["rows"], result["totals"]
    print(f"prompt caching: {turns} turns on anthropic:{MODEL_ID} (2 requests a turn: a tool call, then an answer)")
    print(f"{'turn':>5} {'input tokens':>13} {'before a breakpoint':>20} {'read from cache':>16}")
    for row in rows:
        if row[0] in {1, 2, FROM_TURN, 10, 25, turns}:
            print(f"{row[0]:>5} {row[1]:>13,} {row[2]:>19.1%} {row[3]:>15.1%}")
    later = [row for row in rows if row[0] >= FROM_TURN]
    lowest = min(row[2] for row in later)
    read = sum(row[3] * row[1] for row in later) / sum(row[1] for row in later)
    print(
        f"cache reads {totals.cache_read:,} · cache writes {totals.cache_write:,} · uncached input "
        f"{totals.input - totals.cache_read - totals.cache_write:,} · output {totals.output:,} tokens"
    )
    print(f"input read from the cache from turn {FROM_TURN} on: {read:.1%}")
    ratio = result["cached"] / result["uncached"]
    share_ok = lowest >= TARGET_SHARE
    ratio_ok = ratio <= TARGET_RATIO
    print(
        f"lowest share before a breakpoint from turn {FROM_TURN} on: {lowest:.1%} "
        f"(target >= {TARGET_SHARE:.0%}): {'PASS' if share_ok else 'FAIL'}"
    )
    print(
        f"session cost with caching ${result['cached']:.4f} / without ${result['uncached']:.4f} = {ratio:.2f}x "
        f"(target <= {TARGET_RATIO}x): {'PASS' if ratio_ok else 'FAIL'}"
    )
    return 0 if share_ok and ratio_ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else TURNS))
