"""Benchmark: kernel start to the first ``execute_reply`` of ``1+1``, Pi kernel vs stock ipykernel.

Both kernels are started the same way (jupyter_client, a kernelspec in a
temporary directory, this interpreter), alternately so that machine load
hits both alike; the median of ``--runs`` starts of each is compared. The
Pi kernel must not cost more than ``TARGET`` times the stock kernel: it defers
``openai``, pydantic model building, the agent and widgets until first use.

Run from the repository root: ``python benchmarks/kernel_startup.py [--runs N]``.
Reports PASS/FAIL against the target; exits 1 when it fails.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

REPO = Path(__file__).resolve().parent.parent
TARGET = 1.3


def write_specs(root: Path) -> Path:
    for name, module in (("pi", "pi_kernel"), ("stock", "ipykernel_launcher")):
        spec = root / "kernels" / name
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", module, "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": name, "language": "python"}))
    return root / "kernels"


def time_to_first_reply(kernel_name: str, kernel_dirs: Path, env: dict[str, str]) -> float:
    manager = KernelManager(
        kernel_name=kernel_name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dirs)])
    )
    started = time.perf_counter()
    manager.start_kernel(env=env)
    client = manager.client()
    client.start_channels()
    try:
        msg_id = client.execute("1+1")
        while True:
            try:
                reply = client.get_shell_msg(timeout=60)
            except queue.Empty as error:
                raise RuntimeError(f"{kernel_name}: no execute_reply within 60 s") from error
            if reply["parent_header"].get("msg_id") == msg_id:
                elapsed = time.perf_counter() - started
                if reply["content"]["status"] != "ok":
                    raise RuntimeError(f"{kernel_name}: 1+1 failed: {reply['content']}")
                return elapsed
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PI_", "OPENAI_", "DEEPSEEK_"))}
    env["PYTHONPATH"] = str(REPO)
    times: dict[str, list[float]] = {"stock": [], "pi": []}
    with tempfile.TemporaryDirectory() as tmp:
        kernel_dirs = write_specs(Path(tmp))
        for name in ("stock", "pi"):  # warm the file cache once, not counted
            time_to_first_reply(name, kernel_dirs, env)
        for _ in range(args.runs):
            for name in ("stock", "pi"):
                times[name].append(time_to_first_reply(name, kernel_dirs, env))
    stock, pi = statistics.median(times["stock"]), statistics.median(times["pi"])
    ratio = pi / stock
    print(f"kernel start -> first execute_reply of 1+1, median of {args.runs} runs")
    print(f"  stock ipykernel  {stock * 1000:8.0f} ms")
    print(f"  pi kernel        {pi * 1000:8.0f} ms")
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    print(f"  ratio pi/stock   {ratio:8.2f}x   (target <= {TARGET}x)  {verdict}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
