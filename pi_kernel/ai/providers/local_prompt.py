"""The local provider's prompt: the tool-choice heads, the transcript for the chat template, the fit.

Kept apart from the stream (``local``) because it is pure logic on messages:
no model is needed to build a prompt or to decide which heads the grammar
allows, so these rules are testable without llama.cpp. Which errors are the
request's own fault lives here too: ``serve-local`` maps them to HTTP 400.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pi_kernel.ai.messages import AssistantMessage, TextContent, ToolResultMessage, UserMessage, text_of
from pi_kernel.ai.stream_types import Context, StreamOptions
from pi_kernel.ai.tool import Tool

MESSAGE_HEAD = "message:"
MAX_TOOL_RESULT_CHARS = 4000
"""A tool result longer than this is cut in the prompt: the model's context is small."""


class ToolChoiceError(ValueError):
    """``tool_choice`` asks for something the tools cannot give (as OpenAI's 400)."""


class ContextOverflowError(ValueError):
    """The prompt does not fit the model's context even with old turns dropped (as OpenAI's 400)."""


REQUEST_ERRORS: tuple[type[ValueError], ...] = (ToolChoiceError, ContextOverflowError)
"""Failures that are the request's fault: ``serve-local`` answers them with 400, not 500,
because a client retries a 5xx and the same request fails the same way again."""


def class_and_message(error: Exception) -> str:
    """A stream's ``error_message`` for ``error``: it starts with the class name (see ``is_request_error``)."""
    return f"{type(error).__name__}: {error}"


def is_request_error(message: AssistantMessage) -> bool:
    """Whether a failed message failed because of its request (``REQUEST_ERRORS``).

    A stream reports failures only as text, so the class name at the start of
    ``error_message`` (``class_and_message``) is what tells them apart.
    """
    text = message.error_message or ""
    return any(text.startswith(f"{kind.__name__}: ") for kind in REQUEST_ERRORS)


# ---------------------------------------------------------------------------- the prompt


def tool_heads(context: Context, options: StreamOptions) -> list[str]:
    """The heads the grammar may choose from, per ``tool_choice``.

    Right after a tool result the model is steered to answer, whatever
    ``tool_choice`` says: this tiny model otherwise repeats the call it just
    made, and ``required`` (or a named tool) would loop until the turn limit.
    So for this provider a forced choice means "call a tool in reply to this
    user message", which is what a notebook cell that forces a tool wants.
    An impossible choice is still an error, as OpenAI's 400.
    """
    names = [tool.name for tool in context.tools or []]
    choice = options.tool_choice or "auto"
    if choice == "required" and not names:
        raise ToolChoiceError('tool_choice "required" needs at least one tool')
    if choice not in ("auto", "none", "required") and choice not in names:
        raise ToolChoiceError(
            f'tool_choice names "{choice}", which is not among the tools ({", ".join(names) or "none"})'
        )
    answered = bool(context.messages) and isinstance(context.messages[-1], ToolResultMessage)
    if choice == "none" or not names or answered:
        return [MESSAGE_HEAD]
    if choice == "required":
        return [f"functions.{name}:" for name in names]
    if choice != "auto":
        return [f"functions.{choice}:"]
    return [MESSAGE_HEAD, *(f"functions.{name}:" for name in names)]


def tools_section(tools: list[Tool]) -> str:
    """The tool list for the system prompt: a line per tool, a line per argument.

    Measured on SmolLM2-135M: with the JSON schema inline it copies argument
    descriptions into the values ("text": "The text whose words to count.");
    with one plain line per argument it fills them from the question.
    """
    lines = ["Tools you can call:"]
    for tool in tools:
        summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        lines.append(f"- {tool.name}: {summary}")
        for name, prop in tool.shared_json_schema().get("properties", {}).items():
            kind = prop.get("type", "any") if isinstance(prop, dict) else "any"
            described = f": {prop['description']}" if isinstance(prop, dict) and prop.get("description") else ""
            lines.append(f"    {name} ({kind}){described}")
    lines.append("To call a tool, write functions.<name>: and its arguments as JSON.")
    return "\n".join(lines)


