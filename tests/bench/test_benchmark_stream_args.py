"""``benchmarks/stream_args.py`` measures what it says: every method it times assembles the same arguments.

No timing here (targets live in the benchmark); this keeps the benchmark honest and runnable.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from pi_kernel.ai.json_stream import IncrementalJSONParser
from pi_kernel.ai.providers import openai_format

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "stream_args.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stream_args_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_timed_method_assembles_the_same_arguments() -> None:
    bench = _load()
    text = bench.make_arguments(3_000)
    assert bench.utf8_size(text) <= 3_000
    deltas = bench.split_deltas(text)
    assert "".join(deltas) == text and max(bench.utf8_size(delta) for delta in deltas) == bench.DELTA_BYTES
    chunks = bench.as_chunks(deltas)
    expected = json.loads(text)
    assert bench.incremental(deltas) == expected
    assert bench.full_reparse_per_delta(deltas) == expected
    assert bench.assembled(chunks) == expected
    assert bench.assembled_reparsing(chunks) == expected
    assert openai_format.IncrementalJSONParser is IncrementalJSONParser  # the baseline's swap is undone
