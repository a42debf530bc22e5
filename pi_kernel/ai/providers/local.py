"""The ``local`` provider: the offline model, its output read as OpenAI chunks by ``openai_format.ChunkAssembler``.

Decoding runs on the engine's decoding thread (it is CPU-bound and must not
block the kernel's event loop); its results cross to the loop through
``models.put_threadsafe``. An abort ends the stream at once from the loop's
side (the worker notices between two tokens and stops on its own), so
``stop_reason`` ``"aborted"`` does not wait for a prompt evaluation to finish.
See ``local_engine`` for how grammar-constrained tool calling works.

Two prompts, both from the GGUF's chat template: the tool decision and the
arguments come from the system prompt and the current user turn only; a text
answer comes from the whole transcript (``fit_to_context``: a transcript too long is a context
overflow, which the agent compacts). ``usage.input`` counts the prompt the output continues;
``usage.output`` counts every token of the output: sampled ones, the tool-choice head and the seed of an
answer (short tool results) included.

``max_tokens`` caps a text answer only: the tool-choice head and a call's
arguments have their own bounds (``head_token_cap``, ``TOOL_CALL_MAX_TOKENS``),
so a small answer cap never cuts a call.

**The prompt** (``tool_heads``, ``chat_messages``, ``fit_to_context``) is pure logic on messages: no model is
needed to build it or to decide which heads the grammar allows, so these rules are testable without
llama.cpp. Which errors are the request's own fault lives here too: ``serve-local`` maps them to HTTP 400.

**The answer** is seeded with short tool results and ended at a sentence, not mid-line.
SmolLM2-135M reads a tool result and then often ignores it ("The word 'the' is a
punctuation mark" after ``word_count`` returned 9). So when the answer follows
tool results that are short, one line each (``SEED_MAX_CHARS``), the answer
starts with them, written by the provider, not sampled: ``word_count returned 9.``;
the model continues from there (``answer_seed``). A long result (a table, a
traceback) is not seeded: the model answers from the prompt alone.

When the cap (``max_tokens``) ends the answer, ``SentenceCut`` drops the text after its last clean end (a
sentence's ``.``/``!``/``?``, a line end, the closing fence of a code block) rather than stop mid-word; an
answer without any clean end is kept whole. Only the last ``HOLD_TOKENS`` before the cap are held back for
it (holding from the start would delay the first sentence); a sentence already sent past is kept whole.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pi_kernel.ai.messages import (
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
    text_of,
)
from pi_kernel.ai.models import (
    AssistantMessageEvent,
    AssistantMessageStream,
    Context,
    Model,
    StreamOptions,
    error_message,
    put_threadsafe,
)
from pi_kernel.ai.providers.local_engine import DecodeStats, Sampling, get_engine, max_arguments_bytes
from pi_kernel.ai.providers.openai_format import ChunkAssembler, new_tool_call_id
from pi_kernel.ai.providers.remote import abort_text
from pi_kernel.ai.tool import Tool

MESSAGE_HEAD = "message:"
MAX_TOOL_RESULT_CHARS = 4000
"""A tool result longer than this is cut in the prompt: the model's context is small."""


class ToolChoiceError(ValueError):
    """``tool_choice`` asks for something the tools cannot give (as OpenAI's 400)."""


class ContextOverflowError(ValueError):
    """The prompt does not fit the model's context (as OpenAI's 400)."""

    @classmethod
    def of(cls, prompt_tokens: int, n_ctx: int) -> ContextOverflowError:
        return cls(
            f"the prompt has {prompt_tokens} tokens; the local model's context holds {n_ctx} "
            "(shorten the request or the tool results, or set PI_LOCAL_CONTEXT)"
        )


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
    request: str | None = None
    """A user turn's request alone (its first text part), without the notebook context after it."""

    def content(self) -> str:
        if not self.results:
            return self.text
        which = "that result" if len(self.results) == 1 else "these results"
        # The answer is about the results: the notebook context served the call and is left out here, as
        # this model repeats the background it is given last (measured: "Cells run: In [1] ..." as an answer).
        question = self.text if self.request is None else self.request
        ask = f"answer: {question}" if question else "answer the question."
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
            request, text = _request_and_text(message)
            turns.append(_Turn("user", text, request=request))
        elif isinstance(message, AssistantMessage):
            if message.text:
                turns.append(_Turn("assistant", message.text))
        else:
            verb = "failed with" if message.is_error else "returned"
            if turns[-1].role != "user":
                turns.append(_Turn("user", ""))
            turns[-1].results.append(f"Tool {message.tool_name} {verb}: {_clip(text_of(message.content))}")
    return [{"role": turn.role, "content": turn.content()} for turn in turns]


