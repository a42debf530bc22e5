"""``@tool`` at run time: sync and async ``execute``, injected parameters, options reaching the
definition and the wrapped tool, calling the decorated function, default registries, and
hand-written definitions through ``wrap_tool_definition``.

Schemas and docstring parsing are in ``test_tool_decorator.py``.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

from pi_kernel.agent.types import AgentTool, AgentToolResult
from pi_kernel.ai import AbortController, AbortSignal, TextContent
from pi_kernel.tools import (
    FunctionTool,
    ToolContext,
    ToolDefinition,
    ToolRegistry,
    get_default_registry,
    set_default_registry,
    tool,
    wrap_tool_definition,
)
from pi_kernel.tools.definition import DefinedTool

# --------------------------------------------------------------------------- sync, async, injected parameters


def test_async_function_gives_async_execute_and_sync_stays_sync() -> None:
    @tool(registry=False)
    async def slow(n: int) -> int:
        """Slow."""
        await asyncio.sleep(0)
        return n + 1

    @tool(registry=False)
    def fast(n: int) -> int:
        """Fast."""
        return n + 1

    slow_tool, fast_tool = wrap_tool_definition(slow), wrap_tool_definition(fast)
    assert inspect.iscoroutinefunction(slow.execute) and inspect.iscoroutinefunction(slow_tool.execute)
    assert not inspect.iscoroutinefunction(fast.execute) and not inspect.iscoroutinefunction(fast_tool.execute)
    assert asyncio.run(slow_tool.execute("c1", {"n": 1})).content == [TextContent("2")]
    assert fast_tool.execute("c1", {"n": 1}).content == [TextContent("2")]


def test_injected_parameters_stay_out_of_the_schema_and_receive_the_runtime_values(tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    @tool(registry=False)
    def probe(text: str, tool_call_id: str, signal: AbortSignal, on_update, ctx: ToolContext) -> str:
        """Probe."""
        seen.update(tool_call_id=tool_call_id, signal=signal, ctx=ctx)
        on_update(f"working on {text}")
        return "done"

    schema = wrap_tool_definition(probe).json_schema()
    assert set(schema["properties"]) == {"text"}
    assert schema["required"] == ["text"]

    context = ToolContext(cwd=tmp_path)
    wrapped = wrap_tool_definition(probe, context)
    controller = AbortController()
    updates: list[AgentToolResult] = []
    result = wrapped.execute("call_7", {"text": "x"}, controller.signal, updates.append)
    assert result.content == [TextContent("done")]
    assert seen == {"tool_call_id": "call_7", "signal": controller.signal, "ctx": context}
    assert [update.content for update in updates] == [[TextContent("working on x")]]

    # Without a signal, context or update callback the tool still gets usable objects.
    seen.clear()
    wrapped_bare = wrap_tool_definition(probe)
    assert wrapped_bare.execute("call_8", {"text": "y"}).content == [TextContent("done")]
    assert isinstance(seen["signal"], AbortSignal) and not seen["signal"].aborted
    assert isinstance(seen["ctx"], ToolContext)


# --------------------------------------------------------------------------- options, callable, registry


def test_options_land_on_the_definition_and_the_wrapped_tool() -> None:
    registry = ToolRegistry()

    def approve_small(args) -> bool:
        return args.n < 10

    def upgrade(raw):
        return {"n": raw["number"]} if "number" in raw else raw

    @tool(
        name="count_up",
        label="Count up",
        description="Counts.",
        snippet="Count up from n",
        guidelines="Use count_up for counting",
        execution_mode="sequential",
        approval=approve_small,
        max_retries=5,
        registry=registry,
        prepare_arguments=upgrade,
    )
    def count(n: int) -> list[int]:
        return list(range(n))

    assert isinstance(count, FunctionTool)
    assert (count.name, count.label, count.description) == ("count_up", "Count up", "Counts.")
    assert count.prompt_snippet == "Count up from n"
    assert list(count.prompt_guidelines) == ["Use count_up for counting"]
    assert count.execution_mode == "sequential"
    assert count.approval is approve_small
    assert count.max_retries == 5
    assert registry.get("count_up") is count

    wrapped = wrap_tool_definition(count)
    assert isinstance(wrapped, AgentTool) and isinstance(wrapped, DefinedTool)
    assert wrapped.definition is count
    assert (wrapped.name, wrapped.label, wrapped.execution_mode) == ("count_up", "Count up", "sequential")
    assert wrapped.prepare_arguments is upgrade
    assert wrapped.retry_budget is not None and wrapped.retry_budget.max_retries == 5
    # Prompt metadata never reaches what providers see.
    assert "Count up from n" not in repr(wrapped.json_schema()) + wrapped.description
    assert not hasattr(wrapped, "prompt_snippet") and not hasattr(wrapped, "prompt_guidelines")


def test_decorated_object_is_still_callable_like_the_function() -> None:
    @tool(registry=False)
    def greet(name: str, punctuation: str = "!") -> str:
        """Say hello."""
        return f"hello {name}{punctuation}"

    assert greet("Ada") == "hello Ada!"
    assert greet(name="Bob", punctuation="?") == "hello Bob?"
    assert greet.__wrapped__(name="Cy") == "hello Cy!"
    assert greet.__name__ == "greet" and greet.__doc__ == "Say hello."
    assert list(inspect.signature(greet).parameters) == ["name", "punctuation"]


def test_tool_without_registry_registers_into_the_default_registry_when_set() -> None:
    registry = ToolRegistry()
    previous = get_default_registry()
    set_default_registry(registry)
    try:

        @tool
        def ping() -> str:
            """Ping."""
            return "pong"

        @tool(registry=False)
        def hidden() -> str:
            """Not registered."""
            return ""

    finally:
        set_default_registry(previous)
    assert registry.names() == ["ping"]
    assert registry.get("ping") is ping


def test_bare_decorator_without_default_registry_registers_nowhere() -> None:
    previous = get_default_registry()
    set_default_registry(None)
    try:

        @tool
        def lonely() -> str:
            """Alone."""
            return "x"

    finally:
        set_default_registry(previous)
    assert isinstance(lonely, FunctionTool) and lonely() == "x"


def test_hand_written_definition_wraps_with_its_context_and_result_conversion(tmp_path: Path) -> None:
    received = {}

    def execute(tool_call_id, params, signal, on_update, ctx):
        received["ctx"] = ctx
        return {"path": str(ctx.cwd), "n": params["n"]}

    defn = ToolDefinition(
        name="where",
        description="Where am I.",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        execute=execute,
    )
    context = ToolContext(cwd=tmp_path)
    result = wrap_tool_definition(defn, context).execute("c1", {"n": 1}, None, None)
    assert received["ctx"] is context
    assert result.content == [TextContent(f'{{"path": "{tmp_path}", "n": 1}}')]
