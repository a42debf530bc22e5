"""Messages and content blocks: the contract's fields, roles, and JSON round trips.

``pi_kernel.ai.messages``: what enters a transcript is sendable and storable.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from scripted_model import ScriptedModel, echo_tool, run_loop, text_message, tool_call, tool_call_message, user
from scripted_model import tool_results as results_of

from pi_kernel.agent import Agent, BeforeToolCallContext, BeforeToolCallResult
from pi_kernel.ai import (
    AssistantMessage,
    Content,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    content_from_dict,
    message_from_dict,
    to_dict,
)
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

CONTENT: list[Content] = [
    TextContent("Hello, **world** — é 😀"),
    ThinkingContent("Let me think.", signature="reasoning_content"),
    ThinkingContent("No signature."),
    ImageContent("iVBORw0KGgo=", "image/png"),
    ToolCall("call_1", "edit", {"path": "a.py", "edits": [{"old_text": "x", "new_text": None}], "n": 1.5}),
    ToolCall("call_2", "read", {"path": "a"}, raw_arguments='{"path": "a",, '),
]

MESSAGES: list[Message] = [
    UserMessage("plain text"),
    UserMessage([TextContent("Look:"), ImageContent("R0lGOD", "image/gif")]),
    AssistantMessage(
        CONTENT[:3] + CONTENT[4:],
        "tool_use",
        Usage(1200, 40, 1024, 7, 1240, 0.000123),
        "gpt-4o-mini",
        "openai",
    ),
    AssistantMessage([TextContent("Half")], "aborted", Usage(), "m", "p", "Operation aborted"),
    AssistantMessage([], "error", Usage(cost=None), "m", "p", "429 Rate limited"),
    ToolResultMessage("call_1", "edit", [TextContent("Edited.")], {"diff": "-x\n+y", "lines": [1, 2]}),
    ToolResultMessage("call_2", "read", [TextContent("not JSON"), ImageContent("/9j/", "image/jpeg")], None, True),
    ToolResultMessage("call_3", "agent", [], usage=Usage(5, 6, 0, 0, 11, 0.5)),
]


def through_json(data: dict[str, Any]) -> Any:
    return json.loads(json.dumps(data))


@pytest.mark.parametrize("message", MESSAGES, ids=lambda message: f"{message.role}")
def test_every_message_round_trips_through_json(message: Message) -> None:
    data = to_dict(message)
    again = message_from_dict(through_json(data))
    assert type(again) is type(message)
    assert again == message
    assert to_dict(again) == data


@pytest.mark.parametrize("block", CONTENT, ids=lambda block: block.type)
def test_every_content_type_round_trips_through_json(block: Content) -> None:
    data = through_json(to_dict(block))
    assert data["type"] == block.type
    again = content_from_dict(data)
    assert type(again) is type(block) and again == block


def test_usage_round_trips_and_adds() -> None:
    usage = Usage(10, 5, 2, 1, 15, 0.25)
    assert Usage(**through_json(to_dict(usage))) == usage
    assert usage.add(Usage(1, 1, 0, 0, 2)) == Usage(11, 6, 2, 1, 17, 0.25)
    assert Usage().add(Usage()).cost is None


def test_roles_types_and_timestamps() -> None:
    before = int(time.time() * 1000)
    user, assistant, result = UserMessage("x"), AssistantMessage(), ToolResultMessage("c", "t")
    after = int(time.time() * 1000)
    assert (user.role, assistant.role, result.role) == ("user", "assistant", "tool_result")
    assert [block.type for block in CONTENT[:5]] == ["text", "thinking", "thinking", "image", "tool_call"]
    for message in (user, assistant, result):
        assert before <= message.timestamp <= after


def test_contract_field_order_and_defaults() -> None:
    # Positional order as the contract lists the fields.
    call = ToolCall("id", "name", {"a": 1})
    assert (call.id, call.name, call.arguments, call.raw_arguments) == ("id", "name", {"a": 1}, None)
    assert ThinkingContent("t").signature is None
    image = ImageContent("ZGF0YQ==", "image/webp")
    assert (image.data, image.mime_type) == ("ZGF0YQ==", "image/webp")
    usage = Usage(1, 2, 3, 4, 5, 0.1)
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens, usage.cost) == (
        1,
        2,
        3,
        4,
        5,
        0.1,
    )
    message = AssistantMessage([TextContent("a"), CONTENT[4], TextContent("b")], "tool_use", usage, "m", "p")
    assert (message.stop_reason, message.usage, message.model, message.provider, message.error_message) == (
        "tool_use",
        usage,
        "m",
        "p",
        None,
    )
    assert message.text == "ab" and message.tool_calls == [CONTENT[4]]
    result = ToolResultMessage("c1", "read", [TextContent("r")])
    assert (result.details, result.is_error, result.text) == (None, False, "r")


def test_unknown_role_or_content_type_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="Unknown message role: 'system'"):
        message_from_dict({"role": "system", "content": "x"})
    with pytest.raises(ValueError, match="Unknown content type: 'audio'"):
        content_from_dict({"type": "audio", "data": ""})


# --------------------------------------------------------------------------- sanitize


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
