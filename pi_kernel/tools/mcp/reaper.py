"""The reaper: ends MCP server process groups when the kernel dies without stopping them.

Run as a script (``python reaper.py``; it imports nothing of pi-kernel). The
kernel writes ``+PGID`` when a stdio server starts and ``-PGID`` when it has
ended it. When its stdin reaches EOF — the kernel exited, however it exited,
even by SIGKILL, which skips ``atexit`` — the reaper sends SIGTERM to every
group still listed, then SIGKILL, and exits. A server ends on its own when
its stdin closes, but what it started (a child in its process group) would
otherwise be left behind.
"""

import os
import signal
import sys
import time

GRACE_SECONDS = 1.0


def _signal(groups: set[int], number: int) -> None:
    for pgid in groups:
        try:
            os.killpg(pgid, number)
        except (ProcessLookupError, PermissionError):
            pass


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt of the kernel is not the kernel's end
    groups: set[int] = set()
    for line in sys.stdin:
        word = line.strip()
        if word[1:].isdigit() and word[0] in "+-":
            (groups.add if word[0] == "+" else groups.discard)(int(word[1:]))
    if groups:
        _signal(groups, signal.SIGTERM)
        time.sleep(GRACE_SECONDS)
        _signal(groups, signal.SIGKILL)


if __name__ == "__main__":
    main()
