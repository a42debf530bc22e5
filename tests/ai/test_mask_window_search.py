"""``may_hold``'s one search over all windows of all forms of the keys (a trie-shaped pattern) finds a
window exactly where searching for each window would."""

from __future__ import annotations

import random
import re

from pi_kernel.ai import secrets as masking

SECRETS = ("sk-test-SECRET-0123456789abcdef", "hunter2hunter2hunter2", "AKIAABCDEFGHIJKLMNOP")


def _windows(secrets: tuple[str, ...], shortest: int) -> list[str]:
    pieces = {window for secret in secrets for _, window in masking.windows(secret, shortest)}
    for secret in secrets:
        for forms in (masking.encoded_forms(secret), masking.spaced_forms(secret)):
            pieces |= {window for form, run in forms for _, window in masking.windows(form, run)}
    return sorted(pieces)


def test_the_window_search_finds_what_each_window_finds() -> None:
    rng = random.Random(7)
    pattern = masking.any_window(SECRETS, 12)
    pieces = _windows(SECRETS, 12)
    alphabet = "".join(sorted(set("".join(pieces)))) + " \n"
    found = 0
    for index in range(4000):
        noise = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
        piece = rng.choice(pieces)
        if index % 3 == 0:
            text = noise + piece + noise[:5]
        elif index % 3 == 1:
            cut = rng.randrange(len(piece))
            text = noise + piece[:cut] + rng.choice(alphabet) + piece[cut + 1 :]
        else:
            text = noise
        expected = any(window in text for window in pieces)
        found += expected
        assert (pattern.search(text) is not None) == expected, text
    assert found > 1000
    assert re.compile("|".join(map(re.escape, pieces))).search("x" * 100) is None
    assert pattern.search("x" * 100) is None
