"""The view model of a turn: the blocks it is drawn from, folded from agent events, with keys masked.

A "turn" here is one ``%%pi`` cell: everything between ``agent_start`` and
``agent_end``, however many model requests it takes. ``TurnState`` folds the
agent's events (and the approval broker's) into an ordered list of blocks:
text, thinking (``TextBlock``), tool calls (``ToolCallBlock``) and notices
(``NoticeBlock``), plus the usage and the model. It holds no loop logic and no
widgets: the live widget view, the static rendering of a finished turn
(``render``) and the kernel's text view all read it. Every block carries a
``version`` that grows on each change, so a view redraws only what changed
since it last looked.

Keys are masked here, where text enters the view model, never where it is
drawn: streamed text and live tool output pass one ``MaskedStream`` per
block as they arrive (what may be the start of a key waits for the next
piece), notices and tool results are masked as they are set, and a tool
call's arguments reach a view only through ``ToolCallBlock.shown_arguments``
/ ``shown_raw``, masked once per version (while they stream: their bounded
tail, ``live_tail``, with what may begin a key left out). So are what a
definition's render hook makes of a call or its result (``hook_output``) and
an approval request (``ShownRequest``: its arguments, warning and change,
for the approval card and the stdin question). So escaping, highlighting and
cutting in the views never see a key: this is the only module of the views
that masks (``restored`` turns the ``***`` of arguments a person edited back
into what they hid).

Long: the view model and its blocks are where text enters the views and is masked once, so they stay together.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import itertools
import json
import re
import reprlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from pi_kernel.agent import OPERATION_ABORTED
from pi_kernel.agent.types import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    AgentToolResult,
    CompactionEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from pi_kernel.ai import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_kernel.ai.messages import text_of
from pi_kernel.ai.secrets import MaskedStream, mask, secret_values, unmask
from pi_kernel.tools.approval import ApprovalDecision, ApprovalPreview, ApprovalRequest

ToolStatus = Literal["streaming", "pending", "waiting", "running", "done", "error", "denied", "interrupted"]
"""``streaming``: the model is still writing the arguments; ``pending``: written, not started;
``waiting``: waiting for approval; the rest as named."""

FINAL_STATUSES: frozenset[str] = frozenset({"done", "error", "denied", "interrupted"})
RAW_ARGUMENTS_TAIL = 8192
"""Characters of the raw streamed argument text kept (for a preview of invalid JSON)."""
LIVE_STRING_KEEP = 3_024
"""Characters of each string of streaming arguments kept for their preview (its end: the part being written;
the widgets show the last 2,000)."""
LIVE_ITEMS_KEEP = 200
LIVE_DEPTH = 24
OUTPUT_KEEP = 65_536
"""Characters of a call's live output kept (its end; the result, when it comes, has it all)."""
ANCHOR_CHARS = 256


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
        final = self.buffer.text + held if text is None else mask(text)
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
    shown_request: ShownRequest | None = field(default=None, init=False)
    """``request`` as the views draw it, masked (set with it)."""
    request: ApprovalRequest | None = None
    """The approval request as asked (what edited arguments are restored against)."""
    decision: ApprovalDecision | None = None
    started_at: float | None = None
    """Clock time of ``tool_execution_start`` (reset when an approval lets it run)."""
    waiting_since: float | None = None
    ended_at: float | None = None
    output: str = ""
    """Live output, masked: the end of the text of the latest ``tool_execution_update`` (``set_output``)."""
    output_updates: int = 0
    result: AgentToolResult | None = None
    is_error: bool = False
    version: int = 0
    _output_source: str = field(default="", repr=False)
    _output_masking: MaskedStream = field(default_factory=MaskedStream, repr=False)
    _shown: tuple[Any, ...] = field(default=(), repr=False)
    """(arguments, streaming, version, what ``shown_arguments`` made of them)."""
    _shown_raw: tuple[int, str] = field(default=(-1, ""), repr=False)
    _hooked: dict[Any, tuple[Any, int, dict[str, Any] | str]] = field(default_factory=dict, repr=False)
    """A render hook → (the value it was given, the version, what ``hook_output`` made of it)."""

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
        # its details (notebook outputs, a diff) and what a ``render_result`` hook is given. So are the call's
        # name and label (the model writes them), a decision's reason (a policy's quotes the arguments) and
        # an approval request (its drawn form, ``shown_request``).
        if name == "result" and value is not None:
            value = masked_result(value)
        elif name == "request":
            object.__setattr__(self, "shown_request", None if value is None else ShownRequest(value))
        elif name in ("name", "label") and isinstance(value, str):
            value = mask(value)
        elif name == "decision" and value is not None and value.reason:
            shown = mask(value.reason)
            if shown != value.reason:
                value = dataclasses.replace(value, reason=shown)
        object.__setattr__(self, name, value)

    def result_text(self) -> str:
        return text_of(self.result.content) if self.result is not None else ""

    def shown_arguments(self) -> Any:
        """The arguments as plain JSON data, masked, once per version: while they stream, their ``live_tail``
        with what may begin a key left out (a redraw costs the same for a 5 MB argument as for a short one)."""
        streaming = self.status == "streaming"
        arguments, shown = self.arguments, self._shown
        if shown and shown[0] is arguments and shown[1] == streaming and (not streaming or shown[2] == self.version):
            return shown[3]
        value = live_tail(arguments) if streaming else arguments
        data = mask(jsonable(value) if value is not None else {}, partial=streaming)
        self._shown = (arguments, streaming, self.version, data)
        return data

    def hook_output(self, hook: Callable[[Any], Any], value: Any) -> dict[str, Any] | str:
        """What a definition's ``render_call`` / ``render_result`` makes of ``value`` (the arguments, the result),
        masked as it enters the view model, once per version: a MIME bundle, or the text of the hook's error (it
        may quote the unmasked arguments it was given)."""
        cached = self._hooked.get(hook)
        if cached is not None and cached[0] is value and cached[1] == self.version:
            return cached[2]
        try:
            output: dict[str, Any] | str = mask(mime_bundle_of(hook(value)))
        except Exception as error:  # noqa: BLE001 - a user's render hook must not break the view
            output = mask(f"{type(error).__name__}: {error}")
        self._hooked[hook] = (value, self.version, output)
        return output

    def shown_raw(self) -> str:
        """The end of the streamed argument text, masked (what may begin a key left out)."""
        if self._shown_raw[0] != self.raw.length:
            self._shown_raw = (self.raw.length, mask(self.raw.text, partial=True))
        return self._shown_raw[1]

    def set_output(self, text: str) -> None:
        """The whole live output so far: what it adds passes the block's ``MaskedStream`` (a rewrite, or a
        rolling tail that cannot be matched, starts it again); ``output`` keeps the end."""
        added = appended(self._output_source, text)
        if added is None:
            self._output_masking.reset()
            self.output = self._output_masking.feed(text)
        else:
            self.output += self._output_masking.feed(added)
        if len(self.output) > 2 * OUTPUT_KEEP:
            self.output = self.output[-OUTPUT_KEEP:]  # masked text: a cut cannot uncover a key
        self._output_source = text


