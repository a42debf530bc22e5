"""The blocks a turn is drawn from: text, thinking, tool calls, notices (``TurnState`` fills them in).

Plain data with no event logic, kept apart from ``turn_state`` so that the
fold of agent events stays one readable file. This module is also where text
enters the widgets' view model, so it is the widgets' one door to masking
keys: ``masked`` (text or JSON-like data; ``partial`` for text still growing),
``MaskedStream`` for text that arrives in pieces, ``restored`` for arguments a
person edited, ``key_values`` / ``keys_read_once`` to read the keys once for
many calls. A notice is masked as it is made; views mask what they draw
through these, before escaping, highlighting or a cut. Each block carries a
``version`` that grows on every change: a view redraws only what changed
since it last looked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai.messages import TextContent, text_of
from pi_kernel.ai.secrets import MaskedStream, secret_values, secrets_read_once, unmask
from pi_kernel.ai.secrets import mask as masked
from pi_kernel.tools.approval import ApprovalDecision, ApprovalRequest
from pi_kernel.widgets.html_render import outputs_text

ToolStatus = Literal["streaming", "pending", "waiting", "running", "done", "error", "denied", "interrupted"]
"""``streaming``: the model is still writing the arguments; ``pending``: written, not started;
``waiting``: waiting for approval; the rest as named."""

FINAL_STATUSES: frozenset[str] = frozenset({"done", "error", "denied", "interrupted"})
RAW_ARGUMENTS_TAIL = 8192
"""Characters of the raw streamed argument text kept (for a preview of invalid JSON)."""


class TextBuffer:
    """Text that grows by appends, joined only when read (a 40 KB answer arrives in 10,000 pieces).

    With ``keep``, only about the last ``keep`` characters are kept (trimmed when twice that
    accumulates, so an append stays O(1) amortized).
    """

    __slots__ = ("_joined", "_parts", "keep", "length")

    def __init__(self, text: str = "", keep: int | None = None) -> None:
        self._parts: list[str] = [text] if text else []
        self._joined: str | None = text
        self.length = len(text)
        self.keep = keep

    def append(self, text: str) -> None:
        if text:
            self._parts.append(text)
            self.length += len(text)
            self._joined = None
            if self.keep is not None and self.length > 2 * self.keep:
                self.replace(self.text[-self.keep :])

    def replace(self, text: str) -> None:
        self._parts = [text] if text else []
        self._joined = text
        self.length = len(text)

    @property
    def text(self) -> str:
        if self._joined is None:
            self._joined = "".join(self._parts)
            self._parts = [self._joined]
        return self._joined

    def tail(self, chars: int) -> str:
        """The last ``chars`` characters (all if fewer), without joining the whole text: a live view's
        redraw costs the size of what it shows, not of what has arrived."""
        if self._joined is not None:
            return self._joined[-chars:] if chars > 0 else ""
        picked: list[str] = []
        size = 0
        for part in reversed(self._parts):
            if size >= chars:
                break
            picked.append(part)
            size += len(part)
        text = "".join(reversed(picked))
        return text[-chars:] if chars > 0 else ""


@dataclass(eq=False)
class TextBlock:
    """The assistant's text or thinking, one content block of one message."""

    kind: Literal["text", "thinking"]
    buffer: TextBuffer = field(default_factory=TextBuffer)
    final: bool = False
    """The block ended (its text is the provider's final text)."""
    version: int = 0
    _masking: MaskedStream = field(default_factory=MaskedStream, repr=False)
    """Streamed pieces pass it once as they enter: the buffer holds masked text (what may be the start of a
    key waits for the next piece)."""

    @property
    def text(self) -> str:
        return self.buffer.text

    def append(self, delta: str) -> None:
        """A streamed piece, masked as it enters."""
        self.buffer.append(self._masking.feed(delta))

    def settle(self, text: str | None) -> bool:
        """The block ended: ``text`` is the provider's final text (``None``: what streamed), masked. Whether the
        block changed (it was not final yet, or its text differs)."""
        held = self._masking.flush()
        final = self.buffer.text + held if text is None else masked(text)
        changed = not self.final or final != self.buffer.text
        if final != self.buffer.text:
            self.buffer.replace(final)
        self.final = True
        return changed


