"""Content blocks and messages, the transcript every layer shares: what they hold, how they are made
safe to keep, and how a saved one is checked before it is rebuilt.

Plain dataclasses rather than pydantic models: the agent loop creates and reads
these on every turn, and a dataclass costs nothing to build. JSON round-trips go
through ``to_dict`` / ``message_from_dict``; the ``type`` of a content block and
the ``role`` of a message are the tags that pick the class back.

**What may enter a transcript** (``clean_message``): text that encodes as UTF-8,
data nested at most ``MAX_DEPTH`` deep. A conversation must stay sendable (the
provider's JSON request) and storable (``%pi save``) whatever arrives: a file
name that is not UTF-8 (``os.listdir`` gives lone surrogates such as
``"r\\udce9sum\\udce9.txt"``), a lone surrogate escaped in a model's JSON,
tool-call arguments nested thousands deep (``json`` and ``dataclasses.asdict``
recurse and raise ``RecursionError``). Each message is made safe once, where it
enters the transcript (``secrets.admit``, called by the agent loop and ``AgentState``, so by ``%pi load``
too, which also masks the keys in its text), so nothing downstream ever sees such a value:

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

**A saved message** (``message_problem``): ``message_from_dict`` trusts its
input, and ``{"type": "text", "text": null}`` would build a ``TextContent`` whose
text is ``None``, which then breaks every later request and ``%pi history``.
``message_problem`` checks every field of a message dict against the shapes
above (types, required fields, no unknown ones, tool-call arguments and result
details at most ``MAX_DEPTH`` deep) and says what the first problem is, with its
place (``content[0].text: expected a string, got null``). Not a pydantic
``TypeAdapter``: in strict mode it takes only instances of these plain
dataclasses from Python data, and from JSON it reports every union member's
failure under its own path names (``content.list[union[TextContent,...]].0``),
where ``%pi load`` names one problem in the transcript's words.

Long: the transcript's types with the cleaning and checking every message passes, so a message is understood
from one file.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import NoneType, UnionType
from typing import Any, Literal, get_args, get_origin, get_type_hints

StopReason = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why an assistant message ended. ``tool_use``: it asks for tool calls."""


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class TextContent:
    text: str
    """The text, as the model wrote it (markdown, usually)."""
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ThinkingContent:
    thinking: str
    """The model's reasoning text (``reasoning_content`` on DeepSeek)."""
    signature: str | None = None
    """Where a provider signs or names its reasoning field, so it can be replayed (Anthropic: the block's
    signature; OpenAI-compatible servers: the delta field that carried it)."""
    redacted: bool = False
    """Anthropic's ``redacted_thinking``: ``signature`` holds the encrypted data, replayed as it came."""
    type: Literal["thinking"] = "thinking"


@dataclass(slots=True)
class ImageContent:
    data: str
    """Base64-encoded bytes."""
    mime_type: str
    """``image/png``, ``image/jpeg``, ..."""
    type: Literal["image"] = "image"


@dataclass(slots=True)
class ToolCall:
    id: str
    """Provider-given id; the matching ToolResultMessage carries it back."""
    name: str
    """The tool the model asked for (it may not exist)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Parsed arguments. While streaming: the best-effort partial parse."""
    raw_arguments: str | None = None
    """Set only when the streamed arguments were not valid JSON: the raw text.
    Validation then fails with an error naming the tool, instead of running the
    tool with ``{}``."""
    type: Literal["tool_call"] = "tool_call"
    extra_content: dict[str, Any] | None = None
    """Provider data that must go back with the call, as it came (Gemini's OpenAI-compatible endpoint: its
    ``extra_content.google.thought_signature``); sent back only to the provider that gave it."""


Content = TextContent | ThinkingContent | ImageContent | ToolCall
UserContent = TextContent | ImageContent
ToolResultContent = TextContent | ImageContent


@dataclass(slots=True)
class Usage:
    input: int = 0
    """Prompt tokens not read from or written to the cache (as pi: each kind is
    priced apart, so none is counted twice)."""
    output: int = 0
    """Completion tokens, reasoning included."""
    cache_read: int = 0
    """Prompt tokens served from the provider's cache."""
    cache_write: int = 0
    """Prompt tokens written to the provider's cache (where billed apart)."""
    total_tokens: int = 0
    """``input + output + cache_read + cache_write``."""
    cost: float | None = None
    """In US dollars, when the model's prices are known."""

    @property
    def prompt_tokens(self) -> int:
        """The whole prompt, cached parts included (what the provider calls ``prompt_tokens``)."""
        return self.input + self.cache_read + self.cache_write

    def add(self, other: Usage) -> Usage:
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.total_tokens + other.total_tokens,
            cost,
        )


