"""Benchmark: assembling a long streamed tool-call argument.

A provider streams a tool call's JSON arguments in small deltas and emits a
``toolcall_delta`` event with the partially parsed arguments after every
delta.  This script streams a ``{"path": ..., "content": ...}`` argument of
200 KB and 400 KB in 10-character deltas, takes a snapshot after every delta
and finishes with a strict parse, and compares that with re-parsing the whole
buffer on every delta (what pi <= 0.87 did).

Run from the repository root: ``python benchmarks/stream_args.py``.
Reports PASS/FAIL against the targets but always exits 0.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pydantic_core import from_json

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pi_kernel.ai.json_stream import IncrementalJSONParser

DELTA_CHARS = 10
SIZES = (200_000, 400_000)
OUR_REPEATS = 7
SPEEDUP_TARGET = 50.0  # baseline / ours at 200 KB, at least
GROWTH_TARGET = 2.2  # ours at 400 KB / ours at 200 KB, at most

# Code-like text: newlines and quotes become escapes, plus non-ASCII text
# (accents, CJK, an astral-plane emoji) sent unescaped as providers do.
_SAMPLE_LINES = (
    "def greet(name: str) -> str:\n",
    '    """Say hello to \\"name\\" in a few languages."""\n',
    "    return f'Hello, {name}! Grüße, こんにちは 👋'\n",
    "\tpath = 'C:\\\\Users\\\\me'  # tabs and backslashes\n",
    "\n",
)


def make_arguments(size: int) -> str:
    """A JSON object of about ``size`` characters with a long content string."""
    line_cycle = "".join(_SAMPLE_LINES)
    content = (line_cycle * (size // len(line_cycle) + 1))[: int(size * 0.9)]
    document = json.dumps({"path": "x.py", "content": content}, ensure_ascii=False)
    while len(document) > size:  # escapes inflate the text; trim to the target
        content = content[: len(content) - (len(document) - size)]
        document = json.dumps({"path": "x.py", "content": content}, ensure_ascii=False)
    return document


def split_deltas(text: str) -> list[str]:
    return [text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS)]


def incremental(deltas: list[str]) -> object:
    parser = IncrementalJSONParser()
    for delta in deltas:
        parser.feed(delta)
        parser.snapshot()  # the provider emits a toolcall_delta per delta
    return parser.finish()


def full_reparse_per_delta(deltas: list[str]) -> object:
    buffer = ""
    for delta in deltas:
        buffer += delta
        from_json(buffer, allow_partial="trailing-strings")
    return json.loads(buffer)


def one_full_parse_seconds(text: str) -> float:
    """Reference: parsing the final text once, the floor for any approach."""
    started = time.process_time()
    from_json(text, allow_partial="trailing-strings")
    return time.process_time() - started


def cpu_seconds(run: Callable[[list[str]], object], deltas: list[str]) -> float:
    gc.collect()  # start every run from the same heap state
    started = time.process_time()
    run(deltas)
    return time.process_time() - started


def main() -> int:
    texts = {size: make_arguments(size) for size in SIZES}
    deltas = {size: split_deltas(text) for size, text in texts.items()}
    for size, text in texts.items():
        assert incremental(deltas[size]) == json.loads(text), "incremental parse is wrong"
    # Interleave the sizes so a noisy neighbour on a shared machine skews both alike.
    our_runs: dict[int, list[float]] = {size: [] for size in SIZES}
    for _ in range(OUR_REPEATS):
        for size in SIZES:
            our_runs[size].append(cpu_seconds(incremental, deltas[size]))
    ours = {size: statistics.median(runs) for size, runs in our_runs.items()}
    baseline = {size: cpu_seconds(full_reparse_per_delta, deltas[size]) for size in SIZES}
    one_parse = {size: min(one_full_parse_seconds(texts[size]) for _ in range(20)) for size in SIZES}

    print(f"Streaming a {{path, content}} tool-call argument in {DELTA_CHARS}-char deltas,")
    print("snapshot after every delta, then finish(); CPU time (time.process_time).\n")
    header = f"{'method':<52}" + "".join(f"{size // 1000:>10} KB" for size in SIZES)
    print(header)
    print("-" * len(header))
    rows = (
        (f"ours: IncrementalJSONParser (median of {OUR_REPEATS})", ours),
        ("baseline: full re-parse per delta (pi <= 0.87 style)", baseline),
        ("reference: one full from_json of the final text", one_parse),
    )
    for label, timings in rows:
        print(f"{label:<52}" + "".join(f"{timings[size] * 1000:>10.2f} ms" for size in SIZES))
    print()

    small, large = SIZES
    speedup = baseline[small] / max(ours[small], 1e-9)
    growth = ours[large] / max(ours[small], 1e-9)
    verdict = {True: "PASS", False: "FAIL"}
    print(
        f"speed-up vs baseline at {small // 1000} KB: {speedup:8.1f}x"
        f"  (target >= {SPEEDUP_TARGET:.0f}x)  {verdict[speedup >= SPEEDUP_TARGET]}"
    )
    print(
        f"ours {large // 1000} KB / ours {small // 1000} KB:     {growth:8.2f}x"
        f"  (target <= {GROWTH_TARGET}x)  {verdict[growth <= GROWTH_TARGET]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
