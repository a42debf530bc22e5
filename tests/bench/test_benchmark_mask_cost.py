"""``benchmarks/mask_cost.py`` masks what it says, and masking a text of many key fragments masks each one.

The cost target (4 MB of fragments at most 4.5x the time of 1 MB) lives in the benchmark; no timing here.
Masking once rebuilt the text per fragment (quadratic, r14a review); the spans are now replaced in one pass
(``secrets.replaced``), which must give what replacing them one at a time gave.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

from pi_kernel.ai.secrets import FRAGMENT_CHARS, mask, may_hold, merged, replaced

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "mask_cost.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mask_cost_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_fragment_of_the_benchmarks_texts_is_masked() -> None:
    bench = _load()
    key = bench.KEY
    assert mask(bench.plain(len(key) * 3000), [key]) == "*** " * 3000  # 3,000 fragments, each masked
    assert mask(bench.hex_lines((2 * len(key) - 1) * 1000), [key]) == "***\n" * 1000
    folded = bench.folded(20_000)
    masked = mask(folded, [key])
    assert may_hold(folded, [key], FRAGMENT_CHARS) and not may_hold(masked, [key], FRAGMENT_CHARS)
    assert masked.count("***") > 100 and key not in masked
    assert not may_hold(mask(bench.no_key(10_000), [key]), [key], FRAGMENT_CHARS)


def test_spans_replaced_at_once_give_what_one_at_a_time_gave() -> None:
    rng = random.Random(14)
    for _ in range(500):
        text = "".join(rng.choice("ab\n*") for _ in range(rng.randrange(60)))
        spans = []
        for _ in range(rng.randrange(8)):
            start = rng.randrange(len(text) + 1)
            spans.append((start, rng.randrange(start, len(text) + 1)))
        one_at_a_time = text
        for start, end in reversed(merged(spans)):
            one_at_a_time = one_at_a_time[:start] + "***" + one_at_a_time[end:]
        assert replaced(text, merged(spans), "***") == one_at_a_time
