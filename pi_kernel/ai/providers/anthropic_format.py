"""Anthropic's Messages API wire format: the request body going out, the stream events coming in.

**The request** (``build_anthropic_body``): parameters, tools, thinking, cache breakpoints and the replayed
history, as pure functions over plain dicts (as ``openai_format``), so tests check exactly what is sent.
The history is first cleaned as for every provider (``openai_format.replayable_history``: failed turns out,
missing tool results filled in), then converted:

* a run of tool results becomes one ``user`` message of ``tool_result`` blocks
  (the API wants every result of an assistant turn in the next message);
* thinking blocks of Anthropic's own turns go back exactly as they came, with
  their signatures (``redacted_thinking`` with its data), in their place before
  the text and tool calls they led to: the API refuses a tool-use turn whose
  thinking was changed or dropped while thinking is on. Thinking of other
  providers, or without a signature (an aborted stream), is left out;
* tool call ids are cut to the characters the API accepts, the same way on the
  call and on its result.

Prompt caching places the breakpoints where pi does: on the last tool, on the
system prompt and on the last block of the conversation's latest user message
(a tool result's message included); when many blocks came since the user message
before it (parallel tool calls), on that one too, as the API looks back only
about 20 blocks from a breakpoint (``LOOKBACK_MARGIN``). The API caches the prefix up to each
breakpoint (tools, then system, then messages), so the next request of the
session reads all of it from the cache and pays full price only for what was
added since.

**The events** (``AnthropicAssembler``), in the documented sequence: ``message_start`` (the prompt's usage), then per
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

Long: the whole wire format (the body out, the events in) of one API, so it is read and changed in one place.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pi_kernel.ai.json_stream import IncrementalJSONParser
from pi_kernel.ai.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_kernel.ai.models import AssistantEventType, AssistantMessageEvent, Context, Model, StreamOptions
from pi_kernel.ai.providers.openai_format import (
    IMAGE_ONLY_RESULT_TEXT,
    THINKING_OFF,
    field_of,
    finish_tool_call,
    replayable_history,
)
from pi_kernel.ai.tool import Tool

JSON = dict[str, Any]

CACHE_CONTROL: JSON = {"type": "ephemeral"}
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
"""``budget_tokens`` for each effort (pi's defaults); ``off`` (and ``none``) sends no ``thinking``."""
_TOOL_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


MAX_OUTPUT_TOKENS = {
    "claude-opus-4-5": 64_000,
    "claude-opus-4-1": 32_000,
    "claude-opus-4": 32_000,
    "claude-3-7": 64_000,
    "claude-3-5": 8_192,
    "claude-3-opus": 4_096,
    "claude-3-haiku": 4_096,
}
"""Output caps by id prefix, the longest matching prefix winning (``claude-opus-4-5`` is not an Opus 4);
64,000 (the Claude 4.5 and Sonnet 4 models) for ids matching none: ``max_tokens`` raised by a thinking budget
stays within them."""


def max_output_tokens(model: Model) -> int:
    prefixes = [prefix for prefix in MAX_OUTPUT_TOKENS if model.id.startswith(prefix)]
    return MAX_OUTPUT_TOKENS[max(prefixes, key=len)] if prefixes else 64_000


def default_max_tokens(model: Model) -> int:
    """``max_tokens`` when the caller set none (the API requires it): within what older models can write."""
    if model.id.startswith(("claude-3-haiku", "claude-3-opus", "claude-3-sonnet")):
        return min(model.max_tokens, 4096)
    if model.id.startswith(("claude-3-5", "claude-3-7")):
        return min(model.max_tokens, 8192)
    return model.max_tokens


def thinking_budget(effort: str | None) -> int | None:
    """Tokens of thinking for ``effort`` (``None``: thinking off); an unknown word means ``medium``."""
    if effort is None or effort.lower() in THINKING_OFF:
        return None
    return THINKING_BUDGETS.get(effort.lower(), THINKING_BUDGETS["medium"])


def build_anthropic_body(model: Model, context: Context, options: StreamOptions, cache: bool = True) -> JSON:
    """The whole JSON body of a streaming ``POST /v1/messages`` request."""
    max_tokens = options.max_tokens or default_max_tokens(model)
    body: JSON = {"model": model.id, "max_tokens": max_tokens, "stream": True}
    if context.system_prompt:
        system: JSON = {"type": "text", "text": context.system_prompt}
        if cache:
            system["cache_control"] = CACHE_CONTROL
        body["system"] = [system]
    body["messages"] = convert_messages(model, context.messages, cache)
    choice = options.tool_choice
    if context.tools:
        body["tools"] = convert_tools(context.tools, cache)
        if choice is not None:
            body["tool_choice"] = convert_tool_choice(choice)
    forced = choice is not None and choice not in ("auto", "none") and bool(context.tools)
    budget = thinking_budget(options.reasoning_effort) if model.is_reasoning else None
    # The API refuses thinking with a forced tool, and (thinking on) a tool loop whose assistant turn does not
    # start with thinking: after ``--tool``'s forced first request, or a switch from another model, thinking
    # stays off until the loop ends.
    if budget is not None and not forced and _tool_loop_can_think(body["messages"]):
        # ``max_tokens`` counts the thinking too: the answer keeps what was asked for, within the model's cap
        # (and the budget, at least 1,024 tokens, below ``max_tokens`` as the API requires).
        body["max_tokens"] = min(max_tokens + budget, max(max_output_tokens(model), 2048))
        budget = max(min(budget, body["max_tokens"] - 1), 1024)
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif options.temperature is not None:  # with thinking on, only the default temperature is accepted
        body["temperature"] = options.temperature
    if options.extra_body:
        body.update(options.extra_body)
    return body


def _tool_loop_can_think(messages: list[JSON]) -> bool:
    """False when the request continues a tool loop (the trailing user messages hold tool results, a steering
    message may follow them) whose assistant message does not start with a ``thinking``/``redacted_thinking``
    block: the API then refuses thinking."""
    index = len(messages)
    while index > 0 and messages[index - 1]["role"] == "user":
        index -= 1
    trailing = messages[index:]
    if index == 0 or not any(block.get("type") == "tool_result" for m in trailing for block in m["content"]):
        return True
    assistant = messages[index - 1]["content"]
    return not assistant or assistant[0]["type"] in ("thinking", "redacted_thinking")


def convert_tools(tools: Iterable[Tool], cache: bool = True) -> list[JSON]:
    converted = [
        {"name": tool.name, "description": tool.description, "input_schema": tool.json_schema()} for tool in tools
    ]
    if cache and converted:
        converted[-1]["cache_control"] = CACHE_CONTROL
    return converted


def convert_tool_choice(choice: str) -> JSON:
    """``auto``/``none`` as they are, ``required`` as ``any``, a tool name as that tool."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def tool_id(call_id: str) -> str:
    """A tool call id as the API accepts it (``^[A-Za-z0-9_-]{1,64}$``); ids of other providers may not be."""
    return _TOOL_ID_CHARS.sub("_", call_id)[:64] or "call"


def convert_messages(model: Model, messages: Iterable[Message], cache: bool = True) -> list[JSON]:
    """The ``messages`` array, with the cache breakpoint on the latest user message's last block."""
    converted: list[JSON] = []
    for results, run in itertools.groupby(replayable_history(messages), lambda m: isinstance(m, ToolResultMessage)):
        if results:  # every result of an assistant turn goes in one message
            blocks = [_tool_result(result) for result in run if isinstance(result, ToolResultMessage)]
            converted.append({"role": "user", "content": blocks})
            continue
        for message in run:
            if isinstance(message, UserMessage) and (blocks := _user_blocks(message)):
                converted.append({"role": "user", "content": blocks})
            elif isinstance(message, AssistantMessage) and (blocks := _assistant_blocks(message, model)):
                converted.append({"role": "assistant", "content": blocks})
    if cache:
        _place_message_breakpoints(converted)
    return converted


LOOKBACK_MARGIN = 18
"""The API finds a cached prefix only at a breakpoint or up to about 20 blocks before one: when more blocks
than this were added since the previous user message (say ten parallel tool calls and their results), that
message gets a breakpoint of its own (the fourth, after tools and system), so the prefix the previous request
wrote is still read."""


def _place_message_breakpoints(converted: list[JSON]) -> None:
    users = [index for index, message in enumerate(converted) if message["role"] == "user"]
    if not users:
        return
    latest = users[-1]
    converted[latest]["content"][-1]["cache_control"] = CACHE_CONTROL
    if len(users) < 2:
        return
    previous = users[-2]
    added = sum(len(message["content"]) for message in converted[previous + 1 : latest + 1])
    if added > LOOKBACK_MARGIN:
        converted[previous]["content"][-1]["cache_control"] = CACHE_CONTROL


def _image(block: ImageContent) -> JSON:
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def _user_blocks(message: UserMessage) -> list[JSON]:
    if isinstance(message.content, str):
        return [{"type": "text", "text": message.content}] if message.content.strip() else []
    blocks: list[JSON] = []
    for block in message.content:
        if isinstance(block, TextContent) and block.text.strip():
            blocks.append({"type": "text", "text": block.text})  # the API refuses empty text blocks
        elif isinstance(block, ImageContent):
            blocks.append(_image(block))
    return blocks


def _assistant_blocks(message: AssistantMessage, model: Model) -> list[JSON]:
    own = message.provider == model.provider
    blocks: list[JSON] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if not own or not block.signature:
                continue
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.signature})
            else:
                blocks.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        elif isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolCall):
            blocks.append({"type": "tool_use", "id": tool_id(block.id), "name": block.name, "input": block.arguments})
    if not any(block["type"] in ("text", "tool_use") for block in blocks):
        return []  # thinking alone is not a turn the API takes back
    return blocks


