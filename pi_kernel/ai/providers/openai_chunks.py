"""Turn chat-completions stream chunks into pi's assistant message events.

``ChunkAssembler`` owns the partial ``AssistantMessage`` of one stream. Blocks
follow pi's ``openai-completions.ts``: one block is open at a time, and a delta
of another kind (text, thinking, tool calls) ends it and starts a new one, so
text after a tool call is a new text block.

Tool-call deltas are assembled by ``index``, which every server sends, rather
than by position: OpenAI gives id and name in the first delta only, llama.cpp
repeats them in every delta, some servers send the id late, Ollama sends a whole
call in one chunk (and numbers each chunk's calls from 0, so a different id at
a known index is a new call). All calls of one run of tool-call deltas stay open
until the run ends, so interleaved fragments of parallel calls still land in the
right call. Arguments go through one ``IncrementalJSONParser`` per call; a call
whose text is not valid JSON at the end keeps it in ``raw_arguments``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pi_kernel.ai.json_stream import IncrementalJSONParser
from pi_kernel.ai.messages import AssistantMessage, StopReason, TextContent, ThinkingContent, ToolCall, Usage
from pi_kernel.ai.models import AssistantEventType, AssistantMessageEvent, Model
from pi_kernel.ai.providers.openai_convert import REASONING_FIELDS

BlockKind = Literal["text", "thinking", "tool_calls"]

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    # Other names servers use for the same ends (compared lower-cased):
    "end": "stop",  # pi accepts it as a normal stop
    "eos_token": "stop",  # Hugging Face TGI before 2.2.1 (and servers built on it)
    "eos": "stop",
    "stop_sequence": "stop",  # TGI: a stop sequence was generated
    "model_length": "length",  # Mistral: the model's context is full
}
MISSING_FINISH_REASON = "Stream ended without finish_reason"


def field_of(obj: Any, name: str) -> Any:
    """``obj.name`` for ``openai`` models (extra fields included) and ``obj[name]`` for dicts."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def fields_of(obj: Any) -> Callable[[str], Any]:
    """``field_of`` bound to one object: a chunk's delta is read five to ten times."""
    if isinstance(obj, dict):
        return obj.get
    if obj is None:
        return _nothing
    return lambda name: getattr(obj, name, None)


def _nothing(name: str) -> None:
    return None


def new_tool_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(slots=True)
class _OpenCall:
    block: ToolCall
    content_index: int
    parser: IncrementalJSONParser
    server_id: bool = False
    """Whether ``block.id`` came from the server (else it is still unset)."""


