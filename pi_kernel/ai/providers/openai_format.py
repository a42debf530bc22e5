"""The OpenAI chat-completions wire format: the request body going out, the stream chunks coming in.

**The request** (``build_request_body``): pure functions over plain dicts, so tests can check exactly what
is sent and the provider needs no ``openai`` types. The history is cleaned the way pi's
``transform-messages.ts`` does before it is converted (``replayable_history``, used by every provider):

* assistant messages that ended in ``error`` or ``aborted`` are left out (they
  are incomplete turns; replaying half a tool call makes providers answer 400),
  and so are tool results that no longer answer a kept tool call;
* every tool call without a result gets a synthetic error result
  ``No result provided``, right after that assistant message's real results.

**The chunks** (``ChunkAssembler``): it owns the partial ``AssistantMessage`` of one stream. Blocks
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

import json
import uuid
from collections.abc import Callable, Iterable
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
from pi_kernel.ai.models import AssistantEventType, AssistantMessageEvent, Compat, Context, Model, StreamOptions
from pi_kernel.ai.tool import Tool

NO_RESULT_TEXT = "No result provided"
TOOL_IMAGES_TEXT = "Attached image(s) from tool result:"
IMAGE_ONLY_RESULT_TEXT = "(see attached image)"
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
"""Delta fields that carry reasoning, in the order they are looked for."""
THINKING_OFF = frozenset({"none", "off", "disabled", "false"})

JSON = dict[str, Any]


def build_request_body(model: Model, context: Context, options: StreamOptions, compat: Compat) -> JSON:
    """The whole JSON body of a streaming ``/chat/completions`` request."""
    messages = convert_messages(model, context, compat)
    body: JSON = {"model": model.id, "messages": messages, "stream": True}
    if compat.supports_usage_in_streaming:
        body["stream_options"] = {"include_usage": True}
    if options.max_tokens is not None:
        body[compat.max_tokens_field] = options.max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if context.tools:
        body["tools"] = convert_tools(context.tools, compat)
        if options.tool_choice is not None and compat.supports_tool_choice:
            body["tool_choice"] = convert_tool_choice(options.tool_choice)
    elif compat.empty_tools_with_tool_history and has_tool_history(messages):
        # As pi: proxies such as LiteLLM in front of Anthropic refuse tool calls in the history of a
        # request that defines no tools.
        body["tools"] = []
    if options.reasoning_effort is not None:
        effort = options.reasoning_effort.lower()
        if compat.thinking_format == "deepseek":
            body["thinking"] = {"type": "disabled" if effort in THINKING_OFF else "enabled"}
        elif effort in THINKING_OFF:
            if compat.thinking_format == "openai" and compat.reasoning_effort_off:
                body["reasoning_effort"] = compat.reasoning_effort_off  # Gemini 2.5 Flash: thinking off
            # else: OpenAI's reasoning models (and Gemini 2.5 Pro, 3) cannot stop reasoning: the default stays
        elif compat.thinking_format == "openai":
            body["reasoning_effort"] = effort
        elif compat.thinking_format == "openrouter":
            body["reasoning"] = {"effort": effort}
    if options.extra_body:
        body.update(options.extra_body)
    return body


def has_tool_history(messages: list[JSON]) -> bool:
    """Whether converted ``messages`` hold a tool call or a tool result."""
    return any(message["role"] == "tool" or "tool_calls" in message for message in messages)


def convert_tool_choice(choice: str) -> str | JSON:
    """``auto``/``none``/``required`` as they are; a tool name as a forced function."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def convert_tools(tools: Iterable[Tool], compat: Compat) -> list[JSON]:
    converted = []
    for tool in tools:
        strict = tool.uses_strict_mode(compat.supports_strict_mode)
        strict_schema = tool.strict_json_schema()[0] if strict else None
        function: JSON = {
            "name": tool.name,
            "description": tool.description,
            "parameters": strict_schema if strict_schema is not None else tool.json_schema(),
        }
        if compat.supports_strict_mode and compat.send_strict_field:
            # As pi: ``strict`` only where the server supports it. Elsewhere even ``strict: false`` is
            # left out: some servers reject the unknown key, others read it their own way.
            function["strict"] = strict_schema is not None
        converted.append({"type": "function", "function": function})
    return converted


def convert_messages(model: Model, context: Context, compat: Compat) -> list[JSON]:
    """The ``messages`` array: system prompt, then the cleaned-up history."""
    converted: list[JSON] = []
    if context.system_prompt:
        role = "developer" if compat.supports_developer_role else "system"
        converted.append({"role": role, "content": context.system_prompt})
    history = replayable_history(context.messages)
    index = 0
    while index < len(history):
        message = history[index]
        if isinstance(message, UserMessage):
            user = _convert_user(message)
            if user is not None:
                converted.append(user)
            index += 1
        elif isinstance(message, AssistantMessage):
            assistant = _convert_assistant(message, model, compat)
            if assistant is not None:
                converted.append(assistant)
            index += 1
        else:
            # Consecutive tool results go out together; their images follow them
            # in one user message (tool messages cannot carry images).
            results: list[ToolResultMessage] = []
            while index < len(history):
                result = history[index]
                if not isinstance(result, ToolResultMessage):
                    break
                results.append(result)
                index += 1
            converted.extend(_convert_tool_results(results))
    return converted


