"""``pi_kernel.ai.messages``: what enters a transcript is sendable and storable."""

from __future__ import annotations

import json
import sys

from scripted_model import ScriptedModel, echo_tool, run_loop, text_message, tool_call, tool_call_message, user
from scripted_model import tool_results as results_of

from pi_kernel.agent import Agent, BeforeToolCallContext, BeforeToolCallResult
from pi_kernel.ai import AssistantMessage, ImageContent, TextContent, ToolCall, ToolResultMessage, UserMessage, to_dict
from pi_kernel.ai.messages import (
    BAD_IMAGE,
    MAX_DEPTH,
    TOO_DEEP_ARGUMENTS,
    TooDeepError,
    clean_data,
    clean_message,
    clean_text,
    clean_tool_call,
)
from pi_kernel.ai.secrets import mask
from pi_kernel.kernel.text_view import short_json
from pi_kernel.widgets.render import bound_strings, parse_arguments, pretty_json


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_lone_surrogates_become_replacement_characters_and_pairs_are_joined() -> None:
    assert clean_text("r\udce9sum\udce9.txt") == "r\ufffdsum\ufffd.txt"
    assert clean_text("\ud83d\ude00 and \ud800") == "\U0001f600 and \ufffd"
    plain = "plain é"
    assert clean_text(plain) is plain


def test_clean_data_is_iterative_and_bounded() -> None:
    deep = nested(sys.getrecursionlimit() * 3)
    try:
        clean_data(deep)
    except TooDeepError:
        pass
    else:
        raise AssertionError("a value deeper than the limit was kept")
    ok = nested(MAX_DEPTH)
    assert clean_data(ok) == ok
    cyclic: dict = {}
    cyclic["self"] = cyclic
    try:
        clean_data(cyclic)
    except TooDeepError:
        pass
    else:
        raise AssertionError("a cycle was kept")
    assert clean_data({"k\udce9": ("a", b"\xe9", 1)}) == {"k\ufffd": ["a", "\ufffd", 1]}


def test_clean_message_makes_every_message_json_and_utf8_safe() -> None:
    call = ToolCall("id\ud800", "echo", {"value": nested(1500)})
    messages = [
        UserMessage("hi \ud800"),
        AssistantMessage([TextContent("x\udce9"), call], stop_reason="tool_use", error_message="\udcff"),
        ToolResultMessage("id", "echo", [TextContent("r\udce9sum\udce9.txt")], details={"d": nested(1500)}),
    ]
    for message in messages:
        clean_message(message)
    assert call.arguments == {} and call.raw_arguments == TOO_DEEP_ARGUMENTS
    text = "\n".join(json.dumps(to_dict(message), ensure_ascii=False) for message in messages)
    text.encode("utf-8")  # raises on a lone surrogate
    assert "r\ufffdsum\ufffd.txt" in text


def test_previews_of_deep_arguments_still_streaming_do_not_recurse() -> None:
    deep = {"value": nested(sys.getrecursionlimit() * 3)}
    masked = mask(deep, ["sk-secret"], partial=True)
    assert "nested deeper than" in json.dumps(masked)
    assert "nested deeper than" in json.dumps(mask(deep))
    assert "nested deeper than" in json.dumps(bound_strings(deep, 10))
    assert short_json(deep)  # no RecursionError
    assert pretty_json(deep)
    assert parse_arguments("[" * 5000 + "]" * 5000) == (None, "Invalid JSON: nested too deeply")
    kept = {"a": nested(MAX_DEPTH)}
    assert mask(kept) == kept  # what a transcript holds is never cut


def test_edited_arguments_nested_too_deep_are_refused() -> None:
    call = clean_tool_call(ToolCall("c", "echo", {"value": nested(1500)}))
    assert call.arguments == {} and call.raw_arguments == TOO_DEEP_ARGUMENTS


async def test_the_loop_answers_calls_with_arguments_nested_too_deep_with_an_error() -> None:
    """From the model, or from a person's edit at approval: the call never runs, it gets an error result,
    and the transcript stays sendable."""
    executed: list = []

    def before(ctx: BeforeToolCallContext, signal: object) -> BeforeToolCallResult | None:
        return BeforeToolCallResult(args={"value": nested(200)}) if ctx.tool_call.id == "edited" else None

    model = ScriptedModel(
        [
            tool_call_message(
                tool_call("echo", {"value": nested(200)}, id="deep"), tool_call("echo", {"value": 1}, id="edited")
            ),
            text_message("done"),
        ]
    )
    _, messages = await run_loop(model, [user("x")], tools=[echo_tool(executed=executed)], before_tool_call=before)
    deep, edited = results_of(messages)
    assert executed == [] and deep.is_error and edited.is_error
    assert "nested deeper than" in deep.text and "nested deeper than" in edited.text
    json.dumps([to_dict(message) for message in messages])


def test_messages_set_from_outside_are_cleaned_too() -> None:
    agent = Agent(messages=[UserMessage("a\ud800")])
    assert agent.state.messages[0].content == "a\ufffd"
    agent.state.messages = [UserMessage("b\udce9")]
    assert agent.state.messages[0].content == "b\ufffd"


def test_text_that_is_not_text_and_images_that_are_not_images_are_made_safe() -> None:
    result = ToolResultMessage(
        "c",
        "t",
        [TextContent(None), ImageContent("not base64!", "image/png"), ImageContent("AAAA", "image/png")],  # type: ignore[arg-type]
    )
    clean_message(result)
    assert [type(block).__name__ for block in result.content] == ["TextContent", "TextContent", "ImageContent"]
    assert result.content[0].text == "" and result.content[1].text == BAD_IMAGE
