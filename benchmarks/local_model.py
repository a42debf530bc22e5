"""Benchmark: the local provider against raw ``llama_cpp.Llama`` generation.

Both sides use the same loaded model on the same thread (same GGUF file, context size, threads),
the same rendered chat prompt, the same sampling settings and seed, and the
same token limit; runs alternate, the KV cache is cleared before each one so
every run evaluates the whole prompt. Measured: time to first token (request
to first text piece) and decode speed (tokens after the first ÷ the time they
took). The provider's overhead is its event stream (a worker thread, the
asyncio queue, event objects); the target is at least 0.9x raw on both.

Run from the repository root: ``python benchmarks/local_model.py``.
Reports PASS/FAIL against the targets; exits 1 when one fails (0 when it skips
without the model).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pi_kernel.ai import Context, Model, StreamOptions, UserMessage, stream
from pi_kernel.ai.providers.local import chat_messages
from pi_kernel.ai.providers.local_engine import (
    INSTALL_HINT,
    LOCAL_MODEL_ID,
    Sampling,
    get_engine,
    local_model_available,
)

PROMPT = "Write a long story about a dragon who learns to bake bread."
MAX_TOKENS = 128
RUNS = 7
TARGET = 0.9


@dataclass
class Run:
    first_token_s: float
    tokens: int
    decode_s: float

    @property
    def tokens_per_s(self) -> float:
        return (self.tokens - 1) / self.decode_s if self.decode_s > 0 else float("nan")


def on_decoder_thread(fn: Callable[[], Run]) -> Run:
    """Run ``fn`` on the engine's decoding thread, where the provider decodes too.

    llama.cpp's OpenMP pools are per calling thread and slow each other down
    (see ``LocalEngine.run_in_decoder_thread``): both sides must compute on
    the same thread for a fair comparison.
    """
    return get_engine().run_in_decoder_thread(fn).result()


def raw_run(prompt: str) -> Run:
    """``Llama.create_completion`` streamed, as a llama-cpp-python user would write it."""
    return on_decoder_thread(lambda: _raw_run(prompt))


def _raw_run(prompt: str) -> Run:
    engine = get_engine()
    llama = engine.load()
    llama.reset()
    sampling = Sampling()
    start = time.perf_counter()
    first = last = 0.0
    tokens = 0
    for chunk in llama.create_completion(
        prompt,
        max_tokens=MAX_TOKENS,
        temperature=sampling.temperature,
        top_k=sampling.top_k,
        top_p=sampling.top_p,
        min_p=sampling.min_p,
        repeat_penalty=sampling.repeat_penalty,
        seed=engine.seed,
        stop=["<|im_end|>"],
        stream=True,
    ):
        if chunk["choices"][0]["text"]:
            last = time.perf_counter()
            first = first or last
            tokens += 1
    return Run(first - start, tokens, last - first)


async def provider_run(context: Context) -> Run:
    on_decoder_thread(lambda: get_engine().load().reset() or Run(0, 0, 0))
    model = Model(id=LOCAL_MODEL_ID, provider="local")
    start = time.perf_counter()
    first = last = 0.0
    s = stream(model, context, StreamOptions(max_tokens=MAX_TOKENS))
    async for event in s:
        if event.type == "text_delta":
            last = time.perf_counter()
            first = first or last
    message = await s.result()
    if message.stop_reason not in ("stop", "length"):
        raise RuntimeError(f"the provider failed: {message.error_message}")
    return Run(first - start, message.usage.output, last - first)


def verdict(ratio: float) -> str:
    return "PASS" if ratio >= TARGET else "FAIL"


def main() -> int:
    if not local_model_available():
        print(f"SKIP: {INSTALL_HINT}")
        return 0
    engine = get_engine()
    context = Context(messages=[UserMessage(PROMPT)])
    prompt, _ = engine.render(chat_messages(context))
    print(f"model {Path(engine.model_path).name}, prompt {len(engine.tokenize(prompt))} tokens, max {MAX_TOKENS}")
    raw_run(prompt)  # warm up: page the model in, build the sampler once
    asyncio.run(provider_run(context))
    raws, ours = [], []
    for _ in range(RUNS):
        raws.append(raw_run(prompt))
        ours.append(asyncio.run(provider_run(context)))

    def median(runs: list[Run], key: str) -> float:
        return statistics.median(getattr(run, key) for run in runs)

    raw_ttft, our_ttft = median(raws, "first_token_s"), median(ours, "first_token_s")
    raw_rate, our_rate = median(raws, "tokens_per_s"), median(ours, "tokens_per_s")
    ttft_ratio = raw_ttft / our_ttft  # above 1: ours is faster
    rate_ratio = our_rate / raw_rate
    print(f"{'':26}{'raw llama_cpp':>14}{'pi local':>12}{'ratio':>9}")
    print(
        f"{'time to first token (ms)':26}{raw_ttft * 1000:14.1f}{our_ttft * 1000:12.1f}{ttft_ratio:8.2f}x  "
        f"{verdict(ttft_ratio)} (target >= {TARGET}x)"
    )
    print(
        f"{'decode (tokens/s)':26}{raw_rate:14.1f}{our_rate:12.1f}{rate_ratio:8.2f}x  "
        f"{verdict(rate_ratio)} (target >= {TARGET}x)"
    )
    best_ttft = min(r.first_token_s for r in raws) / min(r.first_token_s for r in ours)
    best_rate = max(r.tokens_per_s for r in ours) / max(r.tokens_per_s for r in raws)
    print(f"best run of each (less sensitive to a busy machine): first token {best_ttft:.2f}x, decode {best_rate:.2f}x")
    print(
        f"median of {RUNS} alternating runs; tokens per run: raw {[r.tokens for r in raws]}, "
        f"pi {[r.tokens for r in ours]}"
    )
    return 0 if min(ttft_ratio, rate_ratio) >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
