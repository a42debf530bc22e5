"""What leaves the kernel: its messages masked (``OutgoingMask``), execute-reply payloads gated
(``PayloadGate``), and its memory closed to the commands it starts (``make_undumpable``).

**Messages.** ``install_outgoing_mask`` wraps the kernel's ``Session.send``, the one call every iopub and
stdin message goes through (in the Pi kernel and after ``%load_ext pi_kernel``); without a kernel,
``TerminalMask`` masks ``sys.stdout`` and ``sys.stderr`` while a pi cell runs. So code that composes what
pi shows calls no mask, except for output a cell can capture before it is sent (``%%capture``: the
``%pi`` printer and notices use ``print_masked``; an error is sent as one, masked); text that is escaped
or cut before it leaves was masked as it entered (the transcript, the view model ``widgets.turn_state``).
Text sent in pieces is masked whole: each pi request's stdout and stderr go through one ``MaskedStream``,
which holds back what may begin a key until the next piece.

Masked: the messages of a pi cell, and of a request whose parent is no cell seen (a widget click). A
cell is pi's when its code names ``%pi`` or ``pi_kernel`` (judged from its ``execute_input``) or when pi
runs in it (``claim_request``: a helper function, an alias or ``%run`` count too). Of a pi cell's
``execute_reply`` only the error: its payload carries the code ``%%pi --cells`` offers, as it ran. Comm
messages are masked for pi's comms only (opened under a pi cell, ``claim_comm``, or caused by a pi
cell's or comm's message), and on the widget manager's control comm pi's widgets' states. The user's
own cells and comms are left alone (``print(os.environ[...])`` prints what it was asked for).

**Payloads** (``install_payload_gate``). Code the agent ran could write an execute-reply payload
(``set_next_input``, the pager) out of sight: from a ``post_run_cell`` callback, a thread or a loop
callback. The gate lets a payload through only when pi writes it (``PayloadGate.own``), or when it is
written on the thread of a user's cell running now that ran no ``%%pi`` turn; the rest is dropped, its
``source`` kept for the turn's notice (``take_dropped``).

**Memory** (``make_undumpable``, at kernel start). On Linux a process of the same user may read
``/proc/<pid>/environ`` and ``/mem`` of another, so a ``bash`` call could read the kernel's keys.
``prctl(PR_SET_DUMPABLE, 0)`` makes those files root's: a non-root child (bash commands, MCP servers)
gets "Permission denied"; core dumps are off. Root and ``CAP_SYS_PTRACE`` still read everything; other
systems have no such switch.

Long: every path out of the kernel (messages, payloads, what cannot be pickled) is guarded here, so the net
has one place.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from pi_kernel.ai.secrets import MaskedStream, add_secret_value, mask, secret_values, unmask

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
_PI_CELL = re.compile(r"%pi\b|\bpi_kernel\b|_magic\(\s*['\"]pi['\"]")
"""A cell that talks to pi (``%pi``, ``%%pi``, IPython's translation of them, ``pi_kernel`` code)."""
KEEP_CELLS = 1000
"""Cells remembered (the oldest forgotten: a user's cell's late output is then masked)."""
REPLY_ERROR_FIELDS = ("ename", "evalue", "traceback")


class OutgoingMask:
    """Wraps one kernel's ``Session.send`` (see the module docstring)."""

    def __init__(self, session: Any, kernel: Any = None) -> None:
        self.session = session
        self.kernel = kernel
        self._cells: OrderedDict[str, bool] = OrderedDict()
        """Request id → whether it is the user's own Python cell (judged by its ``execute_input``)."""
        self._pi_comms: OrderedDict[str, None] = OrderedDict()
        """The ids of pi's comms (opened under a pi cell, or a ``pi.*`` target): their messages are masked."""
        self._send: Callable[..., Any] = session.send
        self._streams: dict[tuple[str, str], tuple[MaskedStream, tuple[Any, ...]]] = {}
        """(request id, stream name) → its mask, and how its messages are sent."""
        self._streams_lock = threading.RLock()

    def install(self) -> None:
        self.session.send = self.send

    def remove(self) -> None:
        if self.session.__dict__.get("send") == self.send:
            del self.session.send  # the class's own method again

    def claim_request(self) -> None:
        """The request the kernel handles now is pi's (pi runs in it, whatever its code says)."""
        get_parent = getattr(self.kernel, "get_parent", None)
        msg_id = _msg_id(get_parent("shell") if get_parent is not None else None)
        if msg_id:
            self._remember(self._cells, msg_id, False)

    def claim_comm(self, comm_id: str) -> None:
        """The comm ``comm_id`` is pi's: its messages are masked."""
        self._pi_comms[comm_id] = None  # kept until the comm closes, however many comms pi opens later

    def send(
        self, stream: Any, msg_or_type: Any, content: Any = None, parent: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        """``Session.send`` with the content masked (see the module docstring)."""
        built = isinstance(msg_or_type, dict)  # a message already built (ipykernel's streams)
        msg_type = str(msg_or_type["header"]["msg_type"] if built else msg_or_type)
        body = msg_or_type.get("content") if built else content
        parent_header = msg_or_type.get("parent_header") if built else parent
        msg_id = _msg_id(parent_header)
        stream_text = msg_type == "stream" and isinstance(body, dict) and isinstance(body.get("text"), str)
        if stream_text and not self._cells.get(msg_id, False):  # a pi request: its streams go through one mask each
            text = self._stream_text(msg_id, body, (stream, parent_header, args, kwargs))
            if not text:
                return None  # all of it may begin a key: it waits for the next piece (or the request's end)
            masked = {**body, "text": text}
        else:
            if not stream_text and not msg_type.endswith("_reply"):
                self._flush_streams(msg_id, None)  # what a stream holds back goes out first
            masked = self._masked(msg_type, body, parent_header)
        if not built:
            content = masked
        elif masked is not body:
            msg_or_type = {**msg_or_type, "content": masked}
        return self._send(stream, msg_or_type, content, parent, *args, **kwargs)

    def _stream_text(self, msg_id: str, body: dict[str, Any], how: tuple[Any, ...]) -> str:
        """What of a pi request's ``stream`` text may go now (its ``MaskedStream`` holds back the rest)."""
        name = str(body.get("name", "stdout"))
        with self._streams_lock:
            self._flush_streams(msg_id, name)
            entry = self._streams.get((msg_id, name))
            if entry is None:
                entry = self._streams[(msg_id, name)] = (MaskedStream(), how)
            return entry[0].feed(body["text"])

    def _flush_streams(self, msg_id: str, keep: str | None) -> None:
        """Send what the request's streams hold back (but ``keep``'s), as their own messages were sent."""
        with self._streams_lock:
            for key in [key for key in self._streams if key[0] == msg_id and key[1] != keep]:
                masked, (socket, parent, args, kwargs) = self._streams.pop(key)
                rest = masked.flush()
                if rest:  # a message of its own (``Session.send`` builds it, whichever form the first came in)
                    self._send(socket, "stream", {"name": key[1], "text": rest}, parent, *args, **kwargs)

    def _masked(self, msg_type: str, content: Any, parent: Any) -> Any:
        """``content`` as it may leave: masked, left alone, or (a cell's reply, the widget states) in part."""
        if msg_type not in MASKED_TYPES or not content or not isinstance(content, dict):
            return content
        msg_id = _msg_id(parent)
        if msg_type == "execute_input" and msg_id not in self._cells:
            self._remember(self._cells, msg_id, _PI_CELL.search(str(content.get("code", ""))) is None)
        pi_request = not self._cells.get(msg_id, msg_type.startswith("comm_"))  # no cell seen: comms are judged below
        if msg_type == "execute_reply":  # its payload carries code as it ran: only the error is masked
            fields = {name: content[name] for name in REPLY_ERROR_FIELDS if name in content}
            return {**content, **mask(fields)} if pi_request else content
        if not msg_type.startswith("comm_"):
            return mask(content) if pi_request else content
        comm_id = str(content.get("comm_id", ""))
        parent_comm = str(((parent or {}).get("content") or {}).get("comm_id", ""))
        if comm_id in self._pi_comms or parent_comm in self._pi_comms or pi_request:
            if msg_type == "comm_open":  # opened by pi (or under a pi cell): pi's from now on
                self.claim_comm(comm_id)
            elif msg_type == "comm_close":
                self._pi_comms.pop(comm_id, None)
            return mask(content)
        return self._widget_states_masked(content)  # a comm of the user's own cell, or a click on one

    def _widget_states_masked(self, content: dict[str, Any]) -> dict[str, Any]:
        """The widget manager's ``update_states`` (every widget's state, on the control comm): pi's masked."""
        data = content.get("data")
        if not isinstance(data, dict) or data.get("method") != "update_states":
            return content
        states = data.get("states")
        if not isinstance(states, dict) or not any(model_id in self._pi_comms for model_id in states):
            return content
        masked = {model_id: mask(state) if model_id in self._pi_comms else state for model_id, state in states.items()}
        return {**content, "data": {**data, "states": masked}}

    @staticmethod
    def _remember(store: OrderedDict[str, Any], key: str, value: Any) -> None:
        store[key] = value
        while len(store) > KEEP_CELLS:
            store.popitem(last=False)


def _msg_id(parent: Any) -> str:
    """The id of a parent message (given whole or as its header)."""
    return str(((parent or {}).get("header", parent) or {}).get("msg_id", ""))


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
    """IPython without a kernel: ``sys.stdout`` and ``sys.stderr`` mask while a cell that talks to pi runs."""

    def __init__(self) -> None:
        self._saved: tuple[Any, Any] | None = None

    def note_cell(self, info: Any) -> None:
        self.remove()
        if _PI_CELL.search(getattr(info, "raw_cell", "") or "") is not None:
            self.claim_request()

    def claim_request(self) -> None:
        """Pi runs in this cell: mask what it writes from now on (also into a stream the cell put in place
        since it began: ``%%capture``, ``redirect_stdout``)."""
        if self._saved is None:
            self._saved = (sys.stdout, sys.stderr)
        if not isinstance(sys.stdout, MaskedWriter):
            sys.stdout = MaskedWriter(sys.stdout)
        if not isinstance(sys.stderr, MaskedWriter):
            sys.stderr = MaskedWriter(sys.stderr)

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


def install_outgoing_mask(kernel: Any, shell: Any) -> None:
    """Mask what leaves from now on: ``kernel``'s messages, or without one the terminal's (a second call replaces)."""
    global _installed
    remove_outgoing_mask(shell)
    if kernel is not None and getattr(kernel, "session", None) is not None:
        key = getattr(kernel.session, "key", b"")
        if isinstance(key, bytes | str) and key:
            add_secret_value(key)  # the HMAC key runs code in the kernel: masked wherever it shows
        _installed = OutgoingMask(kernel.session, kernel)
        _installed.install()
    else:
        _installed = TerminalMask()
        shell.events.register("pre_run_cell", _installed.note_cell)
        shell.events.register("post_run_cell", _installed.cell_done)


def claim_request() -> None:
    """Pi runs in the current cell (a magic or ``run_pi_cell`` starts): mask what it sends."""
    if _installed is not None:
        _installed.claim_request()


def claim_comm(comm_id: str) -> None:
    """``comm_id`` is one of pi's comms (a ``pi.*`` target the front-end opened): mask its messages."""
    if isinstance(_installed, OutgoingMask):
        _installed.claim_comm(comm_id)


def remove_outgoing_mask(shell: Any) -> None:
    global _installed
    if _installed is None:
        return
    _installed.remove()
    if isinstance(_installed, TerminalMask):
        for event, callback in (("pre_run_cell", _installed.note_cell), ("post_run_cell", _installed.cell_done)):
            with suppress(ValueError):
                shell.events.unregister(event, callback)
    _installed = None


def masked(
    value: Any, secrets: Sequence[str] | None = None, *, partial: bool = False, environ: Mapping[str, str] | None = None
) -> Any:
    """The kernel's hook for text masked before it is sent (see the module docstring). ``partial``: text still
    growing (a possible start of a key is left out); ``environ``: whose keys (default: the process's)."""
    return mask(value, secret_values(environ) if environ is not None else secrets, partial=partial)


def restored(edited: Any, original: Any) -> Any:
    """Arguments a person edited with every ``***`` they left as it was turned back into the value it hid."""
    return unmask(edited, original)


def print_masked(text: str, file: Any = None) -> None:
    """Print ``text`` with keys masked (it may be captured in the cell before it is sent)."""
    print(mask(text), file=file if file is not None else sys.stdout)


class PayloadGate:
    """Wraps one payload manager (see the module docstring)."""

    def __init__(self, manager: Any) -> None:
        self._lock = threading.Lock()
        self._cells: dict[int, bool] = {}  # thread running a user cell -> whether that cell ran a %%pi turn
        self._own: set[int] = set()  # threads where pi writes its own payload now
        self._dropped: list[str] = []
        self._passed: list[Any] = []  # the payloads let through, not read yet (compared by identity)
        self._manager = manager
        self._write = type(manager).write_payload.__get__(manager)
        self._read = type(manager).read_payload.__get__(manager)
        self.rewrap()
        manager.pi_payload_gate = self

    def rewrap(self) -> None:
        """Put the wrappers back if code replaced or deleted them (done at every cell's start and turn's end)."""
        if self._manager.__dict__.get("write_payload") != self.write_payload:
            self._manager.write_payload = self.write_payload
        if self._manager.__dict__.get("read_payload") != self.read_payload:
            self._manager.read_payload = self.read_payload

    def cell_started(self, *_info: Any) -> None:
        """IPython's ``pre_run_cell``: a user's cell runs on this thread."""
        self.rewrap()
        with self._lock:
            self._cells[threading.get_ident()] = False

    def mark_pi_cell(self) -> None:
        """The cell running on this thread runs a ``%%pi`` turn: only pi's own payload leaves it."""
        with self._lock:
            self._cells[threading.get_ident()] = True

    @contextmanager
    def own(self) -> Iterator[None]:
        """Payloads written on this thread meanwhile are pi's own (let through)."""
        ident = threading.get_ident()
        with self._lock:
            self._own.add(ident)
        try:
            yield
        finally:
            with self._lock:
                self._own.discard(ident)

    def write_payload(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        ident = threading.get_ident()
        with self._lock:
            allowed = ident in self._own or self._cells.get(ident) is False
            if allowed:
                self._passed.append(data)
            else:
                self._dropped.append(_source(data))
        return self._write(data, *args, **kwargs) if allowed else None

    def read_payload(self, *args: Any, **kwargs: Any) -> Any:
        """The kernel reads the cell's payloads at its end: the cell on this thread is over."""
        payloads = self._read(*args, **kwargs)
        with self._lock:
            self._cells.pop(threading.get_ident(), None)
            passed, self._passed = self._passed, []
            if not isinstance(payloads, list):
                return payloads
            kept = [payload for payload in payloads if any(payload is ours for ours in passed)]
            self._dropped += [_source(payload) for payload in payloads if not any(payload is ours for ours in kept)]
        return kept  # a payload written past the wrapper (the class's method called directly) is left out

    def take_dropped(self) -> list[str]:
        """The sources of the payloads dropped since the last call."""
        with self._lock:
            dropped, self._dropped = self._dropped, []
        return dropped


def _source(payload: Any) -> str:
    return str(payload.get("source", "?")) if isinstance(payload, dict) else "?"


def install_payload_gate(shell: Any) -> PayloadGate | None:
    """The gate of ``shell``'s payload manager, installed on first call; the calling thread runs a user's cell."""
    gate, manager = payload_gate(shell), getattr(shell, "payload_manager", None)
    if gate is not None:
        gate.rewrap()
    elif manager is not None:
        gate = PayloadGate(manager)
        gate.cell_started()
    return gate


def payload_gate(shell: Any) -> PayloadGate | None:
    """The gate installed on ``shell``'s payload manager, or ``None``."""
    gate = getattr(getattr(shell, "payload_manager", None), "__dict__", {}).get("pi_payload_gate")
    return gate if isinstance(gate, PayloadGate) else None


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
