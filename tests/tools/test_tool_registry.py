"""``ToolRegistry``: redefinition in place, enable/disable/remove, both channels per turn, caching."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_kernel.ai import Context
from pi_kernel.tools import PromptConfig, ToolContext, ToolInfo, ToolRegistry, ToolRetry, tool
from pi_kernel.tools.definition import DefinedTool


def channels(registry: ToolRegistry) -> tuple[list[str], str, Context]:
    """What the next request would carry: API tool names and the system prompt."""
    context = Context(system_prompt="stale", messages=[], tools=None)
    registry.prepare_next_turn(context)
    assert context.tools is not None and context.system_prompt is not None
    return [t.name for t in context.tools], context.system_prompt, context


def define_mean(registry: ToolRegistry, snippet: str = "Mean of a column", body: str = "v1"):
    @tool(registry=registry, snippet=snippet, guidelines=[f"mean guideline {body}"])
    def mean(column: str) -> str:
        """Mean of a column."""
        return f"{body}:{column}"

    return mean


def define_plot(registry: ToolRegistry):
    @tool(registry=registry, snippet="Plot a column", label="Plot")
    def plot(column: str) -> str:
        """Plot a column.

        Second line is not in the listing.
        """
        return column

    return plot


def test_redefining_a_tool_replaces_it_in_both_channels_without_duplicates() -> None:
    registry = ToolRegistry(prompt=PromptConfig(cwd="/w", date="2025-01-01"))
    first = define_mean(registry, "Mean v1", "v1")
    define_plot(registry)
    second = define_mean(registry, "Mean v2", "v2")  # the cell re-run

    assert registry.names() == ["mean", "plot"]  # same position, no duplicate
    assert registry.get("mean") is second and first is not second
    names, prompt, context = channels(registry)
    assert names == ["mean", "plot"]
    assert "- mean: Mean v2\n- plot: Plot a column\n" in prompt
    assert "Mean v1" not in prompt and prompt.count("- mean:") == 1
    assert "- mean guideline v2\n" in prompt and "mean guideline v1" not in prompt
    # The API channel runs the new code.
    assert context.tools[0].execute("c1", {"column": "x"}).content[0].text == "v2:x"


def test_redefinition_keeps_the_disabled_state() -> None:
    registry = ToolRegistry()
    define_mean(registry)
    define_plot(registry)
    registry.disable("mean")
    define_mean(registry, body="v2")
    assert not registry.is_enabled("mean")
    assert channels(registry)[0] == ["plot"]
    registry.add(registry.get("mean"), enabled=True)
    assert registry.is_enabled("mean")


def test_enable_disable_remove_are_reflected_in_prepare_next_turn() -> None:
    registry = ToolRegistry(prompt=PromptConfig(cwd="/w", date="2025-01-01"))
    define_mean(registry)
    define_plot(registry)

    registry.disable("plot")
    names, prompt, _ = channels(registry)
    assert names == ["mean"]
    assert "- plot:" not in prompt and "- mean: Mean of a column" in prompt

    registry.enable("plot")
    registry.remove("mean")
    names, prompt, _ = channels(registry)
    assert names == ["plot"]
    assert "- mean:" not in prompt and "mean guideline" not in prompt and "- plot: Plot a column" in prompt

    registry.disable("plot")
    names, prompt, _ = channels(registry)
    assert names == [] and "Available tools:\n(none)" in prompt

    registry.set_active(["plot"])
    assert channels(registry)[0] == ["plot"]


def test_unknown_names_raise_a_clear_key_error() -> None:
    registry = ToolRegistry()
    define_plot(registry)
    for action in (registry.remove, registry.enable, registry.disable):
        with pytest.raises(KeyError, match=r"No tool named 'nope' \(known: plot\)"):
            action("nope")
    with pytest.raises(KeyError):
        registry.set_active(["plot", "nope"])
    assert registry.is_enabled("plot")  # a failed set_active changes nothing
    assert registry.get("nope") is None and "nope" not in registry


def test_list_and_definitions() -> None:
    registry = ToolRegistry()
    mean = define_mean(registry)
    plot = define_plot(registry)
    registry.disable("mean")
    assert registry.list() == [
        ToolInfo("mean", "mean", False, "Mean of a column."),
        ToolInfo("plot", "Plot", True, "Plot a column."),
    ]
    assert registry.definitions() == [mean, plot]
    assert registry.active_definitions() == [plot]
    assert list(registry) == [mean, plot] and len(registry) == 2


def test_wrapped_tools_are_cached_until_the_registry_changes() -> None:
    registry = ToolRegistry()
    define_mean(registry)
    define_plot(registry)
    first = registry.active_tools()
    assert registry.active_tools() is first
    assert all(isinstance(t, DefinedTool) for t in first)

    registry.disable("plot")
    registry.enable("plot")
    again = registry.active_tools()
    assert again is not first
    # Toggling does not re-wrap: the same AgentTool objects (and their retry budgets) survive.
    assert [id(t) for t in again] == [id(t) for t in first]

    define_mean(registry, body="v2")
    replaced = registry.active_tools()
    assert replaced[0] is not first[0] and replaced[1] is first[1]

    # prepare_next_turn hands out a copy: the loop may not mutate the cache.
    _, _, context = channels(registry)
    context.tools.clear()
    assert len(registry.active_tools()) == 2


def test_retry_budget_survives_turns_and_toggles() -> None:
    registry = ToolRegistry()

    @tool(registry=registry, max_retries=1)
    def picky(n: int) -> int:
        """Only 1."""
        if n != 1:
            raise ToolRetry("n must be 1")
        return n

    with pytest.raises(ToolRetry):
        registry.active_tools()[0].execute("c1", {"n": 2})
    registry.disable("picky")
    registry.enable("picky")
    with pytest.raises(ToolRetry, match="Stop retrying picky"):
        registry.active_tools()[0].execute("c2", {"n": 2})


def test_context_reaches_tools_and_the_prompt_working_directory(tmp_path: Path) -> None:
    registry = ToolRegistry(prompt=PromptConfig(date="2025-01-01"))

    @tool(registry=registry)
    def where(ctx: ToolContext) -> str:
        """Where."""
        return str(ctx.cwd)

    context = ToolContext(cwd=tmp_path)
    tools = registry.active_tools(context)
    assert registry.context is context
    assert tools[0].execute("c1", {}).content[0].text == str(tmp_path)
    assert registry.system_prompt().endswith(f"Current working directory: {tmp_path}")
    assert registry.active_tools(context) is tools  # same context: still cached


def test_prompt_config_changes_apply_on_the_next_turn() -> None:
    registry = ToolRegistry(prompt=PromptConfig(cwd="/w", date="2025-01-01"))
    define_plot(registry)
    registry.configure_prompt(append_prompt="Answer in French.", guidelines=["Prefer seaborn"])
    _, prompt, _ = channels(registry)
    assert "- Prefer seaborn\n" in prompt and prompt.endswith(
        "\n\nAnswer in French.\nCurrent date: 2025-01-01\nCurrent working directory: /w"
    )
    registry.prompt.custom_prompt = "Custom."
    expected = "Custom.\n\nAnswer in French.\nCurrent date: 2025-01-01\nCurrent working directory: /w"
    assert channels(registry)[1] == expected
    with pytest.raises(TypeError, match="Unknown prompt option 'colour'"):
        registry.configure_prompt(colour="red")


def test_subscribers_hear_every_change_and_a_broken_one_is_ignored() -> None:
    registry = ToolRegistry()
    heard: list[tuple[str, str | None]] = []
    registry.subscribe(lambda change, name: 1 / 0)
    unsubscribe = registry.subscribe(lambda change, name: heard.append((change, name)))
    define_plot(registry)
    define_plot(registry)
    registry.disable("plot")
    registry.disable("plot")  # no change, no event
    registry.enable("plot")
    registry.configure_prompt(append_prompt="x")
    registry.remove("plot")
    unsubscribe()
    define_plot(registry)
    assert heard == [
        ("added", "plot"),
        ("replaced", "plot"),
        ("disabled", "plot"),
        ("enabled", "plot"),
        ("prompt", None),
        ("removed", "plot"),
    ]


def test_registry_of_builds_from_definitions() -> None:
    scratch = ToolRegistry()
    plot = define_plot(scratch)
    registry = ToolRegistry.of([plot], prompt=PromptConfig(cwd="/w"))
    assert registry.names() == ["plot"] and registry.prompt.cwd == "/w"
