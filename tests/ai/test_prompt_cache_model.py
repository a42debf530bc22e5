"""The prompt-cache model of the scripted Anthropic server (``fake_anthropic.PromptCache``), which
``benchmarks/prompt_caching.py`` measures with: what the provider's breakpoints let a session read back."""

from __future__ import annotations

from fake_anthropic import PromptCache

from pi_kernel.ai.messages import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, UserMessage
from pi_kernel.ai.models import Context, Model, StreamOptions
from pi_kernel.ai.providers.anthropic_format import build_anthropic_body

CLAUDE = Model("claude-sonnet-4-5", provider="anthropic")
SYSTEM = "You are a careful data assistant. " * 200  # about 1,700 tokens: over the 1,024 minimum


def body(messages: list[Message], system: str = SYSTEM, cache: bool = True) -> dict:
    return build_anthropic_body(CLAUDE, Context(system, messages), StreamOptions(), cache=cache)


def history(turns: int) -> list[Message]:
    messages: list[Message] = []
    for turn in range(turns):
        call = ToolCall(f"toolu_{turn}", "read", {"page": turn})
        messages += [
            UserMessage(f"Read page {turn}."),
            AssistantMessage([call], stop_reason="tool_use", provider="anthropic"),
            ToolResultMessage(call.id, "read", [TextContent(f"page {turn}: " + "log line " * 100)]),
            AssistantMessage([TextContent("Read.")], provider="anthropic"),
        ]
    return messages


def test_each_request_reads_what_the_previous_one_wrote() -> None:
    cache = PromptCache()
    first = cache.usage_for(body(history(1)))
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 1024
    assert 0 < first["input_tokens"] < 20  # only the answer after the latest user turn sits after the breakpoint
    second = cache.usage_for(body([*history(1), UserMessage("And the next one?")]))
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert 0 < second["cache_creation_input_tokens"] < 50


def test_a_changed_system_prompt_or_no_breakpoints_read_nothing() -> None:
    cache = PromptCache()
    cache.usage_for(body(history(2)))
    changed = cache.usage_for(body([*history(2), UserMessage("next")], system=SYSTEM + "Today is Monday."))
    assert changed["cache_read_input_tokens"] == 0
    uncached = PromptCache().usage_for(body(history(2), cache=False))
    assert uncached["cache_read_input_tokens"] == uncached["cache_creation_input_tokens"] == 0


def test_short_prompts_are_not_cached() -> None:
    cache = PromptCache()
    short = cache.usage_for(body([UserMessage("hi")], system="Be brief."))
    assert short["cache_creation_input_tokens"] == 0 and short["input_tokens"] > 0


def parallel_calls(count: int) -> tuple[list[Message], list[Message]]:
    """A long conversation ending in a user question, and the same after ``count`` parallel tool calls."""
    before: list[Message] = []
    for turn in range(10):
        before += [UserMessage(f"Question {turn}: " + "context " * 300), AssistantMessage([TextContent("ok " * 50)])]
    before.append(UserMessage("Read all the files."))
    calls = [ToolCall(f"toolu_{n}", "read", {"path": f"f{n}"}) for n in range(count)]
    after = [*before, AssistantMessage(calls, stop_reason="tool_use", provider="anthropic")]
    after += [ToolResultMessage(call.id, "read", [TextContent("x" * 40)]) for call in calls]
    return before, after


def test_many_parallel_tool_calls_still_read_the_previous_requests_prefix() -> None:
    """Ten or more parallel calls add over 20 blocks: beyond the API's lookback from the latest breakpoint."""
    for count in (5, 10, 15):
        cache = PromptCache()
        before, after = parallel_calls(count)
        written = cache.usage_for(body(before))["cache_creation_input_tokens"]
        then = body(after)
        assert str(then).count("cache_control") <= 4
        usage = cache.usage_for(then)
        assert usage["cache_read_input_tokens"] >= written, count


def test_the_cache_minimum_follows_the_model_and_entries_expire_after_the_ttl() -> None:
    opus = build_anthropic_body(
        Model("claude-opus-4-5", provider="anthropic"), Context(SYSTEM, history(1)), StreamOptions()
    )
    assert PromptCache().usage_for(opus)["cache_creation_input_tokens"] == 0  # ~1,900 tokens: under 4,096
    cache = PromptCache()
    cache.usage_for(body(history(1)))
    cache.clock += 299
    assert cache.usage_for(body([*history(1), UserMessage("next")]))["cache_read_input_tokens"] > 1024
    cache.clock += 301
    assert cache.usage_for(body([*history(1), UserMessage("next")]))["cache_read_input_tokens"] == 0