@dataclass(slots=True)
class UserMessage:
    content: str | list[UserContent]
    timestamp: int = field(default_factory=_now_ms)
    """Milliseconds since the epoch, as in pi."""
    role: Literal["user"] = "user"
    compacted_turns: int | None = None
    """Set on a compaction summary only: how many turns it folds in (a summary is known by this field, never
    by its text, which a person could type)."""


@dataclass(slots=True)
class AssistantMessage:
    content: list[Content] = field(default_factory=list)
    stop_reason: StopReason = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    provider: str = ""
    error_message: str | None = None
    """Set when ``stop_reason`` is ``error`` or ``aborted``: what went wrong."""
    timestamp: int = field(default_factory=_now_ms)
    role: Literal["assistant"] = "assistant"

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [block for block in self.content if isinstance(block, ToolCall)]

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


@dataclass(slots=True)
class ToolResultMessage:
    tool_call_id: str
    tool_name: str
    content: list[ToolResultContent] = field(default_factory=list)
    details: Any = None
    """Structured data for the UI; never sent to the model."""
    is_error: bool = False
    usage: Usage | None = None
    """Tokens the tool itself spent (a sub-agent, say)."""
    timestamp: int = field(default_factory=_now_ms)
    role: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


Message = UserMessage | AssistantMessage | ToolResultMessage

_CONTENT_TYPES: dict[str, type[TextContent] | type[ThinkingContent] | type[ImageContent] | type[ToolCall]] = {
    "text": TextContent,
    "thinking": ThinkingContent,
    "image": ImageContent,
    "tool_call": ToolCall,
}


def to_dict(item: Message | Content | Usage) -> dict[str, Any]:
    """A JSON-ready dict of a message, content block or usage."""
    return asdict(item)


def content_from_dict(data: dict[str, Any]) -> Content:
    cls = _CONTENT_TYPES.get(data.get("type", ""))
    if cls is None:
        raise ValueError(f"Unknown content type: {data.get('type')!r}")
    return cls(**data)


def _contents(items: list[dict[str, Any]]) -> list[Any]:
    return [content_from_dict(item) for item in items]


def message_from_dict(data: dict[str, Any]) -> Message:
    """Rebuild a message from ``to_dict`` output (or its JSON)."""
    fields = dict(data)
    role = fields.pop("role", None)
    if role == "user":
        content = fields["content"]
        fields["content"] = content if isinstance(content, str) else _contents(content)
        return UserMessage(**fields)
    if role == "assistant":
        fields["content"] = _contents(fields.get("content", []))
        fields["usage"] = Usage(**fields.get("usage", {}))
        return AssistantMessage(**fields)
    if role == "tool_result":
        fields["content"] = _contents(fields.get("content", []))
        if fields.get("usage") is not None:
            fields["usage"] = Usage(**fields["usage"])
        return ToolResultMessage(**fields)
    raise ValueError(f"Unknown message role: {role!r}")


def text_of(content: str | list[Any]) -> str:
    """The text of a user message's or tool result's content."""
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


# --- What may enter a transcript (see the module doc)

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