def appended(old: str, new: str) -> str | None:
    """What ``new`` adds after ``old``, when ``new`` is ``old`` (or a tail of it) plus more; else ``None``."""
    if new.startswith(old):
        return new[len(old) :]
    anchor = old[-ANCHOR_CHARS:]
    if len(anchor) < ANCHOR_CHARS:
        return None
    position = new.find(anchor)
    if position < 0 or new.rfind(anchor) != position:
        return None  # not found, or ambiguous (repetitive output): rewrite rather than guess
    return new[position + len(anchor) :]


def masked_result(result: AgentToolResult) -> AgentToolResult:
    """``result`` with keys masked in its text blocks and its details (read once for all of them)."""
    secrets = secret_values()
    content = [
        dataclasses.replace(item, text=mask(item.text, secrets)) if isinstance(item, TextContent) else item
        for item in result.content
    ]
    return dataclasses.replace(result, content=content, details=mask(result.details, secrets))


class ShownRequest:
    """An approval request as the views draw it (the approval card, the stdin question): its warning and change
    masked as it enters the view model, its arguments (as JSON data) when first drawn (the editor, the stdin
    question: a call waiting for approval is drawn at once, whatever its size)."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        """As asked: its id, its tool, the arguments edited ones are restored against."""
        preview = request.preview
        if preview is not None:
            preview = dataclasses.replace(preview, title=mask(preview.title), diff=mask(preview.diff))
        self.preview: ApprovalPreview | None = preview
        self.warning = mask(request.warning) if request.warning else None

    @functools.cached_property
    def args(self) -> Any:
        return mask(jsonable(self.request.args))


def mime_bundle_of(value: Any) -> dict[str, Any]:
    """A MIME bundle for a render hook's return value (a str, or an IPython display object: IPython's own
    formatters, images as base64)."""
    if isinstance(value, str):
        return {"text/plain": value}
    if isinstance(value, Mapping):
        return dict(value)
    data, _ = _display_formatter().format(value)
    return {
        mime: base64.b64encode(item).decode("ascii") if isinstance(item, bytes) else item for mime, item in data.items()
    }


@functools.lru_cache(maxsize=1)
def _display_formatter() -> Any:
    from IPython.core.formatters import DisplayFormatter

    return DisplayFormatter()


def content_text(content: str | list[Any]) -> str:
    """The text of a message's or a tool result's content, each image named by its type (``[image/png image]``)."""
    if isinstance(content, str):
        return content
    return "\n".join(
        item.text if isinstance(item, TextContent) else f"[{item.mime_type} image]"
        for item in content
        if isinstance(item, (TextContent, ImageContent))
    )


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
        object.__setattr__(self, name, mask(value) if name == "text" else value)


Block = TextBlock | ToolCallBlock | NoticeBlock


def restored(edited: Any, original: Any) -> Any:
    """Arguments a person edited, with every ``***`` they left as it was turned back into the value it hid."""
    return unmask(edited, original)


def json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return str(value)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, numbers, bools, None)."""
    try:
        return json.loads(json.dumps(value, default=json_default))
    except (TypeError, ValueError, RecursionError):
        return reprlib.repr(value)


