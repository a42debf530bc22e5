"""The chat-completions request body: parameters, tools and the replayed history.

Pure functions over plain dicts, so tests can check exactly what is sent and
the provider needs no ``openai`` types. The history is cleaned the way pi's
``transform-messages.ts`` does before it is converted:

* assistant messages that ended in ``error`` or ``aborted`` are left out (they
  are incomplete turns; replaying half a tool call makes providers answer 400),
  and so are tool results that no longer answer a kept tool call;
* every tool call without a result gets a synthetic error result
  ``No result provided``, right after that assistant message's real results.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pi_kernel.ai.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_kernel.ai.models import Compat, Context, Model, StreamOptions
from pi_kernel.ai.tool import Tool

NO_RESULT_TEXT = "No result provided"
TOOL_IMAGES_TEXT = "Attached image(s) from tool result:"
IMAGE_ONLY_RESULT_TEXT = "(see attached image)"
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
"""Delta fields that carry reasoning, in the order they are looked for."""
_THINKING_OFF = frozenset({"none", "off", "disabled", "false"})

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
            body["thinking"] = {"type": "disabled" if effort in _THINKING_OFF else "enabled"}
        elif effort in _THINKING_OFF:
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
        converted["tool_calls"] = [_convert_tool_call(call, own) for call in tool_calls]
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


def _convert_tool_call(call: ToolCall, own: bool = False) -> JSON:
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
