"""Compaction: older turns summarised by the model into one message, so a conversation never outgrows
the model's context window (pi's coding-agent compaction, brought to the agent loop).

When: before each model request the loop estimates the request's size
(``estimate_context_tokens``: the prompt tokens the last answer reported plus
an estimate of what was added since, as pi does); when it would not leave
``reserve_tokens`` for the answer inside the model's ``context_window``, it
compacts first. When the provider still answers with a context-length error
(``pi_kernel.ai.overflow``), the loop compacts and retries that request once.
``Agent.compact()`` (``%pi compact``) compacts on demand.

How (``compact_context``): the newest messages worth ``keep_recent_tokens``
stay verbatim (``find_cut`` never parts a tool call from its result). The older
part is written out as text and sent to the model with ``SUMMARY_PROMPT``. The
answer becomes one user message starting with the visible marker
``[compacted N turns]`` (``summary_text``) that replaces the older part, so saved
sessions keep it; a previous summary is folded into the new one. If the summary
request fails, a plain list of the older prompts and tool calls stands in for it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pi_kernel.agent.tool_execution import call_hook
from pi_kernel.agent.types import AgentLoopConfig, CompactionEvent, CompactionSettings
from pi_kernel.ai import (
    AbortSignal,
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
    stream,
)

CompactionReason = Literal["threshold", "overflow", "manual"]

CHARS_PER_TOKEN = 4
"""The estimate pi uses for ASCII text (conservative for English and code)."""
IMAGE_TOKENS = 1_200

SUMMARY_PROMPT = """You are summarising the earlier part of a conversation between a user and an AI \
assistant working in a Jupyter notebook, so that the assistant can continue the work without it. \
Write a concise summary with these sections:

## Goal
What the user wants.
## Done
What was done so far, and the results that matter (numbers, findings, decisions).
## Files and variables
Every file read or written and every notebook variable created or changed, with a few words each.
## Pending
What is still to do, open questions, and the next step.

Keep exact names, paths, values and error messages. Do not invent anything. Answer with the summary only."""


# ---------------------------------------------------------------- sizes


def text_tokens(text: str) -> int:
    """``text``'s size in tokens: ASCII at ``CHARS_PER_TOKEN`` characters a token, any other character
    (Chinese, Japanese, Korean, ...) a token each, as tokenizers give them about that."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars // CHARS_PER_TOKEN + len(text) - ascii_chars


def _message_text(message: Any) -> tuple[str, int]:
    """A message's text as the model reads it, and its number of images."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content, 0
    parts: list[str] = []
    images = 0
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ThinkingContent):
            parts.append(block.thinking)
        elif isinstance(block, ToolCall):
            parts.append(block.name + json.dumps(block.arguments, default=str, ensure_ascii=False))
        elif isinstance(block, ImageContent):
            images += 1
    return "".join(parts), images


def estimate_tokens(message: Any) -> int:
    """A message's size in tokens, from its characters (``text_tokens``)."""
    text, images = _message_text(message)
    return text_tokens(text) + images * IMAGE_TOKENS + 4


def chars_per_token(messages: Sequence[Any]) -> float:
    """How many characters make a token in ``messages`` (1 for Chinese, 4 for English and code)."""
    chars = tokens = 0
    for message in messages:
        text, _ = _message_text(message)
        chars += len(text)
        tokens += text_tokens(text)
    if tokens == 0:
        return float(CHARS_PER_TOKEN)
    return min(max(chars / tokens, 1.0), float(CHARS_PER_TOKEN))


def _reported_tokens(message: Any) -> int:
    """The prompt plus answer tokens an assistant message's usage reports (0: none reported)."""
    if getattr(message, "role", "") != "assistant" or message.stop_reason in ("error", "aborted"):
        return 0
    usage = message.usage
    return int(usage.prompt_tokens + usage.output)


