"""What the connected front-end can do: render widgets, answer approvals over a comm.

Widgets: JupyterLab's and Notebook 7's widget manager (ipywidgets 8) opens a
``jupyter.widget.control`` comm when it connects to a kernel; nbclient,
papermill and consoles never do. ``FrontendTracker`` registers a target for
it that notes the fact and hands the comm to ipywidgets' own handler
(importing ipywidgets only then, so the kernel starts without it). Importing
ipywidgets re-registers its handler over ours, so ``ensure_targets`` puts ours
back (cheap; run before each cell). ``PI_WIDGETS=0/1`` overrides detection.

Several front-ends may share one kernel (JupyterLab and ``jupyter console
--existing``), so widgets are decided per request: every client stamps its
messages with its own ``header.session`` (JupyterLab: one per kernel
connection, the same for a notebook's cells and its widget manager's comms),
so the tracker remembers the sessions that opened the control comm and
``renders_widgets(session_id)`` answers for the client that sent a cell. The
widget manager closes the control comm right after loading the widget
states, so a session stays known until the kernel restarts.

Approvals: a front-end without widgets (a test client, another tool) opens a
``pi.approval`` comm. The kernel sends it every approval request and
resolution (``{"event": "requested" | "resolved", "request": {...}}``) and
takes decisions from it::

    {"action": "resolve", "tool_call_id": ID, "decision": "approve" | "always" | "deny",
     "reason": "...", "args": {...}}
    {"action": "pending"}     -> {"event": "pending", "requests": [...]}

Each message is answered with ``{"event": "ack", "tool_call_id": ID, "ok": bool}``
(``ok`` false: nothing was waiting under that id).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pi_kernel.kernel import outgoing

WIDGET_CONTROL_TARGET = "jupyter.widget.control"
APPROVAL_TARGET = "pi.approval"

Resolver = Callable[[str, dict[str, Any]], bool]
"""``resolver(tool_call_id, decision_fields) -> resolved?``"""
PendingLister = Callable[[], list[dict[str, Any]]]


def message_session(message: dict[str, Any] | None) -> str | None:
    """The client session that sent ``message`` (``header.session``), if it says."""
    header = (message or {}).get("header") or {}
    session_id = header.get("session")
    return str(session_id) if session_id else None


def request_session(kernel: Any) -> str | None:
    """The client session of the shell request the kernel is handling now (``None`` outside a kernel)."""
    get_parent = getattr(kernel, "get_parent", None)
    if get_parent is None:
        return None
    return message_session(get_parent("shell"))


def comm_manager() -> Any:
    try:
        from comm import get_comm_manager
    except ImportError:
        return None
    return get_comm_manager()


class FrontendTracker:
    """Registers the comm targets and remembers what opened them."""

    def __init__(self, resolver: Resolver, pending: PendingLister, widgets_override: bool | None = None) -> None:
        self.resolver = resolver
        self.pending = pending
        self.widgets_override = widgets_override
        """``True``/``False`` from ``PI_WIDGETS`` or config; ``None``: detect."""
        self.widget_control_opened = False
        """A widget manager connected (``jupyter.widget.control`` was opened)."""
        self.widget_sessions: set[str] = set()
        """The client sessions (``header.session``) whose widget manager opened the control comm."""
        self._approval_comms: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- what the session asks ----------------------------------------------------------------

    @property
    def widgets(self) -> bool:
        """Whether widgets render in some connected front-end (see ``renders_widgets`` for one request)."""
        return self.widgets_override if self.widgets_override is not None else self.widget_control_opened

    def renders_widgets(self, session_id: str | None) -> bool:
        """Whether widgets render in the client whose messages carry ``session_id``.

        ``None`` (no request to ask, as in a terminal IPython): whether any widget manager connected.
        """
        if self.widgets_override is not None:
            return self.widgets_override
        if session_id is None:
            return self.widget_control_opened
        with self._lock:
            return session_id in self.widget_sessions

    @property
    def approval_clients(self) -> int:
        with self._lock:
            return len(self._approval_comms)

    def broadcast(self, data: dict[str, Any]) -> None:
        """Send ``data`` to every open ``pi.approval`` comm."""
        with self._lock:
            comms = list(self._approval_comms.values())
        for comm in comms:
            try:
                comm.send(data)
            except Exception:  # noqa: BLE001 - a closed client must not break a turn
                self._forget(comm)

    # -- comm targets -------------------------------------------------------------------------

    def ensure_targets(self) -> None:
        manager = comm_manager()
        if manager is None or not hasattr(manager, "register_target"):
            return
        targets = getattr(manager, "targets", {})
        if targets.get(WIDGET_CONTROL_TARGET) is not self._open_widget_control:
            manager.register_target(WIDGET_CONTROL_TARGET, self._open_widget_control)
        if targets.get(APPROVAL_TARGET) is not self._open_approval:
            manager.register_target(APPROVAL_TARGET, self._open_approval)

    def remove_targets(self) -> None:
        manager = comm_manager()
        targets = getattr(manager, "targets", None)
        if not isinstance(targets, dict):
            return
        for name, handler in (
            (WIDGET_CONTROL_TARGET, self._open_widget_control),
            (APPROVAL_TARGET, self._open_approval),
        ):
            if targets.get(name) is handler:
                del targets[name]

    def _open_widget_control(self, comm: Any, msg: dict[str, Any]) -> None:
        session_id = message_session(msg)
        with self._lock:
            if session_id is not None:
                self.widget_sessions.add(session_id)
            self.widget_control_opened = True
        import ipywidgets  # registers ipywidgets' own targets (over ours: put ours back)

        self.ensure_targets()
        ipywidgets.Widget.handle_control_comm_opened(comm, msg)

    def _open_approval(self, comm: Any, msg: dict[str, Any]) -> None:
        outgoing.claim_comm(comm.comm_id)  # pi's comm: what it sends is masked
        with self._lock:
            self._approval_comms[comm.comm_id] = comm
        comm.on_msg(lambda message: self._on_approval_message(comm, message))
        comm.on_close(lambda _message: self._forget(comm))
        comm.send({"event": "pending", "requests": self.pending()})

    def _forget(self, comm: Any) -> None:
        with self._lock:
            self._approval_comms.pop(getattr(comm, "comm_id", ""), None)

    def _on_approval_message(self, comm: Any, message: dict[str, Any]) -> None:
        data = message.get("content", {}).get("data", {}) or {}
        action = data.get("action", "resolve")
        if action == "pending":
            comm.send({"event": "pending", "requests": self.pending()})
            return
        tool_call_id = str(data.get("tool_call_id", ""))
        try:
            ok = self.resolver(tool_call_id, data)
            error = None
        except (ValueError, TypeError) as problem:
            ok, error = False, str(problem)
        reply: dict[str, Any] = {"event": "ack", "tool_call_id": tool_call_id, "ok": ok}
        if error:
            reply["error"] = error
        comm.send(reply)
