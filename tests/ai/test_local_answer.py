"""The local model's answer shaping (``local_answer``) and prompt order (``local_prompt``), without the model.

What a reader sees: a short tool result opens the answer; an answer the token cap ends stops at its last
sentence or closed code block, never mid-line; the kernel's notebook context comes before the request.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pi_kernel.ai import AssistantMessage, Context, StreamOptions, TextContent, ToolCall, ToolResultMessage, UserMessage
from pi_kernel.ai.providers.local_answer import (
    HOLD_TOKENS,
    SEED_MAX_CHARS,
    SentenceCut,
    answer_seed,
    shaped_answer,
)
from pi_kernel.ai.providers.local_prompt import chat_messages


def result(text: str, name: str = "word_count", is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id="c", tool_name=name, content=[TextContent(text)], is_error=is_error)


def call_message() -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id="c", name="word_count", arguments={})], stop_reason="tool_use")


def test_a_short_result_opens_the_answer_as_its_tool_returned_it() -> None:
    assert answer_seed([UserMessage("How many?"), call_message(), result("9")]) == "word_count returned 9."
    assert answer_seed([result("21 °C is 69.8 °F")]) == "word_count returned 21 °C is 69.8 °F."
    assert answer_seed([result("Tool was not run.", is_error=True)]) == "word_count failed: Tool was not run."
    assert answer_seed([result("Paris: 21 °C", "t"), result("Oslo: 12 °C", "t")]) == (
        "t returned Paris: 21 °C. t returned Oslo: 12 °C."
    )


@pytest.mark.parametrize(
    "messages",
    [
        [UserMessage("Hi")],  # no tool result: the model answers alone
        [result("a table\nwith rows")],  # more than one line
        [result("x" * (SEED_MAX_CHARS + 1))],  # long
        [result("9"), result("y" * (SEED_MAX_CHARS + 1))],  # one long result among short ones
        [result("9"), UserMessage("and now?")],  # the results belong to an earlier question
    ],
)
def test_long_or_earlier_results_are_not_seeded(messages: list) -> None:
    assert answer_seed(messages) == ""


def shape(pieces: list[str], hit_limit: bool, seed: str = "") -> tuple[list[str], str]:
    stats = SimpleNamespace(hit_limit=False)

    def decode():  # the engine sets hit_limit before its generator ends
        yield from pieces
        stats.hit_limit = hit_limit

    sent = list(shaped_answer(seed, decode(), stats))
    return sent, "".join(sent)


def shape_capped(pieces: list[tuple[str, int]], cap: int) -> list[str]:
    """``pieces``: each piece's text and the tokens it took; the cap ends the decode when they reach ``cap``."""
    stats = SimpleNamespace(hit_limit=False, tokens=[])

    def decode():
        for text, count in pieces:
            stats.tokens.extend([0] * count)
            yield text
        stats.hit_limit = len(stats.tokens) >= cap

    return list(shaped_answer("", decode(), stats, cap))


def test_far_from_the_cap_the_answer_streams_at_once_and_near_it_ends_at_its_last_sentence() -> None:
    cap = HOLD_TOKENS + 10
    sent = shape_capped([("Once upon", 1), (" a time", 8), (" there was. A dragon", HOLD_TOKENS), (" who", 1)], cap)
    assert sent[0] == "Once upon"  # the first piece is not held for a whole sentence
    assert "".join(sent) == "Once upon a time there was."  # the cap still cuts back to the last sentence


def test_a_sentence_already_streamed_past_when_the_cap_ends_it_is_kept_whole() -> None:
    cap = HOLD_TOKENS + 10
    sent = shape_capped([("One. A very", 9), (" long sentence", HOLD_TOKENS), (" goes on", 1)], cap)
    assert "".join(sent) == "One. A very long sentence goes on"  # not cut mid-sentence at an arbitrary token


def test_an_answer_the_cap_ends_stops_at_its_last_sentence() -> None:
    _, text = shape(["It has nine", " words. The sentence is", " about a fox and"], hit_limit=True)
    assert text == "It has nine words."


def test_an_answer_that_ends_by_itself_is_kept_whole_and_streams_by_sentence() -> None:
    sent, text = shape(["One. Two", " and three"], hit_limit=False)
    assert text == "One. Two and three" and sent[0] == "One."