def estimate_context_tokens(context: Context) -> int:
    """The next request's size: the last reported usage plus what was added since (as pi's
    ``estimateContextTokens``), else the whole request estimated from its characters. Usage reported
    before the latest compaction is ignored: it counted the messages the summary replaced."""
    messages = context.messages
    since = messages[0].timestamp if messages and is_summary(messages[0]) else 0
    added = 0
    for index in range(len(messages) - 1, -1, -1):
        reported = _reported_tokens(messages[index])
        if reported and messages[index].timestamp > since:
            return reported + added
        added += estimate_tokens(messages[index])
    fixed = text_tokens(context.system_prompt or "")
    for tool in context.tools or ():
        fixed += text_tokens(tool.description + json.dumps(tool.json_schema(), default=str, ensure_ascii=False))
    return added + fixed


def reserve_tokens(model: Model, settings: CompactionSettings) -> int:
    if settings.reserve_tokens is not None:
        return settings.reserve_tokens
    return min(model.max_tokens, model.resolved_context_window // 4, 16_384)


def needs_compaction(context: Context, model: Model, settings: CompactionSettings) -> bool:
    window = model.resolved_context_window
    return estimate_context_tokens(context) > window - reserve_tokens(model, settings)


# ---------------------------------------------------------------- the cut


def find_cut(messages: Sequence[Any], keep_tokens: int) -> int:
    """Index of the first message kept verbatim: the newest ``keep_tokens`` worth, starting at a user or
    assistant message (never at a tool result, so no call is parted from its result), and leaving at
    least one message that is not already a summary to compact. ``0``: nothing can be compacted."""
    cut = 0
    if keep_tokens <= 0:  # keep the last prompt and what followed it (``%pi compact``)
        cut = next((i for i in range(len(messages) - 1, 0, -1) if getattr(messages[i], "role", "") == "user"), 0)
    else:
        kept = 0
        for index in range(len(messages) - 1, 0, -1):
            kept += estimate_tokens(messages[index])
            if getattr(messages[index], "role", "") != "tool_result":
                cut = index
            if kept >= keep_tokens and cut:
                break
    return 0 if cut == 1 and is_summary(messages[0]) else cut


def is_summary(message: Any) -> bool:
    """Whether ``message`` is a compaction summary: a user message with ``compacted_turns`` set (by structure;
    a prompt that begins with ``[compacted 40 turns]`` is a prompt)."""
    return getattr(message, "role", "") == "user" and isinstance(getattr(message, "compacted_turns", None), int)


def compacted_turns_of(message: Any) -> int:
    """The turns a summary folds in (0 for any other message)."""
    return int(message.compacted_turns) if is_summary(message) else 0


def summary_text(turns: int, summary: str) -> str:
    plural = "turn" if turns == 1 else "turns"
    return (
        f"[compacted {turns} {plural}] The earlier conversation was compacted into this summary "
        f"(the model wrote it; the original messages are no longer sent):\n\n{summary.strip()}"
    )


# ---------------------------------------------------------------- the summary request


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit:,} characters left out]"


