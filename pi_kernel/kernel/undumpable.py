"""The kernel process made non-dumpable, so the commands it starts cannot read its memory or environment.

The kernel holds the API keys in its environment and memory. On Linux any
process of the same user may read ``/proc/<pid>/environ`` and ``/proc/<pid>/mem``
of another, so a ``bash`` call could read the kernel's (``/proc/$PPID/environ``)
however the command is spelled. ``prctl(PR_SET_DUMPABLE, 0)`` makes those files
the property of root: a non-root child process (the bash tool's commands, MCP
servers) gets "Permission denied". The kernel itself still reads its own
``/proc/self/...``; a new program a child ``exec``s is dumpable again (its own
files stay readable), and core dumps of the kernel are off.

Honest limits: root (a container's default user, CI) and processes with
``CAP_SYS_PTRACE`` still read everything; other systems have no such switch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def make_undumpable() -> bool:
    """Set this process non-dumpable (Linux); whether it is now. Never raises."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return False
        return int(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
