"""``benchmarks/notebook_context.py`` compares like with like: both sides cover the same names and frame.

No timing here (targets live in the benchmark); this keeps the benchmark honest and runnable.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "notebook_context.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("notebook_context_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_both_sides_describe_the_same_variables_and_frame() -> None:
    bench = _load()
    namespace = bench.make_namespace(200)
    plain = bench.plain_listing(namespace)
    ours = bench.run_inspect(None, namespace, limit=4000, hidden=set())
    assert all(f"var_{index:05d}: " in plain for index in range(200)) and ours.startswith("200 user variable(s):")
    df = bench.make_frame(1_000)
    assert df.shape == (1_000, bench.COLUMNS)
    description = bench.run_inspect("df", {"df": df}, limit=4000, hidden=set())
    assert "1,000 rows x 50 columns" in description and "x00" in bench.plain_description(df)