def test_a_seeded_answer_keeps_at_least_the_seed() -> None:
    _, text = shape([" The sentence", " has"], hit_limit=True, seed="word_count returned 9.")
    assert text == "word_count returned 9."
    _, text = shape([], hit_limit=False, seed="word_count returned 9.")
    assert text == "word_count returned 9."


def test_a_code_block_counts_only_once_closed() -> None:
    code = "Like this:\n```python\nx = 1. \ny = 2\n```\nThen run"
    _, text = shape([code[:30], code[30:]], hit_limit=True)
    assert text == "Like this:\n```python\nx = 1. \ny = 2\n```"
    _, text = shape(["Like this:\n```python\nx = 1. \ny ="], hit_limit=True)
    assert text == "Like this:"  # a sentence end inside an open block is no clean end


def test_without_any_clean_end_the_capped_text_is_kept() -> None:
    _, text = shape(["a long line without", " an end"], hit_limit=True)
    assert text == "a long line without an end"


def test_sentence_cut_never_sends_text_twice() -> None:
    cut = SentenceCut()
    sent = [cut.feed(piece) for piece in ["A. ", "B. C", "D"]] + [cut.finish(hit_limit=False)]
    assert "".join(sent) == "A. B. CD"


def test_the_notebook_context_comes_before_the_request_and_the_tool_choice_prompt_is_the_tool_list() -> None:
    from pi_kernel.ai import Tool

    message = UserMessage([TextContent("Say hello."), TextContent("\n\nNotebook context (what changed ...):\nIn [1]")])
    tool = Tool(name="shout", description="Shout.", parameters={"type": "object", "properties": {}})
    context = Context(system_prompt="A long agent prompt.", messages=[message], tools=[tool])

    answer = chat_messages(context)
    assert answer[-1]["content"].endswith("In [1]\n\nSay hello.") and answer[0]["content"].startswith("A long")
    focused = chat_messages(context, focus=True)
    assert "A long agent prompt." not in focused[0]["content"] and "- shout: Shout." in focused[0]["content"]


def test_a_forced_tool_choice_prompt_lists_only_the_forced_tool() -> None:
    """The decision prompt of ``--tool NAME`` is the same whatever other tools a front-end adds (the bridge's)."""
    from pi_kernel.ai import Tool
    from pi_kernel.ai.providers.local_prompt import tool_heads

    def tool(name: str, description: str) -> Tool:
        return Tool(name=name, description=description, parameters={"type": "object", "properties": {}})

    convert, edit = tool("convert", "Convert a temperature."), tool("edit_cell", "Edit a notebook cell.")
    context = Context(messages=[UserMessage("What is 21 degrees?")], tools=[convert, edit])
    forced = tool_heads(context, StreamOptions(tool_choice="convert"))
    focused = chat_messages(context, focus=True, heads=forced)
    assert "- convert: Convert" in focused[0]["content"] and "edit_cell" not in focused[0]["content"]
    alone = Context(messages=[UserMessage("What is 21 degrees?")], tools=[convert])
    assert focused == chat_messages(alone, focus=True, heads=tool_heads(alone, StreamOptions(tool_choice="convert")))
    auto = chat_messages(context, focus=True, heads=tool_heads(context, StreamOptions()))
    assert "- convert: Convert" in auto[0]["content"] and "- edit_cell: Edit" in auto[0]["content"]


def test_sentence_cut_scans_incrementally_and_finds_what_a_full_scan_finds() -> None:
    """``SentenceCut.feed`` scans only the new text; at every piece its clean end is the full scan's."""
    import random

    from pi_kernel.ai.providers.local_answer import last_clean_end

    pieces = ["a", " ", ".", "!", "?", "\n", "`", "```", "  ```py\n", "\n\n", "Hi. ", "x.\n", "\r", "\r\n", "\u2028"]
    chooser = random.Random(7)
    for _ in range(2000):
        cut = SentenceCut()
        for _ in range(chooser.randint(1, 25)):
            sent_before = cut.sent
            out = cut.feed("".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 4))))
            expected = max(sent_before, last_clean_end(cut.text, at_end=False))
            assert cut.sent == expected and out == cut.text[sent_before:expected], repr(cut.text)
