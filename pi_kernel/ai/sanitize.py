"""What may enter a transcript: text that encodes as UTF-8, data nested at most ``MAX_DEPTH`` deep.

A conversation must stay sendable (the provider's JSON request) and storable
(``%pi save``) whatever arrives: a file name that is not UTF-8
(``os.listdir`` gives lone surrogates such as ``"r\\udce9sum\\udce9.txt"``), a
lone surrogate escaped in a model's JSON, tool-call arguments nested thousands
deep (``json`` and ``dataclasses.asdict`` recurse and raise
``RecursionError``). Each message is made safe once, where it enters the
transcript (``clean_message``, called by the agent loop and by ``%pi load``),
so nothing downstream ever sees such a value:

- every string is made valid Unicode: lone surrogates become U+FFFD (a pair
  of surrogates stored as two code points is joined into its character);
- tool-call arguments nested deeper than ``MAX_DEPTH`` are not kept: the call
  keeps ``{}`` and a ``raw_arguments`` note, so validation gives the model an
  error result naming the problem (the call never runs);
- a tool result's ``details`` nested too deep (or holding a cycle) is replaced
  by a short note.

Every walk here uses an explicit stack: no recursion on the data's depth.
"""

from __future__ import annotations

from typing import Any

from pi_kernel.ai.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

MAX_DEPTH = 64
"""Deepest nesting of dicts and lists kept in a transcript (tool-call arguments, result details)."""

TOO_DEEP_ARGUMENTS = f"(arguments nested deeper than {MAX_DEPTH} levels were not kept)"
TOO_DEEP_DETAILS = f"(details nested deeper than {MAX_DEPTH} levels were not kept)"


class TooDeepError(ValueError):
    """Data nested deeper than the limit (or holding a reference cycle)."""


def clean_text(text: str) -> str:
    """``text`` as valid Unicode: lone surrogates become U+FFFD (the text itself when already valid)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _leaf(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value


def clean_data(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """A copy of JSON-like ``value`` (dicts, lists, tuples as lists) with every string cleaned.

    Other objects are kept as they are. Raises ``TooDeepError`` when containers nest deeper
    than ``max_depth`` (a cycle does too). Iterative: safe on any depth.
    """
    if not isinstance(value, (dict, list, tuple)):
        return _leaf(value)
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any, int]] = [(value, root, 1)]
    while stack:
        source, target, depth = stack.pop()
        if depth > max_depth:
            raise TooDeepError(f"nested deeper than {max_depth} levels")
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, (dict, list, tuple)):
                child: Any = {} if isinstance(item, dict) else []
                stack.append((item, child, depth + 1))
            else:
                child = _leaf(item)
            if isinstance(target, dict):
                target[_leaf(key)] = child
            else:
                target.append(child)
    return root


def depth_of(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep ``value`` nests (0 for a scalar), counting no further than ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list, tuple)):
            continue
        deepest = max(deepest, depth)
        if depth > limit:
            return deepest
        stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _clean_block(block: Any) -> None:
    if isinstance(block, TextContent):
        block.text = clean_text(block.text)
    elif isinstance(block, ThinkingContent):
        block.thinking = clean_text(block.thinking)
        block.signature = _leaf(block.signature)
    elif isinstance(block, ImageContent):
        block.data, block.mime_type = clean_text(block.data), clean_text(block.mime_type)
    elif isinstance(block, ToolCall):
        block.id, block.name = clean_text(block.id), clean_text(block.name)
        block.raw_arguments = _leaf(block.raw_arguments)
        try:
            block.arguments = clean_data(block.arguments)
        except TooDeepError:
            block.arguments, block.raw_arguments = {}, TOO_DEEP_ARGUMENTS


def clean_message(message: Any) -> Any:
    """Make ``message`` sendable and storable, in place (see the module doc); returns it."""
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            message.content = clean_text(message.content)
        else:
            for user_block in message.content:
                _clean_block(user_block)
    elif isinstance(message, AssistantMessage):
        for block in message.content:
            _clean_block(block)
        message.error_message = _leaf(message.error_message)
        message.model, message.provider = clean_text(message.model), clean_text(message.provider)
    elif isinstance(message, ToolResultMessage):
        for block in message.content:
            _clean_block(block)
        message.tool_call_id, message.tool_name = clean_text(message.tool_call_id), clean_text(message.tool_name)
        try:
            message.details = clean_data(message.details)
        except TooDeepError:
            message.details = TOO_DEEP_DETAILS
    return message
