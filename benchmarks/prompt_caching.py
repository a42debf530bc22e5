"""Benchmark: what prompt caching saves over a 50-turn session on the native Anthropic provider (issue 24).

Each turn is one ``Agent.prompt``: the model (the scripted Anthropic Messages
server, ``tests/fake_anthropic.py``, over real HTTP through the real
``anthropic`` SDK) calls a ``@tool`` that returns about 1 KB, then answers;
two requests a turn. The server models the API's prompt cache
(``PromptCache``: a prefix up to a ``cache_control`` breakpoint that an
earlier request wrote is read back; prefixes under 1,024 tokens are not
cached) and reports that usage, as the API would, so the agent's cost is
what the provider code made of real usage numbers.

Per request: the share of its input (tokens, about four characters each, in
cache order: tools, system, messages) that sits before its last cache
breakpoint (100 % by construction, as the breakpoint sits on the latest user
message: it shows where the breakpoints are, not what they save), and the
share the server read from its cache. Then the session's cost at the model
table's prices (claude-sonnet-4-5): with caching (cache reads and writes at
their own prices, as the agent counted them) against the same requests
without caching (every input token at the input price).

Two sessions side by side: one without pauses (each request 15 s of the
server's clock after the one before), and the same with a pause of six
minutes before the middle turn: longer than the cache's five-minute lifetime
(``PromptCache.ttl``), so that turn writes the whole prompt again. Targets,
for the session without pauses: from turn 3 on at least 90 % of the input
read from the cache and at least 90 % before a breakpoint; at most 0.3x the
cost. The paused session is reported, not gated. Not modelled: changing the
thinking setting or the tool choice between requests (``--tool``'s forced
first request, ``%pi thinking``) invalidates the cached messages on the real
API, so such a request reads only tools and system.
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
TARGET_READ = 0.90
SECONDS_PER_REQUEST = 15.0
PAUSE_SECONDS = 360.0
"""Longer than the cache's five minutes."""
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


def make_responder(cache: Any, usages: list[dict[str, int]]) -> Any:
    from fake_anthropic import Events, message_events, tool_use

    def responder(body: dict[str, Any]) -> Any:
        cache.clock += SECONDS_PER_REQUEST
        usages.append(cache.usage_for(body))
        usage = {**usages[-1], "output_tokens": OUTPUT_TOKENS}
        last = body["messages"][-1]["content"][-1]
        if last.get("type") == "tool_result":
            return Events(message_events("Page read; nothing unusual.", usage=usage))
        page = len(body["messages"])
        return Events(message_events(tool_use("read_page", {"page": page}, f"toolu_{page}"), usage=usage))

    return responder


async def session(base_url: str, turns: int, before_turn: Any = None) -> tuple[Any, list[int]]:
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
        if before_turn is not None:
            before_turn(turn + 1)
        await agent.prompt(f"Read the next page of the log ({turn}).")
        last = agent.state.messages[-1]
        assert last.text.startswith("Page read"), last.error_message
    return agent.usage, starts


def measure(turns: int, pause_before: int | None = None) -> dict[str, Any]:
    """Run the session (with ``PAUSE_SECONDS`` of the server's clock before turn ``pause_before``, if given).
    ``rows``: per request ``(turn, input tokens, share before a breakpoint, share read from the cache)``;
    ``totals``: the agent's usage; ``cached`` / ``uncached``: the session's cost in US dollars with caching
    (as the agent counted it) and without (every input token at the input price); ``read``: the share of the
    input read from the cache from turn ``FROM_TURN`` on."""
    from fake_anthropic import FakeAnthropic, PromptCache, prompt_segments

    from pi_kernel.ai.models import known_cost

    cache = PromptCache()
    usages: list[dict[str, int]] = []

    def before_turn(turn: int) -> None:
        if turn == pause_before:
            cache.clock += PAUSE_SECONDS

    with FakeAnthropic(responder=make_responder(cache, usages)) as server:
        ledger, _ = asyncio.run(session(server.base_url, turns, before_turn))
        bodies = server.bodies
    price = known_cost(MODEL_ID)
    assert price is not None and len(bodies) == len(usages) == 2 * turns, (price, len(bodies), len(usages))
    rows = []
    uncached = 0.0
    for number, (body, usage) in enumerate(zip(bodies, usages, strict=True)):
        total = sum(usage.values())
        rows.append((number // 2 + 1, total, share_before_breakpoint(body), usage["cache_read_input_tokens"] / total))
        uncached += (total * price.input + OUTPUT_TOKENS * price.output) / 1_000_000
        assert abs(total - sum(count for count, _ in prompt_segments(body))) <= 1
    [totals] = ledger.by_model.values()
    later = [row for row in rows if row[0] >= FROM_TURN]
    read = sum(row[3] * row[1] for row in later) / sum(row[1] for row in later) if later else 0.0
    return {"rows": rows, "totals": totals, "cached": totals.cost, "uncached": uncached, "read": read}


def main(turns: int = TURNS) -> int:
    pause = turns // 2 + 1
    steady, paused = measure(turns), measure(turns, pause_before=pause)
    print(f"prompt caching: {turns} turns on anthropic:{MODEL_ID} (2 requests a turn: a tool call, then an answer)")
    print(f"side by side: no pause | a {PAUSE_SECONDS / 60:.0f}-minute pause before turn {pause} (cache TTL 5 min)")
    print(f"{'turn':>5} {'input tokens':>13} {'before a breakpoint':>20} {'read from cache':>16} {'read (pause)':>13}")
    for row, other in zip(steady["rows"], paused["rows"], strict=True):
        if row[0] in {1, 2, FROM_TURN, 10, pause, turns}:
            print(f"{row[0]:>5} {row[1]:>13,} {row[2]:>19.1%} {row[3]:>15.1%} {other[3]:>12.1%}")
    for name, result in (("no pause", steady), ("pause", paused)):
        totals = result["totals"]
        print(
            f"{name:>8}: cache reads {totals.cache_read:,} · cache writes {totals.cache_write:,} · uncached input "
            f"{totals.input - totals.cache_read - totals.cache_write:,} · output {totals.output:,} tokens · "
            f"read from turn {FROM_TURN} on {result['read']:.1%} · cost ${result['cached']:.4f} / "
            f"${result['uncached']:.4f} = {result['cached'] / result['uncached']:.2f}x"
        )
    later = [row for row in steady["rows"] if row[0] >= FROM_TURN]
    lowest = min(row[2] for row in later)
    ratio = steady["cached"] / steady["uncached"]
    checks = [
        (
            f"input read from the cache from turn {FROM_TURN} on",
            steady["read"],
            f">= {TARGET_READ:.0%}",
            steady["read"] >= TARGET_READ,
        ),
        (
            f"lowest share before a breakpoint from turn {FROM_TURN} on (by construction)",
            lowest,
            f">= {TARGET_SHARE:.0%}",
            lowest >= TARGET_SHARE,
        ),
    ]
    for label, value, target, ok in checks:
        print(f"{label}: {value:.1%} (target {target}): {'PASS' if ok else 'FAIL'}")
    ratio_ok = ratio <= TARGET_RATIO
    print(
        f"session cost (no pause) with caching ${steady['cached']:.4f} / without ${steady['uncached']:.4f} = "
        f"{ratio:.2f}x (target <= {TARGET_RATIO}x): {'PASS' if ratio_ok else 'FAIL'}"
    )
    return 0 if ratio_ok and all(ok for *_, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else TURNS))
