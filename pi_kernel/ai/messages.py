"""Content blocks, messages and usage: the transcript every layer shares.

Plain dataclasses rather than pydantic models: the agent loop creates and reads
these on every turn, and a dataclass costs nothing to build. JSON round-trips go
through ``to_dict`` / ``message_from_dict``; the ``type`` of a content block and
the ``role`` of a message are the tags that pick the class back.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

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
