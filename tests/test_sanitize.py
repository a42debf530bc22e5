"""``pi_kernel.ai.sanitize``: what enters a transcript is sendable and storable."""

from __future__ import annotations

import json
import sys

from pi_kernel.ai import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage
from pi_kernel.ai.sanitize import MAX_DEPTH, TOO_DEEP_ARGUMENTS, TooDeepError, clean_data, clean_message, clean_text


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
    from pi_kernel.ai import to_dict

    text = "\n".join(json.dumps(to_dict(message), ensure_ascii=False) for message in messages)
    text.encode("utf-8")  # raises on a lone surrogate
    assert "r\ufffdsum\ufffd.txt" in text