def _request_and_text(message: UserMessage) -> tuple[str, str]:
    """A user message's request (its text, or its first text part) and its text with the request last: later
    parts (the kernel's notebook context) are background, and this model answers what comes last (as with tool
    results)."""
    if isinstance(message.content, str):
        return message.content, message.content
    parts = [block.text for block in message.content if isinstance(block, TextContent)]
    request = parts[0].strip() if parts else ""
    return request, f"{''.join(parts[1:]).strip()}\n\n{request}" if len(parts) > 1 else "".join(parts)


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
        raise ContextOverflowError.of(len(tokens), engine.n_ctx)
    return tokens, stop, min(max_tokens, room)


# ---------------------------------------------------------------------------- the answer


SEED_MAX_CHARS = 200
"""A tool result longer than this (or of more than one line) is not copied into the answer."""
HOLD_TOKENS = 64
"""Text is held back for a clean end only within this many tokens of the cap (``shaped_answer``)."""
_SENTENCE_END = re.compile(r"[.!?](?=\s)")


def answer_seed(messages: Sequence[Any]) -> str:
    """The start of an answer that follows tool results: each short result, as its tool returned it
    (``""`` when the answer does not follow tool results, or one of them is long)."""
    results = list(itertools.takewhile(lambda m: isinstance(m, ToolResultMessage), reversed(messages)))
    sentences: list[str] = []
    for result in reversed(results):
        text = " ".join(text_of(result.content).split()) if "\n" not in text_of(result.content).strip() else ""
        if not text or len(text) > SEED_MAX_CHARS:
            return ""
        verb = "failed:" if result.is_error else "returned"
        sentences.append(f"{result.tool_name} {verb} {text}{'' if text[-1] in '.!?' else '.'}")
    return " ".join(sentences)


def last_clean_end(text: str, at_end: bool) -> int:
    """The index after the last clean end of ``text`` (0: none); ``at_end``: the text ends there (a final
    ``.`` or an unterminated closing fence counts)."""
    last = 0
    in_code = False
    position = 0
    for line in text.splitlines(keepends=True):
        complete = line.endswith("\n") or at_end
        body = line.rstrip("\n")
        if body.strip().startswith("```"):
            in_code = not in_code
            if not in_code and complete:
                last = position + len(body)
        elif not in_code:
            for match in _SENTENCE_END.finditer(body):
                last = position + match.end()
            if line.endswith("\n") and body.strip():
                last = position + len(body)
            elif at_end and body.rstrip()[-1:] in (".", "!", "?"):
                last = position + len(body.rstrip())
        position += len(line)
    return last


class SentenceCut:
    """Streams an answer's text up to its last clean end; ``finish`` gives the rest, or drops it at the cap."""

    def __init__(self) -> None:
        self.text = ""
        self.sent = 0

    def feed(self, piece: str, hold: bool = True) -> str:
        """The text that can be sent now: up to the last clean end, or all of it when not ``hold`` (the text
        is scanned whole, only while held: the last ``HOLD_TOKENS`` before the cap)."""
        self.text += piece
        end = last_clean_end(self.text, at_end=False) if hold else len(self.text)
        if end <= self.sent:
            return ""
        out, self.sent = self.text[self.sent : end], end
        return out

    def finish(self, hit_limit: bool) -> str:
        """What is left to send: all of it, or, when the cap ended the answer, up to its last clean end
        (all of it when there is none, or the text already sent runs past it)."""
        end = len(self.text)
        if hit_limit:
            clean = last_clean_end(self.text, at_end=True)
            end = clean if clean > 0 and clean >= self.sent else end
        out = self.text[self.sent : end] if end > self.sent else ""
        self.sent = max(self.sent, end)
        return out


def shaped_answer(seed: str, pieces: Iterator[str], stats: Any, max_tokens: int | None = None) -> Iterator[str]:
    """The seed, then the model's pieces, sent up to their last clean end; at the end what ``finish`` gives
    (``stats.hit_limit`` is read once ``pieces`` is done). With ``max_tokens`` (the decode's cap; ``stats.tokens``
    counts the tokens sampled so far) pieces stream as they come while the cap is more than ``HOLD_TOKENS``
    away."""
    cut = SentenceCut()
    for piece in itertools.chain([seed] if seed else [], pieces):
        hold = max_tokens is None or max_tokens - len(stats.tokens) <= HOLD_TOKENS
        out = cut.feed(piece, hold)
        if out:
            yield out
    rest = cut.finish(bool(stats.hit_limit))
    if rest:
        yield rest


# ---------------------------------------------------------------------------- the stream


DEFAULT_MAX_TOKENS = 384
TOOL_CALL_MAX_TOKENS = 1024
"""The least bound of a tool call's arguments, whatever ``max_tokens`` (the answer's cap) says: a cut call
cannot run. It only stops what the grammar leaves open (free-form values nested without end)."""
PUSH_INTERVAL_S = 0.02


def stream_local(model: Model, context: Context, options: StreamOptions) -> AssistantMessageStream:
    """Stream one assistant message from the local model; never raises."""
    return AssistantMessageStream(_events(model, context, options), lambda text: error_message(model, text))


