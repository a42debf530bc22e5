"""The ``local`` provider: the offline model streamed as the same events as OpenAI's.

Decoding runs on the engine's decoding thread (it is CPU-bound and must not
block the kernel's event loop); its results cross to the loop through
``call_soon_threadsafe``. An abort ends the stream at once from the loop's
side (the worker notices between two tokens and stops on its own), so
``stop_reason`` ``"aborted"`` does not wait for a prompt evaluation to finish.
See ``local_engine`` for how grammar-constrained tool calling works, and
``local_prompt`` for the prompts and the tool-choice rules.

Two prompts, both from the GGUF's chat template: the tool decision and the
arguments come from the system prompt and the current user turn only; a text
answer comes from the whole transcript (oldest turns dropped when it does not
fit the context). ``usage.input`` counts the prompt the output continues;
``usage.output`` counts every token of the output: sampled ones, the tool-choice head and the seed of an
answer (short tool results, ``local_answer``) included.

A text answer after short tool results starts with them, and one the cap ends is cut back to its last
sentence (``local_answer``; only its last ``HOLD_TOKENS`` are held back for that, so the first
token is not held for a whole sentence). ``max_tokens`` caps a text answer only: the tool-choice head and a call's
arguments have their own bounds (``head_token_cap``, ``TOOL_CALL_MAX_TOKENS``),
so a small answer cap never cuts a call.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pi_kernel.ai.json_stream import IncrementalJSONParser
from pi_kernel.ai.messages import AssistantMessage, TextContent, ToolCall, Usage
from pi_kernel.ai.models import Model
from pi_kernel.ai.providers.local_answer import answer_seed, shaped_answer
from pi_kernel.ai.providers.local_engine import DecodeStats, Sampling, get_engine
from pi_kernel.ai.providers.local_grammar import max_arguments_bytes
from pi_kernel.ai.providers.local_prompt import (  # re-exported: the provider's prompt is part of its API
    MESSAGE_HEAD,
    ContextOverflowError,
    ToolChoiceError,
    chat_messages,
    class_and_message,
    fit_to_context,
    tool_heads,
)
from pi_kernel.ai.stream_types import AssistantMessageEvent, AssistantMessageStream, Context, StreamOptions

__all__ = ["chat_messages", "fit_to_context", "stream_local", "tool_heads"]

DEFAULT_MAX_TOKENS = 384
TOOL_CALL_MAX_TOKENS = 1024
"""The bound of a tool call's arguments, whatever ``max_tokens`` (the answer's cap) says.

