"""``benchmarks/prompt_caching.py`` measures what it says on a short session: every request's breakpoints, the
reads the next request gets once the prefix passes the API's minimum, and the cost both ways. The targets
(>= 90 % before a breakpoint from turn 3 on, <= 0.3x the cost over 50 turns) live in the benchmark."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "prompt_caching.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("prompt_caching_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_short_session_reads_its_history_from_the_cache() -> None:
    result = _load().measure(6)
    rows, totals = result["rows"], result["totals"]
    assert [row[0] for row in rows] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    assert all(row[2] == 1.0 for row in rows)  # the breakpoint sits on the latest user turn
    assert rows[0][3] == 0.0 and all(row[3] > 0.8 for row in rows if row[0] >= 5)
    assert totals.cache_read > 0 and totals.cache_write > 0
    assert 0 < result["cached"] < 0.6 * result["uncached"]
