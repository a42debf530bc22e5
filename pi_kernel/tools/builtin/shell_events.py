"""Shell event callbacks the agent's code registered: removed when its run ends.

Code the ``python`` tool (or ``run_cells``) runs could register an IPython
event callback (``get_ipython().events.register('post_run_cell', ...)``) that
then runs in every later cell of the user: planting a cell (``set_next_input``),
reading the namespace, or unregistering pi's own callbacks. ``kept_events``
snapshots the shell's ``events`` callbacks around one run and puts them back as
they were afterwards (also when the code replaced ``shell.events``); the names of
the callbacks it took away are listed for the tool result, so the model and the
person see that the code tried.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pi_kernel.tools.builtin.python_capture import current_shell


def _callbacks(events: Any) -> dict[str, list[Any]] | None:
    callbacks = getattr(events, "callbacks", None)
    return callbacks if isinstance(callbacks, dict) else None


def _name(callback: Any) -> str:
    try:
        return str(getattr(callback, "__qualname__", None) or type(callback).__name__)
    except Exception:  # noqa: BLE001 - a hostile object's attribute may raise
        return "?"


@contextmanager
def kept_events(removed: list[str]) -> Iterator[None]:
    """Around one run of the agent's code: afterwards the shell's event callbacks are as before; each one
    the code added is appended to ``removed`` as ``"event: name"``."""
    shell = current_shell()
    events: Any = getattr(shell, "events", None) if shell is not None else None
    callbacks = _callbacks(events)
    if callbacks is None:
        yield
        return
    before = {event: list(registered) for event, registered in callbacks.items()}
    try:
        yield
    finally:
        if getattr(shell, "events", None) is not events:
            removed.append("shell.events (replaced)")
            shell.events = events
        now = _callbacks(events) or {}
        for event, registered in list(now.items()):
            known = {id(callback) for callback in before.get(event, [])}
            removed.extend(f"{event}: {_name(callback)}" for callback in list(registered) if id(callback) not in known)
        callbacks.clear()
        callbacks.update({event: list(kept) for event, kept in before.items()})
        if now is not callbacks:
            events.callbacks = callbacks


def removed_note(removed: list[str]) -> str:
    """The line the tool result gets when callbacks were removed (``""`` when none)."""
    if not removed:
        return ""
    return (
        f"[pi removed what this code registered as notebook event callbacks ({', '.join(removed)}): "
        "agent code may not run in the user's later cells]"
    )