def _clip(text: str) -> str:
    if len(text) <= MAX_TOOL_RESULT_CHARS:
        return text
    return text[:MAX_TOOL_RESULT_CHARS] + f"\n[... {len(text) - MAX_TOOL_RESULT_CHARS} more characters cut]"


@dataclass(slots=True)
class _Turn:
    """One message of the rendered prompt; a user turn also gathers the tool results that followed it."""

    role: str
    text: str
    results: list[str] = field(default_factory=list)

    def content(self) -> str:
        if not self.results:
            return self.text
        which = "that result" if len(self.results) == 1 else "these results"
        ask = f"answer: {self.text}" if self.text else "answer the question."
        return "\n".join(self.results) + f"\n\nUsing {which}, {ask}"


def chat_messages(
    context: Context, offer_tools: bool = True, focus: bool = False, heads: list[str] | None = None
) -> list[dict[str, str]]:
    """The transcript as messages for the GGUF's chat template.

    ``heads`` (the grammar's choices, ``tool_heads``) limits the tool list to
    the tools the model may call: a forced ``tool_choice`` shows it that one
    tool only. The other tools cannot be called in this request, and listing
    them changes what this model writes as arguments (measured: a front-end
    that adds the notebook tools turned "21 degrees" into ``273.15``).

    Tool results are folded into the user's turn, before the question
    (``Tool X returned: ...`` then ``Using that result, answer: <question>``).
    Measured on SmolLM2-135M: with the result as a turn of its own it repeats
    the call; with the result after the question it often repeats its previous
    answer; results first, question last, it answers from them.
    """
    system = (None if focus else context.system_prompt) or "You are a helpful assistant."
    tools = [tool for tool in context.tools or [] if heads is None or f"functions.{tool.name}:" in heads]
    if tools and offer_tools:
        system = f"{system}\n\n{tools_section(tools)}"
    turns = [_Turn("system", system)]
    messages = context.messages
    if focus:
        last_user = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=0)
        messages = messages[last_user:]
    for message in messages:
        if isinstance(message, UserMessage):
            turns.append(_Turn("user", _request_last(message)))
        elif isinstance(message, AssistantMessage):
            if message.text:
                turns.append(_Turn("assistant", message.text))
        else:
            verb = "failed with" if message.is_error else "returned"
            if turns[-1].role != "user":
                turns.append(_Turn("user", ""))
            turns[-1].results.append(f"Tool {message.tool_name} {verb}: {_clip(text_of(message.content))}")
    return [{"role": turn.role, "content": turn.content()} for turn in turns]


def _request_last(message: UserMessage) -> str:
    """A user message's text with its first text part (the request) last: later parts (the kernel's notebook
    context) are background, and this model answers what comes last (as with tool results)."""
    if isinstance(message.content, str):
        return message.content
    parts = [block.text for block in message.content if isinstance(block, TextContent)]
    if len(parts) < 2:
        return "".join(parts)
    return f"{''.join(parts[1:]).strip()}\n\n{parts[0].strip()}"


MIN_ANSWER_TOKENS = 64
"""Room an answer needs at least; a prompt leaving less is a context overflow."""


def fit_to_context(engine: Any, messages: list[dict[str, str]], max_tokens: int) -> tuple[list[int], list[str], int]:
    """``(prompt tokens, stop strings, max tokens)`` that fit the model's context.

    No turn is dropped silently: the answer gets what room is left, up to
    ``max_tokens``; a prompt that leaves less than ``MIN_ANSWER_TOKENS`` (or
    ``max_tokens``, if smaller) raises ``ContextOverflowError``, and the agent
    compacts the conversation and retries, as with every other provider.
    """
    text, stop = engine.render(messages)
    tokens = engine.tokenize(text)
    room = engine.n_ctx - len(tokens)
    if room < min(max_tokens, MIN_ANSWER_TOKENS):
        raise ContextOverflowError(
            f"the prompt has {len(tokens)} tokens; the local model's context holds {engine.n_ctx} "
            "(shorten the request or the tool results, or set PI_LOCAL_CONTEXT)"
        )
    return tokens, stop, min(max_tokens, room)
