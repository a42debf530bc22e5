"""The kernel's outgoing choke point: every iopub and stdin message is masked (``ai.secrets.mask``).

``install`` wraps the kernel's ``Session.send`` (the one call every iopub and
stdin message goes through: ``print`` in a cell, ``display``, widget comms,
``input()`` prompts; also the reply to a cell, which repeats its error), in
the Pi kernel and in a stock kernel after ``%load_ext pi_kernel``; ``remove``
(``%unload_ext``) puts it back. IPython without a kernel has no messages: there
``sys.stdout`` and ``sys.stderr`` mask what they are given while a cell runs
(IPython prints displays and tracebacks there). So whatever pi shows goes out
with keys masked, with no mask call in the code that composes it (``%pi``
commands, notices, errors). Masking earlier is still needed in
two cases, and only there: text sent in pieces (a key cut across two
``stream`` messages: ``secrets.MaskedStream`` in the stream writers) and text
that is escaped, highlighted or cut to a length before it leaves (the key
would no longer be found: the views mask first and say so).

Left alone: the messages of the user's own Python cells (a cell that names
neither ``%pi`` nor ``pi_kernel``): ``print(os.environ[...])`` prints what it
was asked for. Each cell is judged by its code, from the ``execute_input``
message that announces it (sent before anything the cell prints). Comm
messages are always masked (widgets pi drew), and so is a message whose parent
is no cell seen (a comm click, a silent request).
"""

from __future__ import annotations

import re
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pi_kernel.ai.secrets import mask

MASKED_TYPES = frozenset(
    {
        "stream",
        "display_data",
        "update_display_data",
        "execute_input",
        "execute_result",
        "error",
        "clear_output",
        "comm_open",
        "comm_msg",
        "comm_close",
        "input_request",
        "execute_reply",
    }
)
"""The message types whose content can hold text: iopub and stdin, and the reply to a cell (its error)."""
_PI_CELL = re.compile(r"%pi\b|pi_kernel|_magic\(\s*['\"]pi['\"]")
"""A cell that talks to pi (``%pi``, ``%%pi``, IPython's translation of them, ``pi_kernel`` code)."""
KEEP_CELLS = 1000
"""Cells remembered as the user's own (the oldest forgotten: their late output is masked)."""


class OutgoingMask:
    """Wraps one kernel's ``Session.send`` (see the module docstring)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._cells: OrderedDict[str, bool] = OrderedDict()
        """Request id → whether it is the user's own Python cell (judged by its ``execute_input``)."""
        self._send: Callable[..., Any] = session.send

    def install(self) -> None:
        self.session.send = self.send

    def remove(self) -> None:
        if self.session.__dict__.get("send") == self.send:
            del self.session.send  # the class's own method again

    def send(
        self, stream: Any, msg_or_type: Any, content: Any = None, parent: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        """``Session.send`` with the content masked (see the module docstring)."""
        if isinstance(msg_or_type, dict):  # a message already built
            if self._masks(msg_or_type["header"]["msg_type"], msg_or_type["content"], msg_or_type["parent_header"]):
                msg_or_type = {**msg_or_type, "content": mask(msg_or_type["content"])}
        elif self._masks(msg_or_type, content, parent):
            content = mask(content)
        return self._send(stream, msg_or_type, content, parent, *args, **kwargs)

    def _masks(self, msg_type: str, content: Any, parent: Any) -> bool:
        if msg_type not in MASKED_TYPES or not content:
            return False
        if msg_type.startswith("comm_"):
            return True
        msg_id = ((parent or {}).get("header", parent) or {}).get("msg_id", "")
        if msg_type == "execute_input" and msg_id not in self._cells:
            self._cells[msg_id] = _PI_CELL.search(str(content.get("code", ""))) is None
            while len(self._cells) > KEEP_CELLS:
                self._cells.popitem(last=False)
        return not self._cells.get(msg_id, False)


class MaskedWriter:
    """A text stream whose every write is masked (``sys.stdout`` / ``sys.stderr`` of IPython without a kernel)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(mask(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class TerminalMask:
    """IPython without a kernel: while a cell that talks to pi runs, ``sys.stdout`` and ``sys.stderr`` mask
    what is written (IPython prints displays and tracebacks there too); other cells write unmasked."""

    def __init__(self) -> None:
        self._saved: tuple[Any, Any] | None = None

    def note_cell(self, info: Any) -> None:
        self.remove()
        if _PI_CELL.search(getattr(info, "raw_cell", "") or "") is not None:
            self._saved = (sys.stdout, sys.stderr)
            sys.stdout, sys.stderr = MaskedWriter(sys.stdout), MaskedWriter(sys.stderr)

    def cell_done(self, result: Any = None) -> None:
        self.remove()

    def remove(self) -> None:
        if self._saved is not None:
            if isinstance(sys.stdout, MaskedWriter):
                sys.stdout = self._saved[0]
            if isinstance(sys.stderr, MaskedWriter):
                sys.stderr = self._saved[1]
            self._saved = None


_installed: OutgoingMask | TerminalMask | None = None


def install(kernel: Any, shell: Any) -> None:
    """Mask what leaves from now on: ``kernel``'s messages, or the terminal's output of pi's cells without one
    (once per process: a second call replaces the first)."""
    global _installed
    remove(shell)
    if kernel is not None and getattr(kernel, "session", None) is not None:
        _installed = OutgoingMask(kernel.session)
        _installed.install()
    else:
        _installed = TerminalMask()
        shell.events.register("pre_run_cell", _installed.note_cell)
        shell.events.register("post_run_cell", _installed.cell_done)


def remove(shell: Any) -> None:
    """Undo ``install``."""
    global _installed
    if _installed is None:
        return
    _installed.remove()
    if isinstance(_installed, TerminalMask):
        for event, callback in (("pre_run_cell", _installed.note_cell), ("post_run_cell", _installed.cell_done)):
            try:
                shell.events.unregister(event, callback)
            except ValueError:
                pass
    _installed = None
