"""``benchmarks/prompt_caching.py`` measures what it says on a short session: every request's breakpoints, the
reads the next request gets once the prefix passes the API's minimum, a pause longer than the cache's lifetime,
and the cost both ways. The targets (>= 90 % read from the cache from turn 3 on, <= 0.3x the cost over 50
turns) live in the benchmark."""

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


def test_the_read_share_is_measured_and_a_pause_past_the_ttl_loses_the_cache() -> None:
    benchmark = _load()
    steady, paused = benchmark.measure(6), benchmark.measure(6, pause_before=5)
    reads = [row[3] for row in steady["rows"]]
    assert reads[:4] == [0.0] * 4  # under the 1,024-token minimum: nothing cached yet
    assert all(share > 0.75 for share in reads[6:])  # turn 4 on: the history comes from the cache
    later = [row for row in steady["rows"] if row[0] >= benchmark.FROM_TURN]
    assert steady["read"] == sum(row[3] * row[1] for row in later) / sum(row[1] for row in later)
    pause_reads = [row[3] for row in paused["rows"]]
    assert pause_reads[8] == 0.0 and pause_reads[9] > 0.75  # after six minutes it is written again, then read
    assert pause_reads[:8] == reads[:8] and pause_reads[10:] == reads[10:]
    assert paused["totals"].cache_write > steady["totals"].cache_write and paused["cached"] > steady["cached"]
