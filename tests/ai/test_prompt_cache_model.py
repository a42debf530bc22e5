"""The prompt-cache model of the scripted Anthropic server (``fake_anthropic.PromptCache``), which
``benchmarks/prompt_caching.py`` measures with: what the provider's breakpoints let a session read back."""

from __future__ import annotations

from fake_anthropic import PromptCache

from pi_kernel.ai.messages import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, UserMessage
from pi_kernel.ai.models import Model
from pi_kernel.ai.providers.anthropic_convert import build_anthropic_body
from pi_kernel.ai.stream_types import Context, StreamOptions

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
