"""``benchmarks/notebook_edits.py`` compares like with like: both sides make the same change, and the
journal's copy really brings the frame back (an undo that restored nothing would be fast and wrong).

No timing here (targets live in the benchmark)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parent.parent.parent / "benchmarks" / "notebook_edits.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("notebook_edits_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_both_sides_make_the_same_change_and_the_journal_can_undo_it() -> None:
    bench = _load()
    plain_frame, journal_frame = bench.make_frame(2000), bench.make_frame(2000)
    original = plain_frame.copy()
    _elapsed, kept = bench.plain_copy(plain_frame)
    _elapsed, journal = bench.journaled(journal_frame)
    assert plain_frame.equals(journal_frame) and not plain_frame.equals(original)
    assert kept.equals(original)
    namespace = {"df": journal_frame}
    journal.revert(namespace)
    assert namespace["df"].equals(original)
    assert "undo_copy" in bench.SECTIONS
