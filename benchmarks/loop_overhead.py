"""Benchmark: the agent loop's cost per tool round trip, against pydantic-ai and openai-agents.

Each framework runs one prompt of 500 turns; in every turn an in-process
scripted model asks for one tool call (an async ``echo``), the framework runs
it and sends the result back, until the 501st answer is plain text. Nothing
goes over a network and no scripted model serializes the history (a real
provider would, once per request, whatever the framework). The scripted model
notes the time of every request; a round trip is the time between two
requests: the framework's bookkeeping, the tool call and the result message.
A 20-turn warm-up run first keeps one-time imports and caches out of it.

Ours goes through the public ``Agent`` (events to a subscribed listener, the
state reducer, the scripted model streaming real ``AssistantMessageEvent``s:
start, toolcall start/delta/end, done). pydantic-ai runs ``Agent.run`` on a
``FunctionModel``; openai-agents runs ``Runner.run`` on a ``Model`` subclass
(tracing off).

Prints mean, early (first 50) and late (last 50) round-trip times, and
ours / pydantic-ai against the target (at most 0.5x): PASS or FAIL. A peer
that is not installed (``pip install .[bench]``) is reported and skipped.
Run from the repository root: ``python benchmarks/loop_overhead.py [turns]``.
Exits 1 when the target fails or ours could not be measured (0 when the peer
is missing and there is nothing to compare against).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

TURNS = int(sys.argv[1]) if len(sys.argv) > 1 else 500
WARM_UP_TURNS = 20
EDGE = 50
TARGET_RATIO = 0.5


def summarize(stamps: list[float]) -> dict[str, float] | None:
    """Round-trip times (ms) from the request timestamps: mean, early, late."""
    gaps = [(later - earlier) * 1000 for earlier, later in itertools.pairwise(stamps)]
    if len(gaps) < TURNS:
        return None
    return {
        "mean": statistics.fmean(gaps),
        "early": statistics.fmean(gaps[:EDGE]),
        "late": statistics.fmean(gaps[-EDGE:]),
    }


# --------------------------------------------------------------------------- ours


async def run_ours(turns: int) -> list[float]:
    from scripted_model import ScriptedModel, text_message, tool_call, tool_call_message

    from pi_kernel.agent import Agent, AgentTool, AgentToolResult
    from pi_kernel.ai import TextContent

    stamps: list[float] = []

    def respond(turn: int) -> Callable[[Any, Any], Any]:
        def response(context: Any, options: Any) -> Any:
            stamps.append(time.perf_counter())
            if turn == turns:
                return text_message("done")
            return tool_call_message(tool_call("echo", {"value": f"v{turn}"}, id=f"call_{turn}"))

        return response

    async def echo(tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(params["value"])])

    schema = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}
    tool = AgentTool(name="echo", description="Echo a value", parameters=schema, execute=echo)
    model = ScriptedModel([respond(turn) for turn in range(turns + 1)], chunk_chars=None, record=False)
    agent = Agent(model.model, stream_fn=model, tools=[tool])
    events = 0

    def listener(event: Any) -> None:
        nonlocal events
        events += 1

    agent.subscribe(listener)
    await agent.prompt("echo 500 times")
    assert len(agent.state.messages) == 2 * turns + 2, len(agent.state.messages)
    assert agent.state.messages[-1].text == "done"
    return stamps


# --------------------------------------------------------------------------- pydantic-ai


async def run_pydantic_ai(turns: int) -> list[float]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits

    stamps: list[float] = []

    async def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
        # async: a sync function would be run on a thread each turn. Usage given, as a
        # real provider reports it: else FunctionModel estimates it over the whole history.
        turn = len(stamps)
        stamps.append(time.perf_counter())
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        if turn == turns:
            return ModelResponse(parts=[TextPart("done")], usage=usage)
        call = ToolCallPart("echo", {"value": f"v{turn}"}, tool_call_id=f"call_{turn}")
        return ModelResponse(parts=[call], usage=usage)

    agent = Agent(FunctionModel(respond))

    @agent.tool_plain
    async def echo(value: str) -> str:
        """Echo a value."""
        return value

    result = await agent.run("echo 500 times", usage_limits=UsageLimits(request_limit=None))
    assert result.output == "done"
    return stamps


# --------------------------------------------------------------------------- openai-agents


async def run_openai_agents(turns: int) -> list[float]:
    from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)
    stamps: list[float] = []

    class ScriptedPeerModel(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            turn = len(stamps)
            stamps.append(time.perf_counter())
            if turn == turns:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                item: Any = ResponseOutputMessage(
                    id="msg", type="message", role="assistant", status="completed", content=[text]
                )
            else:
                item = ResponseFunctionToolCall(
                    type="function_call", call_id=f"call_{turn}", name="echo", arguments=f'{{"value": "v{turn}"}}'
                )
            return ModelResponse(output=[item], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def echo(value: str) -> str:
        """Echo a value."""
        return value

    agent = Agent(name="bench", tools=[echo], model=ScriptedPeerModel(), model_settings=ModelSettings())
    result = await Runner.run(agent, "echo 500 times", max_turns=turns + 5)
    assert result.final_output == "done"
    return stamps


# --------------------------------------------------------------------------- main


async def measure(name: str, run: Callable[[int], Awaitable[list[float]]]) -> dict[str, float] | None:
    try:
        await run(WARM_UP_TURNS)  # first-use imports and caches are not the loop's cost
        gc.collect()
        stamps = await run(TURNS)
    except ImportError as error:
        print(f"{name:<15} not installed ({error.name}); pip install '.[bench]' to compare")
        return None
    result = summarize(stamps)
    if result is None:
        print(f"{name:<15} made only {len(stamps)} requests")
    return result


def main() -> int:
    print(f"Agent loop: {TURNS} tool round trips against an in-process scripted model (ms per round trip)")
    print(f"{'':<15} {'mean':>9} {'early':>9} {'late':>9}")
    results: dict[str, dict[str, float] | None] = {}
    for name, run in (("pi-kernel", run_ours), ("pydantic-ai", run_pydantic_ai), ("openai-agents", run_openai_agents)):
        results[name] = stats = asyncio.run(measure(name, run))
        if stats:
            print(f"{name:<15} {stats['mean']:>9.3f} {stats['early']:>9.3f} {stats['late']:>9.3f}")
    ours, peer = results["pi-kernel"], results["pydantic-ai"]
    if ours and peer:
        ratio = ours["mean"] / peer["mean"]
        verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
        print(f"ours / pydantic-ai: {ratio:.4f}x (target <= {TARGET_RATIO}x): {verdict}")
        growth = ours["late"] / ours["early"]
        print(f"ours late / early: {growth:.2f}x (history-proportional work would make this grow)")
    other = results["openai-agents"]
    if ours and other:
        print(f"ours / openai-agents: {ours['mean'] / other['mean']:.4f}x")
    if not ours:
        return 1
    if not peer:
        print(f"no baseline: the target (<= {TARGET_RATIO}x pydantic-ai) cannot be checked; pip install '.[bench]'")
        return 1
    return 1 if ours["mean"] / peer["mean"] > TARGET_RATIO else 0


if __name__ == "__main__":
    sys.exit(main())
