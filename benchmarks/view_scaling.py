"""Benchmark: a long turn through the real kernel, in both views, costs time and iopub bytes linear in its size.

Setup: the scripted OpenAI-compatible server of the tests (``tests/fake_openai.py``,
HTTP + SSE) and a real Pi kernel started with ``jupyter_client``
(``tests/kernel_helpers.py``; ``PYTHONPATH`` = this repository), once with the
plain-text view (``PI_WIDGETS=0``: what nbclient, papermill and ``jupyter
console`` get) and once with the widget view (``PI_WIDGETS=1``).

Rows:

- one ``%%pi`` turn whose first answer holds 250, 500 and 1,000 tool calls of a
  quick tool (then a one-line answer): wall time from ``execute_request`` to
  ``idle`` and the bytes of every iopub message of the cell (JSON of header,
  parent header, metadata and content, as the client decoded them);
- one tool call whose 1 MB / 5 MB argument streams in 1 KB deltas, against the
  same stream consumed by the provider alone (``stream_openai_compatible``
  against the same server, in this process).

A third kernel runs the same turns with no view at all (a ``view_factory``
whose view ignores every event), printed for reference: what the agent loop,
the provider and the tools cost without any display, so a view's own share
can be told from the rest (not a target).

Each kernel first runs a 20-call warm-up turn (imports, first connection); a
call row is the best of ``REPEATS`` runs (the machine is shared).

Targets (issue 13): 1,000 calls at most 2.2x the time and the bytes of 500;
the 5 MB argument at most 5x the provider-only time. Run from the repository
root: ``python benchmarks/view_scaling.py``. Prints PASS/FAIL per target;
exits 1 when one fails.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI, text_chunks, tool_call_chunks  # noqa: E402
from kernel_helpers import KernelDriver, kernel_env, write_test_kernelspecs  # noqa: E402

from pi_kernel.ai.messages import UserMessage  # noqa: E402
from pi_kernel.ai.models import (  # noqa: E402
    Context,
    Model,
    StreamOptions,
)
from pi_kernel.ai.providers.remote import stream_openai_compatible  # noqa: E402

CALLS = (250, 500, 1000)
ARGUMENT_SIZES = (1_000_000, 5_000_000)
DELTA_BYTES = 1024
REPEATS = 3
CALL_GROWTH_TARGET = 2.2
ARGUMENT_TARGET = 5.0

SETUP = '''
from pi_kernel import tool

@tool
def noop(n: int) -> int:
    """Return n."""
    return n

@tool
def take(content: str) -> int:
    """Return the length of content."""
    return len(content)
'''


NO_VIEW = """
from pi_kernel.kernel.extension import get_session

class _NoView:
    def handle_event(self, event): pass
    def handle_approval(self, kind, request): pass
    def finish(self, outcome): pass

get_session().view_factory = lambda session, prompt, options: _NoView()
"""


def iopub_bytes(messages: list[dict[str, Any]]) -> int:
    total = 0
    for message in messages:
        for part in ("header", "parent_header", "metadata", "content"):
            total += len(json.dumps(message.get(part, {}), default=str).encode())
    return total


def run_cell(kernel: KernelDriver, code: str) -> tuple[float, int]:
    start = time.perf_counter()
    result = kernel.run(code, timeout=1800)
    elapsed = time.perf_counter() - start
    if result.status != "ok":
        raise SystemExit(f"the cell failed: {result.text[-2000:]}")
    return elapsed, iopub_bytes(result.messages)


def argument_chunks(size: int) -> list[dict[str, Any]]:
    return tool_call_chunks([("take", {"content": "x" * size})], parts=max(1, size // DELTA_BYTES))


async def provider_only(server: FakeOpenAI, size: int) -> float:
    server.enqueue(argument_chunks(size))
    model = Model("fake-model", provider="openai-compatible", base_url=server.base_url)
    context = Context(messages=[UserMessage("Go")])
    start = time.perf_counter()
    events = stream_openai_compatible(model, context, StreamOptions(api_key="sk-benchmark"))
    async for _event in events:
        pass
    message = await events.result()
    elapsed = time.perf_counter() - start
    assert message.tool_calls and len(message.tool_calls[0].arguments["content"]) == size, message.error_message
    return elapsed


def main() -> int:
    failures = 0
    with FakeOpenAI() as server, tempfile.TemporaryDirectory() as tmp:
        jupyter_path = write_test_kernelspecs(Path(tmp))
        asyncio.run(provider_only(server, 10_000))  # warm-up: imports, the first connection
        provider = {
            size: min(asyncio.run(provider_only(server, size)) for _ in range(REPEATS)) for size in ARGUMENT_SIZES
        }
        for view, flag in (("text", "0"), ("widgets", "1"), ("no view", "0")):
            env = kernel_env(server.base_url, PI_WIDGETS=flag)
            with KernelDriver(env=env, jupyter_path=jupyter_path) as kernel:
                assert kernel.run(SETUP).status == "ok"
                reference = view == "no view"
                if reference:
                    assert kernel.run(NO_VIEW).status == "ok"
                rows: dict[int, tuple[float, int]] = {}
                for calls in (20, *CALLS):
                    runs = []
                    for _ in range(REPEATS if calls in CALLS else 1):
                        kernel.run("%pi reset")
                        server.enqueue(tool_call_chunks([("noop", {"n": n}) for n in range(calls)]), text_chunks("ok"))
                        runs.append(run_cell(kernel, "%%pi --approve auto\nGo"))
                    rows[calls] = min(runs)
                    print(f"{view:8} {calls:5} calls   {rows[calls][0]:8.2f} s  {rows[calls][1] / 1e6:8.2f} MB iopub")
                time_ratio = rows[1000][0] / rows[500][0]
                byte_ratio = rows[1000][1] / rows[500][1]
                for name, ratio in (("time", time_ratio), ("bytes", byte_ratio)):
                    if reference:
                        print(f"{view:8} 1000/500 calls {name}: {ratio:.2f}x (reference, no target)")
                        continue
                    ok = ratio <= CALL_GROWTH_TARGET
                    failures += not ok
                    print(
                        f"{view:8} 1000/500 calls {name}: {ratio:.2f}x (target <= {CALL_GROWTH_TARGET}x) "
                        f"{'PASS' if ok else 'FAIL'}"
                    )
                for size in ARGUMENT_SIZES:
                    kernel.run("%pi reset")
                    server.enqueue(argument_chunks(size), text_chunks("ok"))
                    elapsed, sent = run_cell(kernel, "%%pi --approve auto\nGo")
                    ratio = elapsed / provider[size]
                    line = (
                        f"{view:8} {size / 1e6:.0f} MB argument {elapsed:8.2f} s  {sent / 1e6:8.2f} MB iopub; "
                        f"provider alone {provider[size]:.2f} s: {ratio:.2f}x"
                    )
                    if size == max(ARGUMENT_SIZES) and not reference:
                        ok = ratio <= ARGUMENT_TARGET
                        failures += not ok
                        line += f" (target <= {ARGUMENT_TARGET}x) {'PASS' if ok else 'FAIL'}"
                    print(line)
    print("PASS" if not failures else f"FAIL ({failures} target(s) missed)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