@dataclass(eq=False)
class ToolCallBlock:
    """One tool call, from its first streamed byte to its result."""

    id: str
    name: str
    label: str = ""
    arguments: Any = None
    """The latest arguments: the partial parse while streaming, then the final ones."""
    raw: TextBuffer = field(default_factory=lambda: TextBuffer(keep=RAW_ARGUMENTS_TAIL))
    """The end of the streamed argument text (shown while it does not parse yet)."""
    status: ToolStatus = "streaming"
    request: ApprovalRequest | None = None
    decision: ApprovalDecision | None = None
    started_at: float | None = None
    """Clock time of ``tool_execution_start`` (reset when an approval lets it run)."""
    waiting_since: float | None = None
    ended_at: float | None = None
    output: str = ""
    """Live output: the text of the latest ``tool_execution_update``."""
    output_updates: int = 0
    result: AgentToolResult | None = None
    is_error: bool = False
    version: int = 0

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES

    def elapsed(self, now: float) -> float | None:
        """Seconds in the current state (waiting) or since the call started (running, finished)."""
        if self.status == "waiting" and self.waiting_since is not None:
            return now - self.waiting_since
        if self.started_at is None:
            return None
        return (self.ended_at if self.ended_at is not None else now) - self.started_at

    def __setattr__(self, name: str, value: Any) -> None:
        # A result is masked as it enters the view model (once, not at every redraw): a tool's own text,
        # its details (notebook outputs, a diff) and what a ``render_result`` hook is given.
        object.__setattr__(self, name, masked_result(value) if name == "result" and value is not None else value)

    def result_text(self) -> str:
        return text_of(self.result.content) if self.result is not None else ""


def masked_result(result: AgentToolResult) -> AgentToolResult:
    """``result`` with keys masked in its text blocks and its details (read once for all of them)."""
    secrets = secret_values()
    content = [
        dataclasses.replace(item, text=masked(item.text, secrets)) if isinstance(item, TextContent) else item
        for item in result.content
    ]
    return dataclasses.replace(result, content=content, details=masked(result.details, secrets))


def live_output_text(partial: AgentToolResult) -> str:
    """The text of a partial result: its text blocks, else its notebook outputs (the ``python`` tool's)."""
    text = text_of(partial.content)
    details = partial.details if isinstance(partial.details, dict) else {}
    outputs = details.get("outputs")
    if not text and isinstance(outputs, list):
        return outputs_text(outputs)
    return text


@dataclass(eq=False)
class NoticeBlock:
    """Something the person should see between blocks: an error, an interruption, a steering message."""

    kind: Literal["error", "interrupted", "user", "compaction"]
    text: str
    version: int = 0

    def __setattr__(self, name: str, value: Any) -> None:
        # An error may quote a key: masked as it enters the view model, never where it is drawn.
        object.__setattr__(self, name, masked(value) if name == "text" else value)


Block = TextBlock | ToolCallBlock | NoticeBlock


def restored(edited: Any, original: Any) -> Any:
    """Arguments a person edited, with every ``***`` they left as it was turned back into the value it hid."""
    return unmask(edited, original)


key_values = secret_values
"""The keys' values, read once for many ``masked`` calls (a redraw)."""
keys_read_once = secrets_read_once
"""Within it, every ``masked`` call reuses one reading of the keys (a turn of thousands of calls)."""

__all__ = [
    "FINAL_STATUSES",
    "Block",
    "MaskedStream",
    "NoticeBlock",
    "TextBlock",
    "TextBuffer",
    "ToolCallBlock",
    "key_values",
    "keys_read_once",
    "live_output_text",
    "masked",
    "restored",
]
