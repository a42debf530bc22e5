"""Benchmark: masking a text full of key fragments costs time linear in its size.

``secrets.mask`` replaces each run of a key (``FRAGMENT_CHARS`` characters or more) and each run of its hex
and base64 forms (``secrets``) with ``***``. It runs on every message a pi cell sends
(``outgoing``), on each comm message and on each whole tool result, on the kernel's sending thread. It once
rebuilt the whole text per fragment (``text[:start] + MASK + text[end:]``): quadratic in the fragments, 1 MB
of them took 2.3 s and 4 MB of hex fragments 42 s. Now the result is built once from the merged spans.

Rows, for 1 MB and 4 MB of text (best of ``REPEATS``):

- ``plain``: the key less its last character, then a space, over and over (every piece a fragment);
- ``hex``: the hex form of the key less its last byte, one per line (``xxd -p`` of an environment);
- ``folded``: the key's base64 form wrapped at 76 columns (``base64 /proc/self/environ``): the forms split
  over lines, matched in the text with its line breaks taken out;
- ``xxd -c4``: a narrow ``xxd`` dump of the key less its last character, over and over (read down its
  hex and text columns);
- ``no key``: text of the same size holding no key, the named baseline (one regular expression pass), shown
  for reference.

Target: each fragment row at 4 MB at most ``GROWTH_TARGET`` x its time at 1 MB (linear: ~4; quadratic: ~16).
Run from the repository root: ``python benchmarks/mask_cost.py``. Prints PASS/FAIL per target; exits 1 when
one fails.
"""

from __future__ import annotations

import base64
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pi_kernel.ai import secrets
from pi_kernel.ai.secrets import mask

KEY = "sk-test-SECRET-0123456789abcdef"
SIZES = (1_000_000, 4_000_000)
REPEATS = 3
GROWTH_TARGET = 4.5


def _repeated(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def plain(size: int) -> str:
    return _repeated(KEY[:-1] + " ", size)


def hex_lines(size: int) -> str:
    return _repeated(KEY[:-1].encode().hex() + "\n", size)


def folded(size: int) -> str:
    encoded = base64.b64encode(((KEY + "\n") * (size * 3 // 4 // (len(KEY) + 1) + 1)).encode()).decode()
    lines = [encoded[start : start + 76] for start in range(0, len(encoded), 76)]
    return "\n".join(lines)[:size]


def xxd_narrow(size: int) -> str:
    """``xxd -c4`` of the key over and over: 4 bytes a line, the key read down the columns (``ColumnsView``)."""
    raw = (KEY[:-1] + "\n").encode() * (size // 60 + 1)
    lines = [
        f"{start:08x}: {raw[start : start + 2].hex()} {raw[start + 2 : start + 4].hex()}  "
        for start in range(0, len(raw), 4)
    ]
    text = "\n".join(
        line + raw[start * 4 : start * 4 + 4].decode().replace("\n", ".") for start, line in enumerate(lines)
    )
    return text[:size]


def no_key(size: int) -> str:
    return _repeated("The quick brown fox jumps over the lazy dog. ", size)


TEXTS: dict[str, Callable[[int], str]] = {"plain": plain, "hex": hex_lines, "folded": folded, "xxd -c4": xxd_narrow}


def seconds(text: str) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        secrets._mask_large.cache_clear()  # mask keeps its last large results: time the masking, not the lookup
        start = time.perf_counter()
        mask(text, [KEY])
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    mask(plain(10_000), [KEY])  # warm the caches (the forms' patterns)
    failed = False
    print(f"{'text':<10}" + "".join(f"{size / 1e6:>10.0f} MB" for size in SIZES) + f"{'growth':>10}")
    for name, make in {**TEXTS, "no key": no_key}.items():
        times = [seconds(make(size)) for size in SIZES]
        growth = times[1] / times[0]
        row = f"{name:<10}" + "".join(f"{value:>11.3f}s" for value in times) + f"{growth:>9.1f}x"
        if name in TEXTS:
            ok = growth <= GROWTH_TARGET
            failed |= not ok
            row += f"  {'PASS' if ok else 'FAIL'} (<= {GROWTH_TARGET}x)"
        print(row)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
