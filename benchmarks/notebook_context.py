"""Benchmark: what ``inspect`` sends the model about a big notebook, and how long it takes to build.

Two measurements, each at two sizes, each against building the same text the
plain way side by side:

- the variables listing (``inspect`` without a name) of a namespace with
  1,000 and 10,000 user names (ints, strings, lists, small arrays), against a
  listing built from ``repr`` of every value (``name: type = repr``);
- the description of one DataFrame (``inspect df``) of 100,000 and
  1,000,000 rows x 50 columns (45 float columns with some NaN, 5 string
  columns), against ``repr(df)`` + ``df.describe()``.

Targets (the largest size): the listing and the description each under 4 KB
(4,096 bytes of UTF-8), and the description at most 0.5x the time of a plain
``df.describe()``. Times are the best of ``REPEATS`` runs. Run from the
repository root: ``python benchmarks/notebook_context.py``. Prints PASS/FAIL;
exits 1 on FAIL.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from pi_kernel.tools.builtin.inspect_tool import run_inspect  # noqa: E402

NAME_COUNTS = (1_000, 10_000)
FRAME_ROWS = (100_000, 1_000_000)
COLUMNS = 50
REPEATS = 3
MAX_BYTES = 4096
MAX_TIME_RATIO = 0.5


def best_of(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def make_namespace(count: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    namespace: dict[str, Any] = {"__name__": "__main__", "np": np, "pd": pd}
    for index in range(count):
        kind = index % 4
        value: Any = (
            index
            if kind == 0
            else f"text number {index}" * 3
            if kind == 1
            else list(range(index % 50))
            if kind == 2
            else rng.random(20)
        )
        namespace[f"var_{index:05d}"] = value
    return namespace


def make_frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    data: dict[str, Any] = {}
    for column in range(COLUMNS - 5):
        values = rng.random(rows)
        values[rng.integers(0, rows, rows // 100)] = np.nan
        data[f"x{column:02d}"] = values
    labels = np.array(["north", "south", "east", "west"], dtype=object)
    for column in range(5):
        data[f"s{column}"] = labels[rng.integers(0, 4, rows)]
    return pd.DataFrame(data)


def plain_listing(namespace: dict[str, Any]) -> str:
    return "\n".join(
        f"{name}: {type(value).__name__} = {value!r}"
        for name, value in namespace.items()
        if not name.startswith("_") and name not in ("np", "pd")
    )


def plain_description(df: pd.DataFrame) -> str:
    return repr(df) + "\n" + df.describe().to_string()


def size(text: str) -> int:
    return len(text.encode("utf-8"))


def main() -> int:
    ok = True
    print("variables listing (inspect without a name) vs a repr of every value")
    for count in NAME_COUNTS:
        namespace = make_namespace(count)
        ours_s, ours = best_of(partial(run_inspect, None, namespace, limit=4000, hidden=set()))
        plain_s, plain = best_of(partial(plain_listing, namespace))
        print(
            f"  {count:>6,} names: inspect {size(ours):>6,} B in {ours_s * 1000:7.1f} ms | plain repr "
            f"{size(plain):>10,} B in {plain_s * 1000:7.1f} ms | size ratio {size(ours) / size(plain):.4f}, "
            f"time ratio {ours_s / plain_s:.2f}"
        )
        if count == NAME_COUNTS[-1] and size(ours) >= MAX_BYTES:
            ok = False
            print(f"  FAIL: the listing is {size(ours)} bytes (target < {MAX_BYTES})")
    print(f"DataFrame description (inspect df) vs repr(df) + df.describe(), {COLUMNS} columns")
    for rows in FRAME_ROWS:
        df = make_frame(rows)
        ours_s, ours = best_of(partial(run_inspect, "df", {"df": df}, limit=4000, hidden=set()))
        describe_s, _ = best_of(df.describe)
        plain_s, plain = best_of(partial(plain_description, df))
        ratio = ours_s / describe_s
        print(
            f"  {rows:>9,} rows: inspect {size(ours):>6,} B in {ours_s * 1000:7.1f} ms | df.describe() "
            f"{describe_s * 1000:7.1f} ms | repr+describe {size(plain):>6,} B in {plain_s * 1000:7.1f} ms | "
            f"time ratio vs describe {ratio:.2f}"
        )
        if rows == FRAME_ROWS[-1]:
            if size(ours) >= MAX_BYTES:
                ok = False
                print(f"  FAIL: the description is {size(ours)} bytes (target < {MAX_BYTES})")
            if ratio > MAX_TIME_RATIO:
                ok = False
                print(f"  FAIL: the description takes {ratio:.2f}x df.describe() (target <= {MAX_TIME_RATIO})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