def live_tail(value: Any, depth: int = 0) -> Any:
    """Streaming arguments cut for their live preview, whatever their size: each long string keeps its
    last ``LIVE_STRING_KEEP`` characters, each long container its last ``LIVE_ITEMS_KEEP`` items, and
    nesting deeper than ``LIVE_DEPTH`` shows as ``…`` (no recursion on the model's depth)."""
    if isinstance(value, str):
        return value if len(value) <= LIVE_STRING_KEEP else "…" + value[-LIVE_STRING_KEEP:]
    if hasattr(value, "model_dump") and not isinstance(value, type):
        value = dict(value)
    if isinstance(value, (dict, list, tuple)) and depth >= LIVE_DEPTH:
        return "…"
    if isinstance(value, dict):
        items = list(itertools.islice(reversed(value.items()), LIVE_ITEMS_KEEP))[::-1]
        return {
            live_tail(key, depth + 1) if isinstance(key, str) else key: live_tail(item, depth + 1)
            for key, item in items
        }
    if isinstance(value, (list, tuple)):
        return [live_tail(item, depth + 1) for item in value[-LIVE_ITEMS_KEEP:]]
    return value


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def mime_text(bundle: Mapping[str, Any]) -> str:
    """The plainest readable text of a MIME bundle."""
    for mime in ("text/plain", "text/markdown", "text/latex"):
        if mime in bundle:
            return strip_ansi(joined_text(bundle[mime]))
    kinds = ", ".join(sorted(bundle))
    return f"[{kinds}]"


