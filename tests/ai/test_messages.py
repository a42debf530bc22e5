"""Messages and content blocks: the contract's fields, roles, and JSON round trips."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

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
