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
- a tool result's ``details`` are kept as JSON data: an object JSON cannot
  hold (a lock, a handle) becomes its ``repr``, a key that is not a string,
  number, bool or ``None`` (a tuple) becomes its ``repr`` too (the live
  objects stay on the ``tool_execution_end`` event for the views); details
  nested too deep (or holding a cycle) are replaced by a short note;
- a text field holding ``None`` or another type becomes a string, and an image
  block whose data is not base64 (or whose type is not ``image/*``) becomes a
  text note: the provider would refuse every later request that carried it.

Every walk here uses an explicit stack: no recursion on the data's depth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
TOO_DEEP_MARK = f"… (nested deeper than {MAX_DEPTH} levels)"
BAD_IMAGE = "(an image was dropped: its data is not a base64 image)"
BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


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


def _json_leaf(value: Any) -> Any:
    if value is None or isinstance(value, (str, bytes, bytearray, bool, int, float)):
        return _leaf(value)
    try:
        return clean_text(repr(value))
    except Exception:  # noqa: BLE001 - a broken __repr__ must not break the transcript
        return f"<{type(value).__name__}>"


def _json_key(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int, float)):
        return _leaf(value)
    return _json_leaf(value)


def json_data(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """Like ``clean_data``, but the copy is JSON data: other objects (and keys that JSON cannot hold,
    such as tuples) become their ``repr``. Raises ``TooDeepError`` as ``clean_data`` does."""
    return _rebuild(value, _json_leaf, _json_key, max_depth, None)


def clean_data(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """A copy of JSON-like ``value`` (dicts, lists, tuples as lists) with every string cleaned.

    Other objects are kept as they are. Raises ``TooDeepError`` when containers nest deeper
    than ``max_depth`` (a cycle does too). Iterative: safe on any depth.
    """
    return _rebuild(value, _leaf, _leaf, max_depth, None)


def map_strings(
    value: Any,
    strings: Callable[[str], Any],
    keys: Callable[[str], Any] | None = None,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """JSON-like ``value`` rebuilt with ``strings`` applied to every string and ``keys`` to every string
    mapping key (other keys and values kept; tuples become lists). A container deeper than
    ``max_depth`` (or a cycle) is shown as ``TOO_DEEP_MARK``. Iterative: safe on any depth (for
    previews of arguments still streaming, which have not passed ``clean_message`` yet)."""

    def leaf(item: Any) -> Any:
        return strings(item) if isinstance(item, str) else item

    def key(item: Any) -> Any:
        return keys(item) if keys is not None and isinstance(item, str) else item

    return _rebuild(value, leaf, key, max_depth, TOO_DEEP_MARK)


def _rebuild(
    value: Any, leaf: Callable[[Any], Any], key: Callable[[Any], Any], max_depth: int, too_deep: str | None
) -> Any:
    if not isinstance(value, (dict, list, tuple)):
        return leaf(value)
    if max_depth < 1:
        if too_deep is None:
            raise TooDeepError(f"nested deeper than {max_depth} levels")
        return too_deep
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any, int]] = [(value, root, 1)]
    while stack:
        source, target, depth = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for name, item in items:
            if not isinstance(item, (dict, list, tuple)):
                child: Any = leaf(item)
            elif depth >= max_depth:
                if too_deep is None:
                    raise TooDeepError(f"nested deeper than {max_depth} levels")
                child = too_deep
            else:
                child = {} if isinstance(item, dict) else []
                stack.append((item, child, depth + 1))
            if isinstance(target, dict):
                target[key(name)] = child
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


def _text(value: Any) -> str:
    """A field that must be text: cleaned, and ``None`` or another type (a user tool's
    ``TextContent(None)``) made a string rather than breaking every later request."""
    return clean_text(value if isinstance(value, str) else "" if value is None else str(value))


def _usable_image(block: ImageContent) -> bool:
    return (
        isinstance(block.data, str)
        and isinstance(block.mime_type, str)
        and block.mime_type.startswith("image/")
        and BASE64.fullmatch(block.data) is not None
    )


def _clean_blocks(blocks: list[Any]) -> None:
    for index, block in enumerate(blocks):
        if isinstance(block, ImageContent) and not _usable_image(block):
            # The provider would refuse every later request that carries it.
            blocks[index] = TextContent(BAD_IMAGE)
        else:
            _clean_block(block)


def _clean_block(block: Any) -> None:
    if isinstance(block, TextContent):
        block.text = _text(block.text)
    elif isinstance(block, ThinkingContent):
        block.thinking = _text(block.thinking)
        block.signature = _leaf(block.signature)
    elif isinstance(block, ToolCall):
        clean_tool_call(block)


def clean_tool_call(call: ToolCall) -> ToolCall:
    """``call`` made safe in place: arguments nested too deep are replaced by ``{}`` and a
    ``raw_arguments`` note, so validation answers the call with an error result."""
    call.id, call.name = _text(call.id), _text(call.name)
    call.raw_arguments = _leaf(call.raw_arguments)
    try:
        call.arguments = clean_data(call.arguments)
    except TooDeepError:
        call.arguments, call.raw_arguments = {}, TOO_DEEP_ARGUMENTS
    return call


def clean_message(message: Any) -> Any:
    """Make ``message`` sendable and storable, in place (see the module doc); returns it."""
    if isinstance(message, UserMessage):
        if isinstance(message.content, list):
            _clean_blocks(message.content)
        else:
            message.content = _text(message.content)
    elif isinstance(message, AssistantMessage):
        _clean_blocks(message.content)
        message.error_message = _leaf(message.error_message)
        message.model, message.provider = _text(message.model), _text(message.provider)
    elif isinstance(message, ToolResultMessage):
        _clean_blocks(message.content)
        message.tool_call_id, message.tool_name = _text(message.tool_call_id), _text(message.tool_name)
        try:
            message.details = json_data(message.details)
        except TooDeepError:
            message.details = TOO_DEEP_DETAILS
    return message