class ChunkAssembler:
    """Feed it chunks; it returns the events each chunk produces."""

    def __init__(self, model: Model, requested_max_tokens: int | None = None) -> None:
        self.model = model
        self.compat = model.resolved_compat()
        self.message = AssistantMessage(model=model.id, provider=model.provider)
        self.finish_reason: str | None = None
        """The last ``finish_reason`` the server sent (``None``: none yet)."""
        self.requested_max_tokens = requested_max_tokens
        self._kind: BlockKind | None = None
        self._block_index = -1
        self._text = TextContent("")
        """The open text block (while ``_kind == "text"``)."""
        self._thinking = ThinkingContent("")
        """The open thinking block (while ``_kind == "thinking"``)."""
        self._calls: dict[int, _OpenCall] = {}
        """Open tool calls of the current run, by the server's ``index``."""
        self._out: list[AssistantMessageEvent] = []

    # ---------------------------------------------------------------- input

    def start(self) -> AssistantMessageEvent:
        return AssistantMessageEvent("start", self.message)

    def feed(self, chunk: Any) -> list[AssistantMessageEvent]:
        """Events for one chunk (often one, sometimes none or several)."""
        out: list[AssistantMessageEvent] = []
        self._out = out
        read_chunk = fields_of(chunk)
        usage = read_chunk("usage")
        if usage:
            self._set_usage(usage)
        choices = read_chunk("choices")
        if not choices:
            return out
        read_choice = fields_of(choices[0])
        finish_reason = read_choice("finish_reason")
        if finish_reason:
            self.finish_reason = finish_reason
        delta = read_choice("delta")
        if delta is None:
            return out
        if type(delta) is dict and len(delta) == 1:
            tool_calls = delta.get("tool_calls")
            if tool_calls:  # a delta of tool calls alone (most of a long call's chunks)
                for tool_delta in tool_calls:
                    self._add_tool_delta(tool_delta)
                return out
        read = fields_of(delta)
        text = read("content") or read("refusal")
        if text:
            self._add_text(text)
        for name in REASONING_FIELDS:
            # The first non-empty field only: some servers send the same text
            # under two names.
            reasoning = read(name)
            if reasoning:
                self._add_thinking(reasoning, name)
                break
        tool_calls = read("tool_calls")
        if tool_calls:
            for tool_delta in tool_calls:
                self._add_tool_delta(tool_delta)
        return out

    # -------------------------------------------------------------- output

    def finish(self) -> list[AssistantMessageEvent]:
        """Once the stream has ended: the open block's ``*_end`` events, then ``done`` (or ``error``)."""
        closing: list[AssistantMessageEvent] = []
        self._out = closing
        self._close_block()
        message = self.message
        reason = self.finish_reason
        if reason is None:
            return [*closing, self.fail("error", MISSING_FINISH_REASON)]
        stop_reason = _FINISH_REASONS.get(str(reason).lower())
        if stop_reason is None:
            return [*closing, self.fail("error", f"Provider finish_reason: {reason}")]
        has_calls = any(isinstance(block, ToolCall) for block in message.content)
        if stop_reason == "stop" and has_calls:
            stop_reason = "tool_use"  # some servers say "stop" after tool calls
        elif stop_reason == "tool_use" and not has_calls:
            stop_reason = "stop"  # nothing to run
        if stop_reason == "tool_use" and self._hit_token_limit():
            # vLLM reports tool_calls on output cut off by max_tokens; running
            # a call with truncated arguments would be worse than not running it.
            stop_reason = "length"
        message.stop_reason = stop_reason
        return [*closing, AssistantMessageEvent("done", message)]

    def fail(self, stop_reason: Literal["error", "aborted"], error_message: str) -> AssistantMessageEvent:
        """The final ``error`` event; the partial content is kept as it is."""
        self._finalize_calls_silently()
        self.message.stop_reason = stop_reason
        self.message.error_message = error_message
        return AssistantMessageEvent("error", self.message)

    def _hit_token_limit(self) -> bool:
        limit = self.requested_max_tokens
        return limit is not None and self.message.usage.output >= limit

    # --------------------------------------------------------------- blocks

    def _open(self, kind: BlockKind) -> None:
        if self._kind != kind:
            self._close_block()
            self._kind = kind

    def _close_block(self) -> None:
        kind, self._kind = self._kind, None
        if kind == "text" or kind == "thinking":
            value = self._text.text if kind == "text" else self._thinking.thinking
            event_type: AssistantEventType = "text_end" if kind == "text" else "thinking_end"
            self._out.append(AssistantMessageEvent(event_type, self.message, self._block_index, content=value))
        elif kind == "tool_calls":
            calls, self._calls = self._calls, {}
            for call in sorted(calls.values(), key=lambda open_call: open_call.content_index):
                self._finalize_call(call)
                self._out.append(
                    AssistantMessageEvent("toolcall_end", self.message, call.content_index, tool_call=call.block)
                )

    def _append_block(self, block: TextContent | ThinkingContent | ToolCall) -> int:
        self.message.content.append(block)
        self._block_index = len(self.message.content) - 1
        return self._block_index

    def _add_text(self, text: str) -> None:
        if self._kind != "text":
            self._open("text")
            self._text = TextContent("")
            index = self._append_block(self._text)
            self._out.append(AssistantMessageEvent("text_start", self.message, index))
        self._text.text += text
        self._out.append(AssistantMessageEvent("text_delta", self.message, self._block_index, delta=text))

    def _add_thinking(self, text: str, field: str) -> None:
        if self._kind != "thinking":
            self._open("thinking")
            self._thinking = ThinkingContent("", signature=field)
            index = self._append_block(self._thinking)
            self._out.append(AssistantMessageEvent("thinking_start", self.message, index))
        self._thinking.thinking += text
        self._out.append(AssistantMessageEvent("thinking_delta", self.message, self._block_index, delta=text))

    def _add_tool_delta(self, tool_delta: Any) -> None:
        if self._kind != "tool_calls":
            self._open("tool_calls")
        elif type(tool_delta) is dict and len(tool_delta) == 2:
            # The usual delta of a long call: ``{"index": i, "function": {"arguments": "..."}}`` for a call
            # already open. Nothing but its arguments can change, so the general path below is skipped.
            function = tool_delta.get("function")
            index = tool_delta.get("index")
            call = self._calls.get(index) if type(index) is int else None
            if call is not None and type(function) is dict and len(function) == 1:
                arguments = function.get("arguments")
                if type(arguments) is str:
                    if arguments:
                        parser = call.parser
                        parser.feed(arguments)
                        call.block.arguments = parser.snapshot()
                        self._out.append(
                            AssistantMessageEvent("toolcall_delta", self.message, call.content_index, delta=arguments)
                        )
                    return
        read = fields_of(tool_delta)
        call_id = read("id") or None
        read_function = fields_of(read("function"))
        name = read_function("name") or None
        arguments = read_function("arguments")
        if arguments is not None and not isinstance(arguments, str):
            import json  # a server that sends the arguments as an object, not a JSON string

            arguments = json.dumps(arguments)
        index = read("index")
        if type(index) is not int:
            index = self._call_index(index, call_id)
        call = self._calls.get(index)
        if call is not None and call_id and call.server_id and call.block.id != call_id:
            # Same index, another id: a new call (Ollama numbers each chunk's calls from 0).
            self._finalize_call(call)
            self._out.append(
                AssistantMessageEvent("toolcall_end", self.message, call.content_index, tool_call=call.block)
            )
            call = None
        changed = False
        if call is None:
            block = ToolCall(id="", name="")
            call = _OpenCall(block, self._append_block(block), IncrementalJSONParser())
            self._calls[index] = call
            self._out.append(AssistantMessageEvent("toolcall_start", self.message, call.content_index))
        if call_id and not call.server_id:
            call.block.id, call.server_id, changed = call_id, True, True
        if name and not call.block.name:
            call.block.name, changed = name, True
        if arguments:
            call.parser.feed(arguments)
            call.block.arguments = call.parser.snapshot()
            changed = True
        extra = read("extra_content")
        if extra is not None:
            extra = extra.model_dump() if hasattr(extra, "model_dump") else extra
            if isinstance(extra, dict) and extra:  # Gemini's thought signature: kept to be sent back
                call.block.extra_content = {**(call.block.extra_content or {}), **extra}
        if changed:
            self._out.append(
                AssistantMessageEvent("toolcall_delta", self.message, call.content_index, delta=arguments or "")
            )

    def _call_index(self, index: Any, call_id: str | None) -> int:
        if isinstance(index, int):
            return index
        # No index (off-spec servers): match by id, else continue the last call.
        for key, call in self._calls.items():
            if call_id and call.block.id == call_id:
                return key
        if call_id or not self._calls:
            return max(self._calls, default=-1) + 1
        return max(self._calls, key=lambda key: self._calls[key].content_index)

    def _finalize_call(self, call: _OpenCall) -> None:
        block = call.block
        if not block.id:
            block.id = new_tool_call_id()
        try:
            arguments = call.parser.finish()
        except ValueError:
            # Keep what the model wrote: validation then names the tool and the
            # problem instead of running it with {} or a half-parsed object.
            block.raw_arguments = call.parser.text
            block.arguments = call.parser.snapshot()
            return
        block.arguments = arguments

    def _finalize_calls_silently(self) -> None:
        calls, self._calls = self._calls, {}
        for call in calls.values():
            self._finalize_call(call)
        self._kind = None

    # ---------------------------------------------------------------- usage

    def _set_usage(self, raw: Any) -> None:
        # As pi's openai-completions provider: ``input`` is the uncached part of
        # the prompt, cache reads are counted apart, and the total is the sum.
        details = field_of(raw, "prompt_tokens_details")
        cache_read = field_of(details, "cached_tokens") or field_of(raw, "prompt_cache_hit_tokens") or 0
        prompt = field_of(raw, "prompt_tokens") or 0
        completion = field_of(raw, "completion_tokens") or 0
        compat = self.compat
        if compat.reasoning_tokens_outside_completion:
            completion = max(completion, (field_of(raw, "total_tokens") or 0) - prompt)
        uncached = max(prompt - cache_read, 0)
        usage = Usage(
            input=uncached,
            output=completion,
            cache_read=cache_read,
            total_tokens=uncached + completion + cache_read,
        )
        cost = self.model.resolved_cost
        if cost is not None:
            usage.cost = cost.of(usage)
        elif compat.usage_cost_field and isinstance(field_of(raw, "cost"), (int, float)):
            usage.cost = float(field_of(raw, "cost"))
        self.message.usage = usage
