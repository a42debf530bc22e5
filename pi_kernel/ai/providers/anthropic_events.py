"""Turn Anthropic Messages stream events into pi's assistant message events.

The documented sequence: ``message_start`` (the prompt's usage), then per
content block ``content_block_start`` / ``content_block_delta``... /
``content_block_stop``, then ``message_delta`` (stop reason, final usage) and
``message_stop``; ``ping`` anywhere. Blocks are ``text`` (``text_delta``),
``thinking`` (``thinking_delta``, then ``signature_delta``),
``redacted_thinking`` (its data whole in the start event) and ``tool_use``
(``input_json_delta``: the input as JSON text, parsed as it streams by one
``IncrementalJSONParser`` per call, so the card fills in live). Each block is
keyed by the server's ``index``; blocks of kinds this client does not know
(server tools) are skipped. Events are read by field name, so the SDK's typed
events and plain dicts both work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pi_kernel.ai.json_stream import IncrementalJSONParser
from pi_kernel.ai.messages import AssistantMessage, StopReason, TextContent, ThinkingContent, ToolCall, Usage
from pi_kernel.ai.models import AssistantMessageEvent, Model

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",  # a server tool paused a long turn: what came so far is the answer
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
}
REFUSAL_TEXT = "The model declined to answer (stop_reason: refusal)"
MISSING_STOP_REASON = "Stream ended without a stop_reason"
REDACTED_THINKING_TEXT = "[Reasoning redacted]"


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


@dataclass(slots=True)
class _Block:
    kind: Literal["text", "thinking", "tool_call"]
    content_index: int
    parser: IncrementalJSONParser | None = None


class AnthropicAssembler:
    """Feed it stream events; it returns the events each one produces."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.message = AssistantMessage(model=model.id, provider=model.provider)
        self.stop_reason: str | None = None
        """The API's ``stop_reason`` once ``message_delta`` has brought it."""
        self.stopped = False
        """``message_stop`` arrived."""
        self._blocks: dict[int, _Block] = {}
        """Open blocks by the server's index."""
        self._usage: dict[str, int] = {}

    def start(self) -> AssistantMessageEvent:
        return AssistantMessageEvent("start", self.message)

    def feed(self, event: Any) -> list[AssistantMessageEvent]:
        kind = _get(event, "type")
        if kind == "content_block_delta":
            return self._delta(_get(event, "index"), _get(event, "delta"))
        if kind == "content_block_start":
            return self._start_block(_get(event, "index"), _get(event, "content_block"))
        if kind == "content_block_stop":
            return self._stop_block(_get(event, "index"))
        if kind == "message_start":
            self._add_usage(_get(_get(event, "message"), "usage"))
        elif kind == "message_delta":
            self.stop_reason = _get(_get(event, "delta"), "stop_reason") or self.stop_reason
            self._add_usage(_get(event, "usage"))
        elif kind == "message_stop":
            self.stopped = True
        return []

    # --------------------------------------------------------------- blocks

    def _start_block(self, index: Any, block: Any) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        out.extend(self._stop_block(index))  # a repeated index closes the old block first
        block_type = _get(block, "type")
        content = self.message.content
        if block_type == "text":
            self._blocks[index] = _Block("text", len(content))
            content.append(TextContent(""))
            out.append(AssistantMessageEvent("text_start", self.message, len(content) - 1))
            out.extend(self._delta(index, {"type": "text_delta", "text": _get(block, "text") or ""}))
        elif block_type == "thinking":
            self._blocks[index] = _Block("thinking", len(content))
            content.append(ThinkingContent("", signature=_get(block, "signature") or None))
            out.append(AssistantMessageEvent("thinking_start", self.message, len(content) - 1))
            out.extend(self._delta(index, {"type": "thinking_delta", "thinking": _get(block, "thinking") or ""}))
        elif block_type == "redacted_thinking":
            self._blocks[index] = _Block("thinking", len(content))
            content.append(ThinkingContent(REDACTED_THINKING_TEXT, signature=_get(block, "data"), redacted=True))
            out.append(AssistantMessageEvent("thinking_start", self.message, len(content) - 1))
        elif block_type == "tool_use":
            self._blocks[index] = _Block("tool_call", len(content), IncrementalJSONParser())
            call = ToolCall(id=_get(block, "id") or "", name=_get(block, "name") or "")
            content.append(call)
            out.append(AssistantMessageEvent("toolcall_start", self.message, len(content) - 1))
            initial = _get(block, "input")
            if initial:  # some proxies send the whole input here rather than as deltas
                import json

                out.extend(self._delta(index, {"type": "input_json_delta", "partial_json": json.dumps(initial)}))
        return out

    def _delta(self, index: Any, delta: Any) -> list[AssistantMessageEvent]:
        block = self._blocks.get(index)
        if block is None:
            return []
        target = self.message.content[block.content_index]
        kind = _get(delta, "type")
        if kind == "text_delta" and isinstance(target, TextContent):
            text = _get(delta, "text") or ""
            target.text += text
            return [AssistantMessageEvent("text_delta", self.message, block.content_index, delta=text)] if text else []
        if kind == "thinking_delta" and isinstance(target, ThinkingContent):
            text = _get(delta, "thinking") or ""
            target.thinking += text
            return (
                [AssistantMessageEvent("thinking_delta", self.message, block.content_index, delta=text)] if text else []
            )
        if kind == "signature_delta" and isinstance(target, ThinkingContent):
            target.signature = (target.signature or "") + (_get(delta, "signature") or "")
        elif kind == "input_json_delta" and isinstance(target, ToolCall) and block.parser is not None:
            fragment = _get(delta, "partial_json") or ""
            if fragment:
                block.parser.feed(fragment)
                target.arguments = block.parser.snapshot()
                return [AssistantMessageEvent("toolcall_delta", self.message, block.content_index, delta=fragment)]
        return []

    def _stop_block(self, index: Any) -> list[AssistantMessageEvent]:
        block = self._blocks.pop(index, None)
        if block is None:
            return []
        target = self.message.content[block.content_index]
        if isinstance(target, TextContent):
            return [AssistantMessageEvent("text_end", self.message, block.content_index, content=target.text)]
        if isinstance(target, ThinkingContent):
            return [AssistantMessageEvent("thinking_end", self.message, block.content_index, content=target.thinking)]
        assert isinstance(target, ToolCall) and block.parser is not None
        _finish_call(target, block.parser)
        return [AssistantMessageEvent("toolcall_end", self.message, block.content_index, tool_call=target)]

    # -------------------------------------------------------------- output

    def finish(self) -> list[AssistantMessageEvent]:
        """After the stream ended normally: open blocks' ends, then ``done`` (or ``error``)."""
        out: list[AssistantMessageEvent] = []
        for index in sorted(self._blocks, key=lambda key: self._blocks[key].content_index):
            out.extend(self._stop_block(index))
        reason = self.stop_reason
        if reason is None:
            return [*out, self.fail("error", MISSING_STOP_REASON)]
        if reason == "refusal":
            return [*out, self.fail("error", REFUSAL_TEXT)]
        stop_reason = STOP_REASONS.get(reason)
        if stop_reason is None:
            return [*out, self.fail("error", f"Provider stop_reason: {reason}")]
        has_calls = bool(self.message.tool_calls)
        if stop_reason == "tool_use" and not has_calls:
            stop_reason = "stop"
        elif stop_reason == "stop" and has_calls:
            stop_reason = "tool_use"
        self.message.stop_reason = stop_reason
        return [*out, AssistantMessageEvent("done", self.message)]

    def fail(self, stop_reason: Literal["error", "aborted"], error_message: str) -> AssistantMessageEvent:
        """The final ``error`` event; the partial content is kept as it is (open calls parsed as far as they go)."""
        for block in self._blocks.values():
            target = self.message.content[block.content_index]
            if isinstance(target, ToolCall) and block.parser is not None:
                _finish_call(target, block.parser)
        self._blocks.clear()
        self.message.stop_reason = stop_reason
        self.message.error_message = error_message
        return AssistantMessageEvent("error", self.message)

    # ---------------------------------------------------------------- usage

    def _add_usage(self, raw: Any) -> None:
        """``message_start`` has the prompt's counts, ``message_delta`` the output so far (cumulative; newer
        servers repeat the prompt's counts there too): the latest value of each count wins."""
        if raw is None:
            return
        for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = _get(raw, name)
            if isinstance(value, int):
                self._usage[name] = value
        counts = self._usage
        usage = Usage(
            input=counts.get("input_tokens", 0),
            output=counts.get("output_tokens", 0),
            cache_read=counts.get("cache_read_input_tokens", 0),
            cache_write=counts.get("cache_creation_input_tokens", 0),
        )
        usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
        cost = self.model.resolved_cost
        if cost is not None:
            usage.cost = cost.of(usage)
        self.message.usage = usage


def _finish_call(call: ToolCall, parser: IncrementalJSONParser) -> None:
    if not call.id:
        import uuid

        call.id = f"toolu_{uuid.uuid4().hex[:24]}"
    if not parser.text.strip():
        call.arguments = {}  # a tool without parameters streams no input at all
        return
    try:
        call.arguments = parser.finish()
    except ValueError:
        call.raw_arguments = parser.text
        call.arguments = parser.snapshot()