def serialize_messages(messages: Sequence[Any], max_chars: int) -> str:
    """The messages as plain text for the summary request, at most about ``max_chars`` (the oldest
    part after a previous summary gives way first)."""
    rows: list[str] = []
    for message in messages:
        role = getattr(message, "role", "")
        if role == "user":
            rows.append(f"[User]: {_clip(_message_text(message)[0], 20_000)}")
        elif role == "assistant":
            text = "".join(b.text for b in message.content if isinstance(b, TextContent))
            if text.strip():
                rows.append(f"[Assistant]: {_clip(text, 8_000)}")
            for call in message.tool_calls:
                rows.append(f"[Assistant called {call.name}]: {_clip(json.dumps(call.arguments, default=str), 2_000)}")
            if message.error_message:
                rows.append(f"[Assistant {message.stop_reason}]: {_clip(message.error_message, 500)}")
        elif role == "tool_result":
            mark = " (error)" if message.is_error else ""
            rows.append(f"[Result of {message.tool_name}{mark}]: {_clip(_message_text(message)[0], 2_000)}")
    text = "\n\n".join(rows)
    if len(text) <= max_chars:
        return text
    head = rows[0] if rows and is_summary(messages[0]) else ""
    room = max(max_chars - len(head), max_chars // 2)
    return f"{_clip(head, max_chars // 2)}\n\n[... older messages left out ...]\n\n{text[-room:]}"


def fallback_summary(messages: Sequence[Any], max_chars: int = 8_000) -> str:
    """What stands in for the model's summary when its request fails: prompts and tool calls, clipped."""
    rows = ["(The model could not summarise; this is the list of what happened.)"]
    for message in messages:
        role = getattr(message, "role", "")
        if role == "user":
            rows.append(f"- user: {_clip(_message_text(message)[0], 300)}")
        elif role == "assistant":
            rows.extend(
                f"- called {call.name} {_clip(json.dumps(call.arguments, default=str), 200)}"
                for call in message.tool_calls
            )
    total = sum(len(row) + 1 for row in rows)
    while total > max_chars and len(rows) > 2:  # the oldest rows give way, the heading stays
        total -= len(rows.pop(1)) + 1
    return _clip("\n".join(rows), max_chars)


async def compact_context(
    context: Context,
    config: AgentLoopConfig,
    reason: CompactionReason,
    emit: Any,
    signal: AbortSignal | None = None,
    still_current: Callable[[], bool] | None = None,
) -> CompactionEvent | None:
    """Summarise the older part of ``context.messages`` with ``config.model`` (``config.compaction``'s
    settings), assign the new list and emit the ``compaction`` event (which is returned); ``None`` (nothing
    changed) when there was nothing to compact, the run was aborted, or ``still_current`` says the
    conversation changed while the summary was written (the result would drop what was added)."""
    model, settings = config.model, config.compaction or CompactionSettings()
    messages = context.messages
    before = estimate_context_tokens(context)
    window = model.resolved_context_window
    answer_tokens = min(settings.summary_max_tokens, max(window // 8, 64))
    keep = settings.keep_recent_tokens if settings.keep_recent_tokens is not None else window // 4
    if reason == "overflow":  # the estimate was short of the provider's count: keep less
        keep //= 2
    cut = find_cut(messages, keep)
    # The kept part with the summary must leave room for the answer: keep less until it does.
    room = window - reserve_tokens(model, settings) - answer_tokens
    while cut and keep > 0 and sum(estimate_tokens(m) for m in messages[cut:]) > room:
        keep = keep // 2 if keep > 64 else 0
        cut = find_cut(messages, keep)
    if cut == 0:
        return None
    older, kept = list(messages[:cut]), list(messages[cut:])
    ratio = chars_per_token(older)
    room_tokens = max(window - answer_tokens - text_tokens(SUMMARY_PROMPT) - 64, 256)
    transcript = serialize_messages(older, int(room_tokens * ratio * 0.9))
    request = Context(
        SUMMARY_PROMPT, [UserMessage([TextContent(f"The conversation to summarise:\n\n{transcript}")])], []
    )
    options = config.stream_options or StreamOptions()
    request_options = dataclasses.replace(options, signal=signal, max_tokens=answer_tokens, tool_choice=None)
    response = await call_hook(config.stream_fn or stream, model, request, request_options)
    answer: AssistantMessage = await response.result()
    if signal is not None and signal.aborted:
        return None
    error: str | None = None
    text = answer.text.strip()
    if answer.stop_reason in ("error", "aborted") or not text:
        error = answer.error_message or "the model gave an empty summary"
        text = fallback_summary(older, int(min(8_000, answer_tokens * ratio)))
    else:  # a server may not honour max_tokens: the summary is never longer than was asked for
        text = _clip(text, int(answer_tokens * min(ratio, chars_per_token([answer]))))
    # A turn is a prompt and all it led to (several answers when it called tools); earlier summaries count theirs.
    prompts = sum(1 for m in older if getattr(m, "role", "") == "user" and not is_summary(m))
    turns = prompts + sum(compacted_turns_of(m) for m in older)
    summary = UserMessage([TextContent(summary_text(turns, text))], compacted_turns=turns)
    result = CompactionEvent(
        [summary, *kept], summary, turns, cut, before, reason, answer.usage, model.id, model.provider, error
    )
    if still_current is not None and not still_current():
        return None
    context.messages = list(result.messages)
    await emit(result)
    return result