def json_data(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """Like ``clean_data``, but the copy is JSON data: other objects (and keys that JSON cannot hold,
    such as tuples) become their ``repr``. Raises ``TooDeepError`` as ``clean_data`` does."""
    return _rebuild(value, _json_leaf, _json_leaf, max_depth, None)


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
            blocks[index] = TextContent(BAD_IMAGE)  # the provider would refuse every later request carrying it
        elif isinstance(block, TextContent):
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


# --- Checking a saved message before it is rebuilt

Spec = dict[str, tuple[tuple[type, ...], bool, bool]]
"""Field name → (accepted JSON types, required, may be null)."""

_MESSAGE_TYPES: dict[str, type[UserMessage] | type[AssistantMessage] | type[ToolResultMessage]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "tool_result": ToolResultMessage,
}
_SPECS: dict[type, Spec] = {}


def _spec(cls: type) -> Spec:
    """The fields of the dataclass ``cls`` as saved (its tag, ``type`` or ``role``, left out)."""
    if cls in _SPECS:
        return _SPECS[cls]
    hints = get_type_hints(cls)
    spec: Spec = {}
    for item in dataclasses.fields(cls):
        if item.name in ("type", "role"):
            continue
        hint = hints[item.name]
        options = get_args(hint) if isinstance(hint, UnionType) else (hint,)
        kinds = tuple(dict.fromkeys(kind for option in options if option is not NoneType for kind in _json(option)))
        required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
        spec[item.name] = (kinds, required, NoneType in options or hint is Any)
    _SPECS[cls] = spec
    return spec


def _json(hint: Any) -> tuple[type, ...]:
    """The JSON types a field of type ``hint`` is saved as."""
    origin = get_origin(hint) or hint
    if hint is Any:
        return (object,)
    if origin is Literal:
        return (str,)
    if origin is float:
        return (int, float)
    return (dict,) if dataclasses.is_dataclass(origin) else (origin,)


_CONTENT_KINDS = {
    "user": ("text", "image"),
    "assistant": ("text", "thinking", "image", "tool_call"),
    "tool_result": ("text", "image"),
}
_STOP_REASONS = get_args(StopReason)


_KIND_NAMES = {
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    list: "a list",
    dict: "an object",
}


def _kind(value: Any) -> str:
    return "null" if value is None else _KIND_NAMES.get(type(value), type(value).__name__)


def _fields_problem(data: Any, spec: Spec, where: str, tag: str) -> str | None:
    """The first field of ``data`` that does not fit ``spec`` (``tag``: the field that picks the spec)."""
    if not isinstance(data, dict):
        return f"{where or 'the record'}: expected an object, got {_kind(data)}"
    prefix = f"{where}." if where else ""
    for name in data:
        if name != tag and name not in spec:
            return f"{prefix}{name}: unknown field"
    for name, (types, required, nullable) in spec.items():
        if name not in data:
            if required:
                return f"{prefix}{name}: missing"
            continue
        value = data[name]
        if value is None:
            if not nullable:
                return f"{prefix}{name}: expected {_expected(types)}, got null"
            continue
        fits = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not fits:
            return f"{prefix}{name}: expected {_expected(types)}, got {_kind(value)}"
    return None


def _expected(types: tuple[type, ...]) -> str:
    return " or ".join(dict.fromkeys(_KIND_NAMES.get(kind, kind.__name__) for kind in types))


def message_problem(data: Any) -> str | None:
    """What is wrong with ``data`` as a saved message (``None``: it can be rebuilt and used safely)."""
    if not isinstance(data, dict):
        return f"expected a message object, got {_kind(data)}"
    role = data.get("role")
    if not isinstance(role, str) or role not in _MESSAGE_TYPES:
        return f"role: expected user, assistant or tool_result, got {role!r}"[:200]
    problem = _fields_problem(data, _spec(_MESSAGE_TYPES[role]), "", "role")
    if problem:
        return problem
    if role == "assistant" and data.get("stop_reason", "stop") not in _STOP_REASONS:
        return f"stop_reason: expected one of {', '.join(_STOP_REASONS)}"
    usage = data.get("usage")
    if usage is not None:
        problem = _fields_problem(usage, _spec(Usage), "usage", "")
        if problem:
            return problem
    if role == "tool_result" and depth_of(data.get("details")) > MAX_DEPTH:
        return f"details: nested deeper than {MAX_DEPTH} levels"
    content = data.get("content", [])
    if isinstance(content, str):
        return None
    for index, block in enumerate(content):
        where = f"content[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(kind, str) or kind not in _CONTENT_KINDS[role]:
            return f"{where}.type: expected one of {', '.join(_CONTENT_KINDS[role])}, got {kind!r}"[:200]
        problem = _fields_problem(block, _spec(_CONTENT_TYPES[kind]), where, "type")
        if problem:
            return problem
        if kind == "tool_call" and depth_of(block.get("arguments")) > MAX_DEPTH:
            return f"{where}.arguments: nested deeper than {MAX_DEPTH} levels"
        if kind == "image" and not (BASE64.fullmatch(block["data"]) and block["mime_type"].startswith("image/")):
            return f"{where}: not a base64 image with an image/* mime_type"  # every request would be refused
    return None
