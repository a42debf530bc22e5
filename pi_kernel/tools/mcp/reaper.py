"""The reaper: ends MCP server process groups when the kernel dies without stopping them.

Run as a script (``python reaper.py``; it imports nothing of pi-kernel). The kernel writes ``+PGID`` and
``tag TAG`` when a stdio server starts and ``-PGID`` and ``untag TAG`` when it has ended it. When its stdin
reaches EOF (the kernel exited, however it exited, even by SIGKILL, which skips ``atexit``) the reaper
sends SIGTERM to every group still listed and to every process whose environment holds
``PI_MCP_SERVER_TAG=TAG`` of a listed tag (what a server started and that left its group with
``setsid()``), then SIGKILL, and exits. A server ends on its own when its stdin closes, but what it started
would otherwise be left behind.
"""

import os
import signal
import sys
import time
from collections.abc import Callable, Iterable

GRACE_SECONDS = 1.0


def _tagged(tags: set[str]) -> list[int]:
    markers = {f"PI_MCP_SERVER_TAG={tag}".encode() for tag in tags}
    found = []
    for entry in os.listdir("/proc") if tags and os.path.isdir("/proc") else []:
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as file:
                    if markers & set(file.read().split(b"\0")):
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _kill(pids: Iterable[int], number: int, send: Callable[[int, int], None] = os.kill) -> None:
    for pid in pids:
        try:
            send(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt of the kernel is not the kernel's end
    groups: set[int] = set()
    tags: set[str] = set()
    for line in sys.stdin:
        word = line.strip()
        if word[1:].isdigit() and word[0] in "+-":
            (groups.add if word[0] == "+" else groups.discard)(int(word[1:]))
        elif word.startswith(("tag ", "untag ")):
            kind, tag = word.split(" ", 1)
            (tags.add if kind == "tag" else tags.discard)(tag)
    if groups or tags:
        tagged = _tagged(tags)
        _kill(groups, signal.SIGTERM, os.killpg)
        _kill(tagged, signal.SIGTERM)
        time.sleep(GRACE_SECONDS)
        _kill(groups, signal.SIGKILL, os.killpg)
        _kill(tagged + _tagged(tags), signal.SIGKILL)


if __name__ == "__main__":
    main()
