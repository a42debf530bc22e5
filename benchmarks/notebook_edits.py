"""Benchmark: the agent's notebook edits (issue 21), each section side by side with its baseline.

Sections (``SECTIONS``; other parts of the feature add theirs with ``section``):

- ``undo_copy``: what keeping a turn undoable costs when its code changes a 1,000,000 x 50 DataFrame in
  place: the journal's copy before the code runs, the change, and the journal's end-of-turn check that
  drops copies of unchanged objects, against a plain ``df.copy()`` and the same change. Target: at most
  ``UNDO_TARGET`` times the plain copy. Then the same at half the rows, to show time and memory (the bytes
  the copy holds after the change, measured with ``tracemalloc``) grow linearly.

Run from the repository root: ``python benchmarks/notebook_edits.py [--runs N] [--rows N] [--only NAME]``.
Reports PASS/FAIL per section; exits 1 when one fails.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pandas as pd

from pi_kernel.tools.turn_journal import TurnJournal

UNDO_TARGET = 1.2
LINEAR_RANGE = (1.6, 2.5)
"""Doubling the rows may multiply time and memory by this much and still count as linear."""
CHANGE = "df.iloc[::1000, 7] = -1.0\ndf[3] *= 2"
"""The turn's code: it changes the frame in place (two columns of its one block)."""

Section = Callable[[argparse.Namespace], bool]
SECTIONS: dict[str, Section] = {}


def section(name: str) -> Callable[[Section], Section]:
    """Register a section: ``fn(args) -> passed``."""

    def register(fn: Section) -> Section:
        SECTIONS[name] = fn
        return fn

    return register


def make_frame(rows: int, columns: int = 50) -> pd.DataFrame:
    return pd.DataFrame(np.random.default_rng(0).random((rows, columns)))


def plain_copy(df: pd.DataFrame) -> tuple[float, Any]:
    """The baseline: ``df.copy()`` then the change."""
    namespace = {"df": df}
    started = time.perf_counter()
    kept = df.copy()
    exec(CHANGE, namespace)
    return time.perf_counter() - started, kept


def journaled(df: pd.DataFrame) -> tuple[float, TurnJournal]:
    """Ours: the journal around the same change, and its end of turn."""
    namespace = {"df": df}
    journal = TurnJournal()
    started = time.perf_counter()
    token = journal.before_code(namespace, CHANGE)
    exec(CHANGE, namespace)
    journal.after_code(namespace, token)
    journal.finish()
    elapsed = time.perf_counter() - started
    assert not journal.is_empty(), "the journal dropped the copy of a changed frame"
    return elapsed, journal


def held_bytes(run: Callable[[pd.DataFrame], tuple[float, Any]], rows: int) -> int:
    """Bytes still allocated after ``run`` (the copy, or the block copy-on-write made), via tracemalloc."""
    df = make_frame(rows)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    _elapsed, kept = run(df)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def median_times(rows: int, runs: int) -> tuple[float, float]:
    """Median seconds of the plain copy and of ours, run alternately on fresh frames."""
    plain: list[float] = []
    ours: list[float] = []
    for _ in range(runs):
        for side, run in ((plain, plain_copy), (ours, journaled)):
            df = make_frame(rows)
            gc.collect()
            elapsed, kept = run(df)
            side.append(elapsed)
            del kept, df
    return statistics.median(plain), statistics.median(ours)


@section("undo_copy")
def undo_copy(args: argparse.Namespace) -> bool:
    rows = args.rows
    plain, ours = median_times(rows, args.runs)
    ratio = ours / plain
    print(f"undo copy, {rows:,} x 50: df.copy() + change {plain * 1000:.0f} ms, journal {ours * 1000:.0f} ms")
    print(f"  ratio {ratio:.2f} (target <= {UNDO_TARGET})")
    half_plain, half_ours = median_times(rows // 2, args.runs)
    memory = held_bytes(journaled, rows), held_bytes(journaled, rows // 2)
    baseline_memory = held_bytes(plain_copy, rows)
    time_growth, memory_growth = ours / half_ours, memory[0] / max(memory[1], 1)
    print(f"  half the rows: df.copy() + change {half_plain * 1000:.0f} ms, journal {half_ours * 1000:.0f} ms")
    print(f"  memory held: journal {memory[0] / 2**20:.0f} MB ({rows:,} rows), {memory[1] / 2**20:.0f} MB (half)")
    print(f"  plain copy holds {baseline_memory / 2**20:.0f} MB ({rows:,} rows)")
    print(f"  growth for twice the rows: time x{time_growth:.2f}, memory x{memory_growth:.2f} (linear: {LINEAR_RANGE})")
    low, high = LINEAR_RANGE
    passed = ratio <= UNDO_TARGET and low <= time_growth <= high and low <= memory_growth <= high
    print(f"  {'PASS' if passed else 'FAIL'}")
    return passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append")
    args = parser.parse_args(argv)
    results = {name: SECTIONS[name](args) for name in (args.only or SECTIONS)}
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