def outputs_text(outputs: list[Any]) -> str:
    parts = []
    for output in outputs:
        if not isinstance(output, Mapping):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(strip_ansi(joined_text(output.get("text", ""))))
        elif kind in ("display_data", "execute_result"):
            parts.append(mime_text(output.get("data") or {}))
        elif kind == "error":
            parts.append(
                strip_ansi("\n".join(output.get("traceback") or [])) or f"{output.get('ename')}: {output.get('evalue')}"
            )
    return "\n".join(part.rstrip("\n") for part in parts)


def joined_text(value: Any) -> str:
    """nbformat allows multi-line strings as lists of lines."""
    if isinstance(value, list):
        return "".join(str(item) for item in value)
    return value if isinstance(value, str) else str(value)


@dataclass(eq=False)
class TurnState:
    """The blocks of one turn, in display order, plus its usage; fed by ``apply`` and ``apply_approval``."""

    model: str = ""
    provider: str = ""
    definitions: Callable[[str], Any] | None = None
    """Tool name → its ``ToolDefinition`` (or ``None``): the labels shown and the render hooks."""
    clock: Callable[[], float] = time.monotonic
    blocks: list[Block] = field(default_factory=list)
    tool_calls: dict[str, ToolCallBlock] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    context_window: int | None = None
    """The model's context window (tokens), for the footer's meter; ``None``: no meter."""
    context_tokens: int = 0
    """The conversation's size at the last answer (its prompt plus its output, as reported)."""
    saves_thinking: bool = True
    """Whether the static output (what a notebook saves) keeps the model's thinking; the kernel sets it
    from its ``save_thinking`` setting (default off: thinking is shown live, collapsed, and not saved)."""
    started: bool = False
    ended: bool = False
    aborted: bool = False
    stop_reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    waiting: dict[str, ToolCallBlock] = field(default_factory=dict)
    """Calls that were waiting for approval when last told (``live_window`` drops those no longer waiting)."""
    _message_count: int = 0
    _user_messages: int = 0
    _streaming: dict[tuple[int, int], Block] = field(default_factory=dict)
    """(message number, content index) → block, for the message being streamed."""

    # ------------------------------------------------------------------ agent events

    def apply(self, event: AgentEvent) -> None:
        match event:
            case AgentStartEvent():
                self.started = True
                self.started_at = self.clock()
            case AgentEndEvent():
                self.finish()
            case MessageStartEvent():
                self._on_message_start(event)
            case MessageUpdateEvent():
                self._on_message_update(event)
            case MessageEndEvent():
                self._on_message_end(event)
            case CompactionEvent():
                self._on_compaction(event)
            case ToolExecutionStartEvent():
                self._on_tool_execution_start(event)
            case ToolExecutionUpdateEvent():
                self._on_tool_execution_update(event)
            case ToolExecutionEndEvent():
                self._on_tool_execution_end(event)
            case TurnStartEvent() | TurnEndEvent():
                pass  # a turn of the loop (one model request) draws nothing of its own

    def _on_message_start(self, event: MessageStartEvent) -> None:
        message = event.message
        if isinstance(message, AssistantMessage):
            self._message_count += 1
            self._streaming.clear()
            self._note_model(message)
        elif isinstance(message, UserMessage):
            # The first prompt is the cell itself; later ones were steered or followed up.
            self._user_messages += 1
            if self._user_messages > 1:
                self._add(NoticeBlock("user", text_of(message.content)))

    def _on_message_update(self, event: MessageUpdateEvent) -> None:
        update = event.assistant_message_event
        kind, index = update.type, update.content_index
        if index is None:
            return
        key = (self._message_count, index)
        if kind in ("text_start", "thinking_start"):
            self._streaming[key] = self._add(TextBlock("text" if kind == "text_start" else "thinking"))
        elif kind in ("text_delta", "thinking_delta"):
            block = self._text_block(key, "text" if kind == "text_delta" else "thinking")
            block.append(update.delta or "")
            block.version += 1
        elif kind in ("text_end", "thinking_end"):
            block = self._text_block(key, "text" if kind == "text_end" else "thinking")
            block.settle(update.content)
            block.version += 1
        elif kind in ("toolcall_start", "toolcall_delta", "toolcall_end"):
            source = update.tool_call
            content = update.partial.content
            if source is None and index < len(content):
                part = content[index]
                source = part if isinstance(part, ToolCall) else None
            delta = update.delta if kind == "toolcall_delta" else None
            self._update_tool_call(key, source, delta, ended=kind == "toolcall_end")

    def _update_tool_call(self, key: tuple[int, int], source: ToolCall | None, delta: str | None, ended: bool) -> None:
        block = self._streaming.get(key)
        if not isinstance(block, ToolCallBlock):
            block = self._add(ToolCallBlock(id="", name=""))
            self._streaming[key] = block
        if source is not None:
            if source.id and source.id != block.id:
                self.tool_calls.pop(block.id, None)
                block.id = source.id
                self.tool_calls[block.id] = block
            if source.name and not block.name:
                block.name = source.name
                block.label = self._label(source.name)
            block.arguments = source.arguments
        if delta:
            block.raw.append(delta)
        if ended and block.status == "streaming":
            block.status = "pending"
        block.version += 1

    def _on_message_end(self, event: MessageEndEvent) -> None:
        message = event.message
        if isinstance(message, AssistantMessage):
            self._end_assistant_message(message)
        elif isinstance(message, ToolResultMessage):
            block = self._tool_block(message.tool_call_id, message.tool_name)
            if block.result is None:
                block.result = AgentToolResult(list(message.content), message.details, message.usage)
                block.is_error = message.is_error
                block.version += 1

    def _end_assistant_message(self, message: AssistantMessage) -> None:
        self._note_model(message)
        self.usage = self.usage.add(message.usage)
        if message.usage.prompt_tokens:
            self.context_tokens = message.usage.prompt_tokens + message.usage.output
        self.stop_reason = message.stop_reason
        # Blocks that never streamed (a provider that sends whole messages) appear now.
        for index, content in enumerate(message.content):
            key = (self._message_count, index)
            if isinstance(content, ToolCall):
                self._update_tool_call(key, content, None, ended=True)
            elif isinstance(content, (TextContent, ThinkingContent)):
                text = content.text if isinstance(content, TextContent) else content.thinking
                block = self._text_block(key, "text" if isinstance(content, TextContent) else "thinking")
                if block.settle(text):
                    block.version += 1
        if message.stop_reason == "aborted":
            self.aborted = True
            self._add(NoticeBlock("interrupted", message.error_message or "Interrupted"))
        elif message.stop_reason == "error":
            self._add(NoticeBlock("error", message.error_message or "The model request failed"))

    def _on_compaction(self, event: CompactionEvent) -> None:
        """Older turns were summarised: a visible marker, and the summary request's cost counts."""
        plural = "turn" if event.compacted_turns == 1 else "turns"
        why = {"overflow": " (the provider said the request was too long)", "manual": " (%pi compact)"}
        text = f"compacted {event.compacted_turns} {plural} into a summary{why.get(event.reason, '')}"
        if event.error:
            text += f"; the model's summary failed ({event.error}), a plain list stands in"
        self._add(NoticeBlock("compaction", text))
        if event.usage is not None:
            self.usage = self.usage.add(event.usage)

    def _on_tool_execution_start(self, event: ToolExecutionStartEvent) -> None:
        block = self._tool_block(event.tool_call_id, event.tool_name)
        block.arguments = event.args
        block.started_at = self.clock()
        if block.status in ("streaming", "pending"):
            block.status = "running"
        block.version += 1

    def _on_tool_execution_update(self, event: ToolExecutionUpdateEvent) -> None:
        block = self._tool_block(event.tool_call_id, event.tool_name)
        if block.finished:
            return
        block.set_output(live_output_text(event.partial_result))
        block.output_updates += 1
        block.version += 1

    def _on_tool_execution_end(self, event: ToolExecutionEndEvent) -> None:
        block = self._tool_block(event.tool_call_id, event.tool_name)
        block.result = event.result
        block.is_error = event.is_error
        block.ended_at = self.clock()
        if block.status not in ("denied", "interrupted"):
            if not event.is_error:
                block.status = "done"
            elif self.aborted or block.result_text() == OPERATION_ABORTED:
                # An abort during tools ends the run with no aborted assistant message: the loop's own
                # result text (one constant, the agent layer's) is then the only sign of it.
                block.status = "interrupted"
            else:
                block.status = "error"
        block.version += 1

    # ------------------------------------------------------------------ approvals

    def apply_approval(self, event: str, request: ApprovalRequest) -> ToolCallBlock | None:
        """Fold a broker notification (``requested`` / ``resolved``) into the call's block.

        Returns the block, or ``None`` when the request is not one of this turn's calls.
        """
        block = self.tool_calls.get(request.tool_call_id)
        if block is None:
            if self.ended or not self.started:
                return None
            block = self._tool_block(request.tool_call_id, request.tool_name)
        block.request = request
        if request.label and block.label in ("", block.name):
            block.label = request.label
        if event == "requested" and request.decision is None and not block.finished:
            block.status = "waiting"
            block.waiting_since = self.clock()
            self.waiting[block.id] = block
        elif request.decision is not None:
            block.decision = request.decision
            if request.decision.args is not None:
                block.arguments = request.decision.args  # what will run
            if request.decision.kind == "deny":
                block.status = "interrupted" if request.decision.source == "interrupt" else "denied"
                block.ended_at = self.clock()
            elif block.status == "waiting":
                block.status = "running"
                block.started_at = self.clock()
        block.version += 1
        return block

    # ------------------------------------------------------------------ the end

    def finish(self) -> None:
        """The turn is over: calls that never finished were interrupted."""
        if self.ended:
            return
        self.ended = True
        self.ended_at = self.clock()
        for call in self.tool_calls.values():
            if not call.finished:
                call.status = "interrupted"
                call.ended_at = self.ended_at
                call.version += 1
        for block in self.blocks:
            if isinstance(block, TextBlock) and not block.final:
                block.settle(None)  # what was held back (it might have begun a key) is shown, masked
                block.version += 1

    # ------------------------------------------------------------------ helpers

    def live_window(self, size: int) -> tuple[list[Block], list[ToolCallBlock]]:
        """What a live view draws: the last ``size`` blocks, and the calls before them waiting for approval."""
        window = self.blocks[-size:]
        self.waiting = {key: call for key, call in self.waiting.items() if call.status == "waiting"}
        in_window = {id(block) for block in window}
        return window, [call for call in self.waiting.values() if id(call) not in in_window]

    def text(self) -> str:
        """The assistant's text of the whole turn, blocks joined by blank lines."""
        return "\n\n".join(block.text for block in self.blocks if isinstance(block, TextBlock) and block.kind == "text")

    def _add(self, block: Any) -> Any:
        self.blocks.append(block)
        return block

    def _text_block(self, key: tuple[int, int], kind: Literal["text", "thinking"]) -> TextBlock:
        block = self._streaming.get(key)
        if not isinstance(block, TextBlock):
            block = self._add(TextBlock(kind))
            self._streaming[key] = block
        return block

    def _tool_block(self, tool_call_id: str, name: str) -> ToolCallBlock:
        block = self.tool_calls.get(tool_call_id)
        if block is None:
            block = self._add(ToolCallBlock(id=tool_call_id, name=name, label=self._label(name), status="pending"))
            self.tool_calls[tool_call_id] = block
        return block

    def definition(self, name: str) -> Any:
        """The tool's definition, or ``None``: an unknown tool (or a failing lookup) is drawn with the defaults."""
        try:
            return self.definitions(name) if self.definitions is not None else None
        except Exception:  # noqa: BLE001 - a label or a render hook is cosmetic; never break the view for it
            return None

    def _label(self, name: str) -> str:
        return str(getattr(self.definition(name), "label", "") or name)

    def _note_model(self, message: AssistantMessage) -> None:
        if message.model:
            self.model = message.model
        if message.provider:
            self.provider = message.provider
