"""Benchmark: how much of the house one ``%%pi`` cell walks through, and the house's own counts.

Issue 25's measures, taken the same way every time:

- **modules touched**: a real Pi kernel (jupyter_client) talking to the scripted
  OpenAI-compatible server runs a warm-up ``%%pi`` cell with one approved call,
  then a second such cell: a call to ``add``, approved over the ``pi.approval``
  comm, then the answer. A profiler installed when the kernel process starts
  (``sitecustomize``: ``sys.setprofile`` and ``threading.setprofile``, so every
  thread, the tool workers and the control thread too) records each
  ``pi_kernel`` module with a Python function that ran; what ran before the
  second cell is cleared. Target: under ``TARGET_MODULES``.
- **lines per layer** (``wc -l`` of ``pi_kernel/<layer>/**/*.py``), modules
  importing the masking module, modules calling it (``ai.secrets.mask`` /
  ``MaskedStream``, and with its thin wrappers), modules calling the approval
  ``decide()``, threads / event loops / locks / ``call_soon_threadsafe``, and
  import cycles (type-only imports included).

Run from the repository root: ``python benchmarks/house_metrics.py``. Prints the
counts and the touched modules, PASS/FAIL against the module target; exits 1 when
it fails.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO)]

TARGET_MODULES = 35
LAYERS = ("ai", "agent", "tools", "widgets", "kernel")

SITECUSTOMIZE = r"""
import sys, threading, types

_touch = types.ModuleType("_pi_touch")
_touch.touched = set()
sys.modules["_pi_touch"] = _touch


def _pi_profile(frame, event, arg):
    if event == "call":
        name = frame.f_globals.get("__name__", "")
        if name.startswith("pi_kernel"):
            _touch.touched.add(name)


sys.setprofile(_pi_profile)
threading.setprofile(_pi_profile)
"""
"""Loaded by the kernel process at start (``sitecustomize``): every thread it ever starts (the shell, the
control thread, iopub, the tool workers) runs the profiler, so code on any thread counts."""

CLEAR_CELL = '__import__("_pi_touch").touched.clear()  # adds no name the next turn\'s context would describe'

REPORT_CELL = r"""
import json as _j, sys as _s, threading as _t, _pi_touch
_s.setprofile(None); _t.setprofile(None)
print("TOUCHED" + _j.dumps(sorted(_pi_touch.touched)))
"""

TOOL_CELL = '''
from pi_kernel import tool

@tool(approval="ask")
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b
'''


def touched_modules() -> list[str]:
    """The ``pi_kernel`` modules whose functions ran during one warm ``%%pi`` cell with one approved call."""
    from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks
    from kernel_helpers import KernelDriver, approval_comm, approval_requests, kernel_env

    from pi_kernel.kernel.kernelspec import write_kernel_spec

    with tempfile.TemporaryDirectory() as jupyter_path, FakeOpenAI() as server:
        site = Path(jupyter_path) / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        python_path = {"PYTHONPATH": f"{site}{os.pathsep}{REPO}"}
        write_kernel_spec(Path(jupyter_path) / "kernels" / "pi", sys.executable, python_path)
        with KernelDriver(env={**kernel_env(server.base_url), **python_path}, jupyter_path=jupyter_path) as kernel:
            assert kernel.run(TOOL_CELL).status == "ok"

            def run_turn(cell_id: str) -> None:
                server.enqueue(tool_call_chunks([("add", {"a": 2, "b": 3})]), text_chunks("The sum is 5."))
                with approval_comm(kernel) as comm_id:

                    def on_iopub(message: dict[str, Any]) -> None:
                        request = approval_requests(message)
                        if request is not None:
                            kernel.comm_send(
                                comm_id,
                                {"action": "resolve", "tool_call_id": request["tool_call_id"], "decision": "approve"},
                            )

                    result = kernel.run("%%pi\nAdd 2 and 3", cell_id=cell_id, on_iopub=on_iopub)
                    assert result.status == "ok" and "The sum is 5." in result.text, result.text

            run_turn("warm")
            assert kernel.run(CLEAR_CELL).status == "ok"
            run_turn("measured")
            printed = kernel.run(REPORT_CELL).text
    line = next(line for line in printed.splitlines() if line.startswith("TOUCHED"))
    return [name for name in json.loads(line[len("TOUCHED") :]) if name != "pi_kernel"]


def layer_lines() -> dict[str, int]:
    root = REPO / "pi_kernel"
    counts = {layer: sum(len(p.read_text().splitlines()) for p in (root / layer).rglob("*.py")) for layer in LAYERS}
    counts["total"] = sum(len(p.read_text().splitlines()) for p in root.rglob("*.py"))
    return counts


MASKING = {"mask", "MaskedStream"}
"""``ai.secrets``' masking function and its streaming form; a module calls it under any name it imports it as."""
MASKING_WRAPPERS = {"masked", "masked_error", "print_masked", "MaskedWriter", "admit"}
"""Functions that mask and do little else: the kernel's hook and printer (``outgoing``), provider errors
(``remote``), a message entering the transcript (``secrets.admit``)."""


def callers(texts: dict[Path, str], functions: set[str]) -> list[Path]:
    """The modules that call one of ``functions`` (imported under that name or an alias, or as an attribute)."""
    found = []
    for path, text in texts.items():
        tree = ast.parse(text)
        local = set(functions)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                local |= {alias.asname or alias.name for alias in node.names if alias.name in functions}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in local:
                    found.append(path)
                    break
    return found


def source_counts() -> dict[str, int]:
    files = list((REPO / "pi_kernel").rglob("*.py"))
    texts = {path: path.read_text() for path in files}
    mask_importers = 0
    for text in texts.values():
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("ai.secrets"):
                mask_importers += 1
                break
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "pi_kernel.ai"
                and "secrets" in {alias.name for alias in node.names}
            ):
                mask_importers += 1
                break
    joined = "\n".join(texts.values())
    return {
        "modules": len(files),
        "modules importing ai.secrets": mask_importers,
        "modules calling the masking function": len(callers(texts, MASKING)),
        "... or a wrapper of it": len(callers(texts, MASKING | MASKING_WRAPPERS)),
        "modules calling approval decide()": len(callers(texts, {"decide"})),
        "threads started": len(re.findall(r"threading\.Thread\(|Thread\(target", joined)),
        "event loops created": len(re.findall(r"new_event_loop\(|asyncio\.run\(", joined)),
        "locks": len(re.findall(r"threading\.(?:R?Lock|Condition)\(|asyncio\.Lock\(", joined)),
        "call_soon_threadsafe": len(re.findall(r"call_soon_threadsafe", joined)),
        "_getframe": len(re.findall(r"_getframe", joined)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every touched module")
    args = parser.parse_args()
    print("lines:", layer_lines())
    print("counts:", source_counts())
    touched = touched_modules()
    print(f"modules touched by one %%pi cell with one approved call: {len(touched)} (target < {TARGET_MODULES})")
    if args.list:
        for name in touched:
            print("  ", name)
    passed = len(touched) < TARGET_MODULES
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