def _tool_result(result: ToolResultMessage) -> JSON:
    content: list[JSON] = []
    for block in result.content:
        if isinstance(block, TextContent) and block.text:
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent):
            content.append(_image(block))
    if not any(part["type"] == "text" for part in content):
        content.insert(0, {"type": "text", "text": IMAGE_ONLY_RESULT_TEXT if content else "(no output)"})
    converted: JSON = {"type": "tool_result", "tool_use_id": tool_id(result.tool_call_id), "content": content}
    if result.is_error:
        converted["is_error"] = True
    return converted


# ---------------------------------------------------------------------------- the events


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


@dataclass(slots=True)
class _Block:
    content_index: int
    parser: IncrementalJSONParser | None = None


class AnthropicAssembler:
    """Feed it stream events; it returns the events each one produces."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.message = AssistantMessage(model=model.id, provider=model.provider)
        self.stop_reason: str | None = None
        """The API's ``stop_reason`` once ``message_delta`` has brought it."""
        self._blocks: dict[int, _Block] = {}
        """Open blocks by the server's index."""
        self._usage: dict[str, int] = {}

    @property
    def ending_known(self) -> bool:
        """The stop reason came: a connection lost now loses only ``message_stop``."""
        return self.stop_reason is not None

    def start(self) -> AssistantMessageEvent:
        return AssistantMessageEvent("start", self.message)

    def feed(self, event: Any) -> list[AssistantMessageEvent]:
        kind = field_of(event, "type")
        if kind == "content_block_delta":
            return self._delta(field_of(event, "index"), field_of(event, "delta"))
        if kind == "content_block_start":
            return self._start_block(field_of(event, "index"), field_of(event, "content_block"))
        if kind == "content_block_stop":
            return self._stop_block(field_of(event, "index"))
        if kind == "message_start":
            self._add_usage(field_of(field_of(event, "message"), "usage"))
        elif kind == "message_delta":
            self.stop_reason = field_of(field_of(event, "delta"), "stop_reason") or self.stop_reason
            self._add_usage(field_of(event, "usage"))
        return []

    # --------------------------------------------------------------- blocks

    def _start_block(self, index: Any, block: Any) -> list[AssistantMessageEvent]:
        out = self._stop_block(index)  # a repeated index closes the old block first
        kind = field_of(block, "type")
        content = self.message.content
        if kind not in ("text", "thinking", "redacted_thinking", "tool_use"):
            return out  # a server tool's block
        self._blocks[index] = _Block(len(content), IncrementalJSONParser() if kind == "tool_use" else None)
        first: JSON | None = None
        if kind == "text":
            content.append(TextContent(""))
            first = {"type": "text_delta", "text": field_of(block, "text") or ""}
        elif kind == "thinking":
            content.append(ThinkingContent("", signature=field_of(block, "signature") or None))
            first = {"type": "thinking_delta", "thinking": field_of(block, "thinking") or ""}
        elif kind == "redacted_thinking":
            content.append(ThinkingContent(REDACTED_THINKING_TEXT, signature=field_of(block, "data"), redacted=True))
        else:
            content.append(ToolCall(id=field_of(block, "id") or "", name=field_of(block, "name") or ""))
            initial = field_of(block, "input")  # some proxies send the whole input here rather than as deltas
            first = {"type": "input_json_delta", "partial_json": json.dumps(initial)} if initial else None
        started: AssistantEventType = (
            "text_start" if kind == "text" else "toolcall_start" if kind == "tool_use" else "thinking_start"
        )
        out.append(AssistantMessageEvent(started, self.message, len(content) - 1))
        return out + (self._delta(index, first) if first is not None else [])

    def _delta(self, index: Any, delta: Any) -> list[AssistantMessageEvent]:
        block = self._blocks.get(index)
        if block is None:
            return []
        target = self.message.content[block.content_index]
        kind = field_of(delta, "type")
        if kind == "text_delta" and isinstance(target, TextContent):
            text = field_of(delta, "text") or ""
            target.text += text
            return [AssistantMessageEvent("text_delta", self.message, block.content_index, delta=text)] if text else []
        if kind == "thinking_delta" and isinstance(target, ThinkingContent):
            text = field_of(delta, "thinking") or ""
            target.thinking += text
            return (
                [AssistantMessageEvent("thinking_delta", self.message, block.content_index, delta=text)] if text else []
            )
        if kind == "signature_delta" and isinstance(target, ThinkingContent):
            target.signature = (target.signature or "") + (field_of(delta, "signature") or "")
        elif kind == "input_json_delta" and isinstance(target, ToolCall) and block.parser is not None:
            fragment = field_of(delta, "partial_json") or ""
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
        finish_tool_call(target, block.parser, "toolu")
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
        if stop_reason in ("stop", "tool_use"):  # what the message holds decides
            stop_reason = "tool_use" if self.message.tool_calls else "stop"
        self.message.stop_reason = stop_reason
        return [*out, AssistantMessageEvent("done", self.message)]

    def fail(self, stop_reason: Literal["error", "aborted"], error_message: str) -> AssistantMessageEvent:
        """The final ``error`` event; the partial content is kept as it is (open calls parsed as far as they go)."""
        for block in self._blocks.values():
            target = self.message.content[block.content_index]
            if isinstance(target, ToolCall) and block.parser is not None:
                finish_tool_call(target, block.parser, "toolu")
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
            value = field_of(raw, name)
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