def replayable_history(messages: Iterable[Message]) -> list[Message]:
    """Drop failed assistant turns and stray results; fill in missing results."""
    cleaned: list[Message] = []
    pending: list[ToolCall] = []
    answered: set[str] = set()

    def close_pending() -> None:
        for call in pending:
            if call.id not in answered:
                cleaned.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=[TextContent(NO_RESULT_TEXT)],
                        is_error=True,
                    )
                )
        pending.clear()
        answered.clear()

    for message in messages:
        if isinstance(message, ToolResultMessage):
            expected = any(call.id == message.tool_call_id for call in pending)
            if expected and message.tool_call_id not in answered:
                answered.add(message.tool_call_id)
                cleaned.append(message)
            continue
        close_pending()
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ("error", "aborted"):
                continue
            pending.extend(message.tool_calls)
        cleaned.append(message)
    close_pending()
    return cleaned


def _image_part(image: ImageContent) -> JSON:
    return {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"}}


def _convert_user(message: UserMessage) -> JSON | None:
    if isinstance(message.content, str):
        return {"role": "user", "content": message.content}
    parts: list[JSON] = []
    for block in message.content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageContent):
            parts.append(_image_part(block))
    return {"role": "user", "content": parts} if parts else None


def _convert_assistant(message: AssistantMessage, model: Model, compat: Compat) -> JSON | None:
    text = "".join(block.text for block in message.content if isinstance(block, TextContent))
    # A string, never null: llama.cpp answers 500 to ``content: null`` and
    # vLLM-based servers reject a list of parts on assistant messages.
    converted: JSON = {"role": "assistant", "content": text}
    tool_calls = message.tool_calls
    if tool_calls:
        own = message.provider == model.provider
        converted["tool_calls"] = [convert_tool_call(call, own) for call in tool_calls]
    thinking = [block for block in message.content if isinstance(block, ThinkingContent)]
    if compat.requires_reasoning_content_on_assistant_messages:
        converted["reasoning_content"] = "\n".join(block.thinking for block in thinking)
    elif thinking and message.provider == model.provider:
        # Send reasoning back only under the field this provider itself used.
        field = thinking[0].signature
        joined = "\n".join(block.thinking for block in thinking)
        if field in REASONING_FIELDS and joined.strip():
            converted[field] = joined
    if not text and not tool_calls:
        return None  # nothing to replay; providers reject empty assistant messages
    return converted


def convert_tool_call(call: ToolCall, own: bool = False) -> JSON:
    # ``arguments`` is always a dict: for a call whose streamed text was not
    # valid JSON it is the best-effort parse, so the replayed history is valid
    # JSON and the provider does not reject the whole request.
    converted: JSON = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }
    if own and call.extra_content:
        # Gemini 3 refuses a tool-call history without the thought signatures it gave (``extra_content``).
        converted["extra_content"] = call.extra_content
    return converted


def _convert_tool_results(results: list[ToolResultMessage]) -> list[JSON]:
    converted: list[JSON] = []
    images: list[JSON] = []
    for result in results:
        text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
        result_images = [_image_part(block) for block in result.content if isinstance(block, ImageContent)]
        images.extend(result_images)
        content = text if text or not result_images else IMAGE_ONLY_RESULT_TEXT
        converted.append({"role": "tool", "tool_call_id": result.tool_call_id, "content": content})
    if images:
        converted.append({"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_TEXT}, *images]})
    return converted


# ---------------------------------------------------------------------------- the chunks


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


def new_tool_call_id(prefix: str = "call") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def finish_tool_call(block: ToolCall, parser: IncrementalJSONParser, id_prefix: str = "call") -> None:
    """Close a streamed call: an id if the server sent none, the arguments parsed. Arguments that are not valid
    JSON keep what the model wrote (``raw_arguments``, and the best-effort parse): validation then names the
    tool and the problem instead of running it with {} or a half-parsed object."""
    if not block.id:
        block.id = new_tool_call_id(id_prefix)
    try:
        block.arguments = parser.finish()
    except ValueError:
        block.raw_arguments = parser.text
        block.arguments = parser.snapshot()


@dataclass(slots=True)
class _OpenCall:
    block: ToolCall
    content_index: int
    parser: IncrementalJSONParser
    server_id: bool = False
    """Whether ``block.id`` came from the server (else it is still unset)."""


class ChunkAssembler:
    """Feed it chunks; it returns the events each chunk produces.

    Not the SDK's ``ChatCompletionStreamState``: that keeps a snapshot and re-parses a call's whole
    arguments buffer on every delta (the quadratic baseline of ``benchmarks/stream_args.py``); this emits
    pi's events and feeds each delta once to ``ai.json_stream``."""

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

    @property
    def ending_known(self) -> bool:
        """The server has said how the message ends: a connection lost now loses only the usage chunk."""
        return self.finish_reason is not None

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
                finish_tool_call(call.block, call.parser)
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
            arguments = json.dumps(arguments)  # a server that sends the arguments as an object, not a JSON string
        index = read("index")
        if type(index) is not int:
            index = self._call_index(call_id)
        call = self._calls.get(index)
        if call is not None and call_id and call.server_id and call.block.id != call_id:
            # Same index, another id: a new call (Ollama numbers each chunk's calls from 0).
            finish_tool_call(call.block, call.parser)
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

    def _call_index(self, call_id: str | None) -> int:
        # No index (off-spec servers): match by id, else continue the last call.
        for key, call in self._calls.items():
            if call_id and call.block.id == call_id:
                return key
        if call_id or not self._calls:
            return max(self._calls, default=-1) + 1
        return max(self._calls, key=lambda key: self._calls[key].content_index)

    def _finalize_calls_silently(self) -> None:
        calls, self._calls = self._calls, {}
        for call in calls.values():
            finish_tool_call(call.block, call.parser)
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