The grammar bounds every string and list (``local_grammar``); when the
longest arguments it allows are longer (``max_arguments_bytes``), the bound
grows to hold them (``tool_call_token_cap``). It only stops what the grammar
leaves open (free-form values nested without end). A lower ``max_tokens``
would cut a call in the middle of its JSON, and a cut call cannot run."""
_ABORTED_TEXT = "Request was aborted"
PUSH_INTERVAL_S = 0.02


# ---------------------------------------------------------------------------- the stream


def stream_local(model: Model, context: Context, options: StreamOptions) -> AssistantMessageStream:
    """Stream one assistant message from the local model; never raises."""
    message = AssistantMessage(model=model.id, provider=model.provider, stop_reason="stop")

    def fallback(text: str) -> AssistantMessage:
        message.stop_reason = "error"
        message.error_message = text
        return message

    return AssistantMessageStream(_events(model, context, options, message), fallback)


@dataclass(frozen=True, slots=True)
class _Head:
    """The decision of step 1: ``name`` is ``None`` for a text answer."""

    name: str | None


@dataclass(frozen=True, slots=True)
class _End:
    tokens: int
    """Sampled tokens, head included."""
    hit_limit: bool
    stopped: bool


def head_token_cap(heads: list[str]) -> int:
    """A token cap the longest head always fits: no token is shorter than one byte."""
    return max(len(head.encode("utf-8")) for head in heads) + 1


def tool_call_token_cap(engine: Any, prompt_tokens: int, requested: int, schema: Any = None) -> int:
    """The bound of a call's arguments, within the context: ``TOOL_CALL_MAX_TOKENS`` (or more if asked), or more
    when the grammar of ``schema`` allows longer arguments (``max_arguments_bytes``: a token is at least a byte),
    so the bound never cuts arguments the grammar lets the model write."""
    room = engine.n_ctx - prompt_tokens
    if room < 1:
        raise ContextOverflowError(
            f"the prompt has {prompt_tokens} tokens; the local model's context holds {engine.n_ctx} "
            "(shorten the request or the tool results, or set PI_LOCAL_CONTEXT)"
        )
    longest = max_arguments_bytes(schema) if schema is not None else None
    return min(room, max(requested, TOOL_CALL_MAX_TOKENS, (longest or 0) + 1))


def _abort_text(reason: Any) -> str:
    return reason if isinstance(reason, str) and reason else _ABORTED_TEXT


async def _events(
    model: Model, context: Context, options: StreamOptions, message: AssistantMessage
) -> AsyncIterator[AssistantMessageEvent]:
    signal = options.signal
    if signal is not None and signal.aborted:
        message.stop_reason, message.error_message = "aborted", _abort_text(signal.reason)
        yield AssistantMessageEvent("error", message)
        return

    try:
        heads = tool_heads(context, options)
        engine = get_engine()
    except (ToolChoiceError, RuntimeError) as error:
        message.stop_reason = "error"
        message.error_message = str(error) if isinstance(error, RuntimeError) else class_and_message(error)
        yield AssistantMessageEvent("error", message)
        return

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    halt = threading.Event()
    """Set when the stream is over from the loop's side (aborted, closed): the worker stops."""

    def push(kind: str, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
        except RuntimeError:
            halt.set()  # the loop is closed: nobody listens any more

    usage = Usage()
    block: TextContent | ToolCall | None = None
    parser = IncrementalJSONParser()
    remove_listener = signal.add_listener(lambda _reason: push("abort", None)) if signal is not None else None
    try:  # from the first yield on: a consumer may close the stream at any of them
        yield AssistantMessageEvent("start", message)
        engine.run_in_decoder_thread(lambda: _decode(engine, context, options, heads, push, halt))
        while True:
            kind, value = await queue.get()
            if kind == "abort" or (signal is not None and signal.aborted):
                if isinstance(block, ToolCall):
                    block.arguments = parser.snapshot()
                message.usage = usage
                message.stop_reason, message.error_message = "aborted", _abort_text(signal.reason if signal else None)
                yield AssistantMessageEvent("error", message)
                return
            if kind == "prompt_tokens":
                usage.input = value
            elif kind == "head":
                if value.name is None:
                    block = TextContent("")
                    message.content.append(block)
                    yield AssistantMessageEvent("text_start", message, content_index=0)
                else:
                    block = ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", name=value.name)
                    message.content.append(block)
                    yield AssistantMessageEvent("toolcall_start", message, content_index=0)
            elif kind == "piece":
                if isinstance(block, TextContent):
                    piece = value.lstrip() if not block.text else value
                    if piece:
                        block.text += piece
                        yield AssistantMessageEvent("text_delta", message, content_index=0, delta=piece)
                elif isinstance(block, ToolCall):
                    parser.feed(value)
                    block.arguments = parser.snapshot()
                    yield AssistantMessageEvent("toolcall_delta", message, content_index=0, delta=value)
            elif kind == "end":
                end: _End = value
                usage.output = end.tokens
                usage.total_tokens = usage.input + usage.output  # no prompt cache is reported
                message.usage = usage
                if isinstance(block, TextContent):
                    yield AssistantMessageEvent("text_end", message, content_index=0, content=block.text)
                elif isinstance(block, ToolCall):
                    try:
                        block.arguments = parser.finish()
                    except ValueError:
                        block.raw_arguments = parser.text
                    yield AssistantMessageEvent("toolcall_end", message, content_index=0, tool_call=block)
                if end.hit_limit:
                    message.stop_reason = "length"
                else:
                    message.stop_reason = "tool_use" if isinstance(block, ToolCall) else "stop"
                yield AssistantMessageEvent("done", message)
                return
            elif kind == "error":
                message.usage = usage
                message.stop_reason, message.error_message = "error", value
                yield AssistantMessageEvent("error", message)
                return
    finally:
        halt.set()
        if remove_listener is not None:
            remove_listener()


def _forward(pieces: Any, push: Any) -> None:
    """Hand decoded text to the event loop: the first piece at once, then at most every ``PUSH_INTERVAL_S``.

    Each hand-over wakes the loop's thread; on a two-core machine, waking it
    for every token steals time from llama.cpp's threads (measured: decoding
    about 25% slower). A reader sees no difference at 50 hand-overs a second.
    """
    held: list[str] = []
    last = 0.0
    for piece in pieces:
        held.append(piece)
        now = time.monotonic()
        if now - last >= PUSH_INTERVAL_S:
            push("piece", "".join(held))
            held.clear()
            last = now
    if held:
        push("piece", "".join(held))


def _decode(
    engine: Any,
    context: Context,
    options: StreamOptions,
    heads: list[str],
    push: Any,
    halt: threading.Event,
) -> None:
    """The worker: choose the head, then decode the answer or the arguments."""
    try:
        with engine.lock:
            if halt.is_set():
                return
            offer_tools = heads != [MESSAGE_HEAD]
            requested = options.max_tokens or DEFAULT_MAX_TOKENS
            sampling = Sampling(temperature=0.2 if options.temperature is None else options.temperature)
            head_stats = DecodeStats()
            head = heads[0]
            decision: list[int] = []
            if offer_tools:
                # Tool choice and arguments are decided on the current turn alone (see ``chat_messages``).
                focused = chat_messages(context, offer_tools=True, focus=True, heads=heads)
                decision, _, _ = fit_to_context(engine, focused, max(requested, TOOL_CALL_MAX_TOKENS))
            if len(heads) > 1:
                head = "".join(
                    engine.decode(
                        decision,
                        head_stats,
                        max_tokens=head_token_cap(heads),
                        sampling=sampling,
                        grammar=engine.choice_grammar(heads),
                        should_stop=halt.is_set,
                    )
                )
                if halt.is_set():
                    return
            elif head != MESSAGE_HEAD:
                head_stats.tokens = engine.tokenize_continuation(head)
            name = None if head == MESSAGE_HEAD else head[len("functions.") : -1]
            stats = DecodeStats()
            seeded: list[int] = []
            if name is None:
                # The head is a choice, not part of the answer: the model answers
                # better from the bare assistant prompt than after "message:".
                # Fitted before the head is announced, so that a prompt too long
                # fails before any content (``serve-local`` can still answer 400).
                prompt, stop, limit = fit_to_context(engine, chat_messages(context, offer_tools), requested)
                seed = answer_seed(context.messages)  # short tool results open the answer (``local_answer``)
                seeded = engine.tokenize_continuation(seed) if seed else []  # output, as a forced head is
                push("head", _Head(name))
                push("prompt_tokens", len(prompt))
                prompt = prompt + seeded
                cap = max(1, min(limit, engine.n_ctx - len(prompt)))
                pieces = shaped_answer(
                    seed,
                    engine.decode(
                        prompt,
                        stats,
                        max_tokens=cap,
                        sampling=sampling,
                        stop=stop,
                        require_text=not seed,
                        should_stop=halt.is_set,
                    ),
                    stats,
                    cap,
                )
            else:
                push("head", _Head(name))
                push("prompt_tokens", len(decision))
                tool = next(tool for tool in context.tools or [] if tool.name == name)
                prompt = decision + head_stats.tokens
                pieces = engine.decode(
                    prompt,
                    stats,
                    max_tokens=tool_call_token_cap(engine, len(prompt), requested, tool.shared_json_schema()),
                    sampling=sampling,
                    grammar=engine.schema_grammar(tool.shared_json_schema()),
                    should_stop=halt.is_set,
                )
            _forward(pieces, push)
            written = len(head_stats.tokens) + len(seeded) + len(stats.tokens)
            push("end", _End(written, stats.hit_limit, stats.stopped))
    except Exception as error:  # noqa: BLE001 - reported as the stream's error event
        push("error", class_and_message(error))