def head_token_cap(heads: list[str]) -> int:
    """A token cap the longest head always fits: no token is shorter than one byte."""
    return max(len(head.encode("utf-8")) for head in heads) + 1


def tool_call_token_cap(engine: Any, prompt_tokens: int, requested: int, schema: Any = None) -> int:
    """The bound of a call's arguments, within the context: ``TOOL_CALL_MAX_TOKENS`` (or more if asked), or more
    when the grammar of ``schema`` allows longer arguments (``max_arguments_bytes``: a token is at least a byte),
    so the bound never cuts arguments the grammar lets the model write."""
    room = engine.n_ctx - prompt_tokens
    if room < 1:
        raise ContextOverflowError.of(prompt_tokens, engine.n_ctx)
    longest = max_arguments_bytes(schema) if schema is not None else None
    return min(room, max(requested, TOOL_CALL_MAX_TOKENS, (longest or 0) + 1))


async def _events(model: Model, context: Context, options: StreamOptions) -> AsyncIterator[AssistantMessageEvent]:
    """The worker's chunks (the OpenAI format's) read by the OpenAI format's ``ChunkAssembler``."""
    assembler = ChunkAssembler(model)
    signal = options.signal
    if signal is not None and signal.aborted:
        yield assembler.fail("aborted", abort_text(signal.reason))
        return
    try:
        heads = tool_heads(context, options)
        engine = get_engine()
    except (ToolChoiceError, RuntimeError) as error:
        yield assembler.fail("error", str(error) if isinstance(error, RuntimeError) else class_and_message(error))
        return

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    halt = threading.Event()
    """Set when the stream is over from the loop's side (aborted, closed): the worker stops."""

    def push(kind: str, value: Any) -> None:
        if not put_threadsafe(loop, queue, (kind, value)):
            halt.set()  # the loop is closed: nobody listens any more

    remove_listener = signal.add_listener(lambda _reason: push("abort", None)) if signal is not None else None
    try:  # from the first yield on: a consumer may close the stream at any of them
        yield assembler.start()
        engine.run_in_decoder_thread(lambda: _decode(engine, context, options, heads, push, halt))
        while True:
            kind, value = await queue.get()
            if kind == "abort" or (signal is not None and signal.aborted):
                yield assembler.fail("aborted", abort_text(signal.reason if signal else None))
                return
            if kind == "error":
                yield assembler.fail("error", value)
                return
            for event in assembler.feed(value):
                yield event
            if kind == "end":
                for event in assembler.finish():
                    yield event
                return
    finally:
        halt.set()
        if remove_listener is not None:
            remove_listener()


def _chunk(delta: dict[str, Any], finish_reason: str | None = None, usage: Any = None) -> dict[str, Any]:
    return {"choices": [{"delta": delta, "finish_reason": finish_reason}], "usage": usage}


def _usage(prompt_tokens: int, written: int) -> dict[str, int]:
    """``prompt_tokens``: the prompt the output continues; ``written``: every token of the output."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": written}


def _forward(pieces: Iterator[str], push: Any, call: bool) -> None:
    """Hand decoded text to the event loop as chunks: the first piece at once, then at most every
    ``PUSH_INTERVAL_S``. A text answer starts at its first character that is not white space.

    Each hand-over wakes the loop's thread; on a two-core machine, waking it
    for every token steals time from llama.cpp's threads (measured: decoding
    about 25% slower). A reader sees no difference at 50 hand-overs a second.
    """
    held = ""
    last = 0.0
    started = call
    for piece in itertools.chain(pieces, [None]):
        if piece is not None:
            held += piece if started else piece.lstrip()
            started = started or bool(held)
        now = time.monotonic()
        if held and (piece is None or now - last >= PUSH_INTERVAL_S):
            delta = {"tool_calls": [{"index": 0, "function": {"arguments": held}}]} if call else {"content": held}
            push("chunk", _chunk(delta))
            held, last = "", now


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
            seed = answer_seed(context.messages)  # short tool results open the answer
            seeded = engine.tokenize_continuation(seed) if seed else []  # output, as a forced head is
            prompt_tokens = len(prompt)
            push("chunk", {"usage": _usage(prompt_tokens, 0)})
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
            prompt_tokens = len(decision)
            call = {"index": 0, "id": new_tool_call_id(), "type": "function", "function": {"name": name}}
            push("chunk", _chunk({"tool_calls": [call]}, usage=_usage(prompt_tokens, 0)))
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
        _forward(pieces, push, call=name is not None)
        written = len(head_stats.tokens) + len(seeded) + len(stats.tokens)
        reason = "length" if stats.hit_limit else "stop" if name is None else "tool_calls"
        push("end", _chunk({}, reason, _usage(prompt_tokens, written)))
    except Exception as error:  # noqa: BLE001 - reported as the stream's error event
        push("error", class_and_message(error))
