"""``benchmarks/notebook_edits.py`` ``read_500``: both sides read the same notebook, and ours really reads it.

No timing here (targets live in the benchmark); this keeps the section honest and runnable.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import nbformat

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "notebook_edits.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("notebook_edits_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_bridge_side_reads_every_cell_of_the_notebook_the_baseline_parses() -> None:
    from pi_kernel.kernel.notebook_bridge import NotebookBridge

    bench = _load()
    notebook = bench.sample_notebook(bench.READ_CELLS)
    assert len(nbformat.reads(nbformat.writes(notebook), as_version=4).cells) == bench.READ_CELLS
    bridge = NotebookBridge()
    bridge._open(bench.ScriptedComm(bridge, bench.read_reply(notebook, 160)), {"content": {"data": {}}})
    cells = asyncio.run(bridge.read(max_chars=160))
    assert [cell.id for cell in cells] == [cell.id for cell in notebook.cells]
    assert cells[3].source == notebook.cells[3].source[:160] and cells[4].type == "markdown"
