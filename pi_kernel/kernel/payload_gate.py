"""The payload gate: which execute-reply payloads (a new cell, a pager, exit) may leave the kernel.

An execute reply's payloads come from ``shell.payload_manager``: whatever called
``write_payload`` (``set_next_input``, the pager, ``exit``) before the kernel read
them at the cell's end. Code the agent ran could write one later, out of sight:
from a ``post_run_cell`` callback it registered (which fires after the ``%%pi``
cell's turn and in every later cell; the ``python`` tool also removes such
callbacks, see ``tools.builtin.python_capture``), from a thread (``threading.Timer``)
or from a callback on the event loop between cells. So the gate wraps the
payload manager's ``write_payload`` and ``read_payload`` of the shell and lets a
payload through only when

- pi itself writes it (``PayloadGate.own``: the ``%%pi --cells`` cell), or
- it is written on the thread of a user's cell that is running now (between
  that cell's ``pre_run_cell`` and the kernel's reading of its payloads) and
  that cell ran no ``%%pi`` turn (``mark_pi_cell``).

Everything else is dropped; its ``source`` is kept for ``take_dropped`` (the
turn's notice says what the agent's code asked for).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


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
            if not allowed:
                self._dropped.append(_source(data))
            else:
                self._passed.append(data)
        if allowed:
            return self._write(data, *args, **kwargs)
        return None

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
    """The gate of ``shell``'s payload manager, installed on first call (``None``: the shell has none).
    The calling thread counts as running a user's cell (``%load_ext pi_kernel`` runs in one)."""
    manager = getattr(shell, "payload_manager", None)
    if manager is None:
        return None
    gate = manager.__dict__.get("pi_payload_gate")
    if isinstance(gate, PayloadGate):
        gate.rewrap()
        return gate
    gate = PayloadGate(manager)
    gate.cell_started()
    return gate


def payload_gate(shell: Any) -> PayloadGate | None:
    """The gate installed on ``shell``'s payload manager, or ``None``."""
    manager = getattr(shell, "payload_manager", None)
    gate = getattr(manager, "__dict__", {}).get("pi_payload_gate") if manager is not None else None
    return gate if isinstance(gate, PayloadGate) else None
