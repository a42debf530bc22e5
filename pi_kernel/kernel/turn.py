"""One ``%%pi`` turn and its two ends: the ``Turn`` (its options, view and outcome), the front-end it answers, the
interrupt that stops it.

This module owns what holds for one cell and what a turn needs to know of
who is on the other end; ``cell_runner.run_turn`` runs it.

**The Turn.** The ``PiSession`` lives as long as the kernel (agent, tool
registry, settings, conversation). A ``Turn`` lives as long as one cell:
its options, the model and turn limit it runs with (per-run overrides of
``Agent.prompt``, never set on the agent), its view, who can answer its
approvals (``widgets``, ``stdin``, ``blocking``), the ``execute_request`` it
answers (``parent``), its cancel flag, and the ``ToolContext`` its tools get
(``context``: the session's, with this turn's working directory, undo
journal and notebook document). ``run_turn`` makes it and hands it on
explicitly: to the approval gate, to the request hook, to the tools of this
run, and its context, cell and client to ``PiSession.lend_notebook`` (which
keeps that context's notebook document while a front-end connects and
leaves). Otherwise the session knows only whether a turn runs and how to
stop it (``busy``, ``interrupt``, ``reassert_busy``); nothing of a turn is
left on the session when it ends.

**Its view** (``TurnView``). The cell runner calls a view from the event
loop's thread only: ``handle_event`` for every agent event (it must be quick:
the agent awaits its listeners), ``handle_approval`` when a tool call starts
or stops waiting for a person, and ``finish`` once with the ``TurnOutcome``.
``text_view.make_turn_view`` picks the widget view when widgets render in the
front-end that sent the cell (``FrontendTracker.renders_widgets``) and
``pi_kernel.widgets`` provides ``make_turn_view``; otherwise the plain-text
view (``text_view``), which ends in the same static output and is what
consoles and headless runs get. A session may set ``session.view_factory`` (a
``TurnViewFactory``) to use another view. A view reads of its session only
what ``ViewHost`` names (``PiSession`` has it).

**Front-ends** (``FrontendTracker``). Widgets: JupyterLab's and Notebook 7's
widget manager (ipywidgets 8) opens a ``jupyter.widget.control`` comm when it
connects; nbclient, papermill and consoles never do. The tracker registers a
target for it that notes the fact and hands the comm to ipywidgets' own
handler (importing ipywidgets only then, so the kernel starts without it).
Importing ipywidgets re-registers its handler over ours, so ``ensure_targets``
puts ours back (cheap; run before each cell). ``PI_WIDGETS=0/1`` overrides
detection. Several front-ends may share one kernel (JupyterLab and ``jupyter
console --existing``), so widgets are decided per request: every client
stamps its messages with its own ``header.session``, the tracker remembers the
sessions that opened the control comm, and ``renders_widgets(session_id)``
answers for the client that sent a cell (a session stays known until the
kernel restarts: the widget manager closes the control comm right away).

Approvals: a front-end without widgets (a test client, another tool) opens a
``pi.approval`` comm. The kernel sends it every approval request and
resolution (``{"event": "requested" | "resolved", "request": {...}}``) and
takes decisions from it::

    {"action": "resolve", "tool_call_id": ID, "decision": "approve" | "always" | "deny",
     "reason": "...", "args": {...}}
    {"action": "pending"}     -> {"event": "pending", "requests": [...]}

Each message is answered with ``{"event": "ack", "tool_call_id": ID, "ok": bool}``
(``ok`` false: nothing was waiting under that id).

**Interrupts** (``interrupt_hook``). ipykernel runs an async cell under its
own SIGINT handler, which cancels the cell's task from a callback
(``ipkernel._cancel_on_sigint``). Two problems for an agent turn: cancelling
mid-flight loses the bookkeeping that gives every tool call exactly one
result, and the callback is added without waking the event loop, so an
interrupt during a pending ``await`` lands only when something else wakes the
loop (ipykernel issue #881). While a turn runs, ``interrupt_hook`` replaces
that handler: the first SIGINT schedules ``on_interrupt`` (abort the agent,
deny pending approvals) on the loop with ``call_soon_threadsafe``, which also
wakes it; the turn then ends on its own with an "aborted" message. A second
SIGINT falls back to the previous handler (ipykernel's cancel) for a turn that
does not stop. The handler only schedules work: a signal handler runs between
two bytecodes of whatever the main thread was doing.

This module loads at kernel start: the agent and tool layers are named for
types only.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pi_kernel.kernel import outgoing

if TYPE_CHECKING:  # the agent and tools layers load with the first turn, not at kernel start
    from pi_kernel.agent.types import AgentEvent, AgentTool
    from pi_kernel.ai import Message, Model
    from pi_kernel.tools.approval import ApprovalBroker, ApprovalRequest
    from pi_kernel.tools.definition import ToolContext, ToolDefinition
    from pi_kernel.tools.turn_journal import TurnJournal
    from pi_kernel.widgets.factory import Steerable


TurnStatus = Literal["done", "interrupted", "error"]


@dataclass
class TurnOptions:
    """The options of one ``%%pi`` cell."""

    model: str | None = None
    """``--model NAME`` for this cell only."""
    no_tools: bool = False
    """``--no-tools``: no tools offered to the model in this cell."""
    max_turns: int | None = None
    """``--max-turns N``: stop after N model requests."""
    approve: str | None = None
    """``--approve MODE``: the approval mode for this cell only."""
    cells: bool = False
    """``--cells``: the ``python`` code of this turn comes back as a new cell below."""
    thinking: str | None = None
    """``--thinking off|low|medium|high``: the thinking effort for this cell only."""
    tool: str | None = None
    """``--tool NAME``: the model's first request must call tool NAME (``any``: some tool)."""


@dataclass
class TurnOutcome:
    status: TurnStatus
    messages: list[Message] = field(default_factory=list)
    """The messages this cell added (its prompt, answers, tool results)."""
    error: str | None = None
    """For ``error``: what went wrong (keys masked)."""


class TurnView(Protocol):
    def handle_event(self, event: AgentEvent) -> None:
        """Every agent event of the turn."""

    def handle_approval(self, kind: str, request: ApprovalRequest) -> None:
        """``kind`` is ``requested`` or ``resolved``."""

    def finish(self, outcome: TurnOutcome) -> object:
        """The turn ended; replace live parts with static output (what it returns is not used)."""


class ViewHost(Protocol):
    """What a turn's view reads of its session (the widget view's ``ViewSession`` is a part of it)."""

    @property
    def kernel(self) -> Any:
        """The running ipykernel kernel (untyped), or ``None`` outside one."""

    @property
    def shell(self) -> Any: ...

    @property
    def model(self) -> Model | None: ...

    @property
    def broker(self) -> ApprovalBroker: ...

    def tool_definition(self, name: str) -> ToolDefinition | None: ...

    @property
    def agent(self) -> Steerable:
        """The session's agent: a view's message box steers the running turn through it."""


TurnViewFactory = Callable[[ViewHost, str, TurnOptions], TurnView | None]
"""Makes the view of one turn (session, prompt, options); ``None`` where it cannot work."""


@dataclass
class Turn:
    """The ``%%pi`` cell that runs: see the module docstring."""

    options: TurnOptions
    cell_id: str | None
    model: Model
    """The model of this turn (``--model``, else the session's)."""
    max_turns: int | None
    """Model requests this turn may make (``--max-turns``, else the setting); ``None``: no limit."""
    view: TurnView | None = None
    allow_stdin: bool = False
    raw_input: Callable[[str], str] | None = None
    """The front-end's ``input()`` for this cell, when it allows stdin."""
    widgets: bool = False
    """The front-end that sent the cell renders widgets (its approvals are answered there)."""
    blocking: bool = False
    """The cell blocks the shell (IPython outside a kernel with ``%autoawait off``: the turn runs to its end on
    IPython's loop, ``cell_runner.run_cell_sync``): no click or comm message reaches it."""
    parent: dict[str, Any] | None = None
    """The cell's ``execute_request`` (in a kernel): the parent of the ``busy`` that ``reassert_busy`` sends."""
    interrupted: bool = False
    journal: TurnJournal | None = None
    """The turn's undo journal (``undo``): the tools record what they change into it."""
    context: ToolContext | None = None
    """What this turn's tools are given: the session's ``ToolContext`` with this turn's ``cwd`` and ``journal``, its
    ``notebook`` the bridge's document for this turn's cell and client (``PiSession.lend_notebook``)."""
    tools: dict[str, AgentTool] = field(default_factory=dict)
    """The registry's tools as this turn runs them (with ``context``), by name (``cell_runner.turn_tool``)."""

    def cancel(self) -> None:
        """An interrupt reached this turn (the session also aborts the agent and denies waiting approvals)."""
        self.interrupted = True

    @property
    def stdin(self) -> Callable[[str], str] | None:
        """Who asks on stdin for this turn, if anyone may."""
        return self.raw_input if self.allow_stdin else None


# ---------------------------------------------------------------- interrupts


def _wake() -> None:
    """Nothing: scheduling it thread-safely is what wakes the selector."""


@contextmanager
def interrupt_hook(on_interrupt: Callable[[], None], loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Route SIGINT to ``on_interrupt`` (run on ``loop``) while the block runs.

    Outside the main thread (a subshell) signals cannot be handled: the hook is a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    interrupts = 0

    def handler(signum: int, frame: FrameType | None) -> Any:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            loop.call_soon_threadsafe(on_interrupt)
            return None
        try:
            if callable(previous):
                return previous(signum, frame)
            raise KeyboardInterrupt
        finally:
            loop.call_soon_threadsafe(_wake)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------- front-ends

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


def shell_request(kernel: Any) -> dict[str, Any] | None:
    """The shell request the kernel handles now (public ``get_parent``, per cell and subshell): a ``%%pi``
    cell's own ``execute_request``; ``None`` outside a kernel."""
    parent = kernel.get_parent("shell") if hasattr(kernel, "get_parent") else None
    return parent if isinstance(parent, dict) and parent.get("header") else None


def request_session(kernel: Any) -> str | None:
    """The client session of the shell request the kernel is handling now (``None`` outside a kernel)."""
    return message_session(shell_request(kernel))


def comm_manager() -> Any:
    try:
        from comm import get_comm_manager
    except ImportError:
        return None
    return get_comm_manager()


class FrontendTracker:
    """Registers the comm targets and remembers what opened them (see the module docstring).

    Its comm handlers run on the shell's thread; the set and dict it keeps are read and changed one call at a
    time (atomic under the GIL), so it needs no lock."""

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

    @property
    def widgets(self) -> bool:
        """Whether widgets render in some connected front-end (see ``renders_widgets`` for one request)."""
        return self.widgets_override if self.widgets_override is not None else self.widget_control_opened

    def renders_widgets(self, session_id: str | None) -> bool:
        """Whether widgets render in the client whose messages carry ``session_id``.

        ``None`` (no request to ask, as in a terminal IPython): whether any widget manager connected.
        """
        if self.widgets_override is not None or session_id is None:
            return self.widgets
        return session_id in self.widget_sessions

    @property
    def approval_clients(self) -> int:
        return len(self._approval_comms)

    def broadcast(self, data: dict[str, Any]) -> None:
        """Send ``data`` to every open ``pi.approval`` comm."""
        for comm in list(self._approval_comms.values()):
            try:
                comm.send(data)
            except Exception:  # noqa: BLE001 - a closed client must not break a turn
                self._forget(comm)

    def _targets(self) -> dict[str, Callable[[Any, dict[str, Any]], None]]:
        return {WIDGET_CONTROL_TARGET: self._open_widget_control, APPROVAL_TARGET: self._open_approval}

    def ensure_targets(self) -> None:
        manager = comm_manager()
        if manager is None or not hasattr(manager, "register_target"):
            return
        registered = getattr(manager, "targets", {})
        for name, handler in self._targets().items():
            if registered.get(name) != handler:  # ``==``: a bound method is a new object at each access
                manager.register_target(name, handler)

    def remove_targets(self) -> None:
        registered = getattr(comm_manager(), "targets", None)
        if not isinstance(registered, dict):
            return
        for name, handler in self._targets().items():
            if registered.get(name) == handler:
                del registered[name]

    def _open_widget_control(self, comm: Any, msg: dict[str, Any]) -> None:
        session_id = message_session(msg)
        if session_id is not None:
            self.widget_sessions.add(session_id)
        self.widget_control_opened = True
        import ipywidgets  # registers ipywidgets' own targets (over ours: put ours back)

        self.ensure_targets()
        ipywidgets.Widget.handle_control_comm_opened(comm, msg)

    def _open_approval(self, comm: Any, msg: dict[str, Any]) -> None:
        outgoing.claim_comm(comm.comm_id)  # pi's comm: what it sends is masked
        self._approval_comms[comm.comm_id] = comm
        comm.on_msg(lambda message: self._on_approval_message(comm, message))
        comm.on_close(lambda _message: self._forget(comm))
        comm.send({"event": "pending", "requests": self.pending()})

    def _forget(self, comm: Any) -> None:
        self._approval_comms.pop(getattr(comm, "comm_id", ""), None)

    def _on_approval_message(self, comm: Any, message: dict[str, Any]) -> None:
        data = message.get("content", {}).get("data", {}) or {}
        if data.get("action", "resolve") == "pending":
            comm.send({"event": "pending", "requests": self.pending()})
            return
        tool_call_id = str(data.get("tool_call_id", ""))
        reply: dict[str, Any] = {"event": "ack", "tool_call_id": tool_call_id}
        try:
            reply["ok"] = self.resolver(tool_call_id, data)
        except (ValueError, TypeError) as problem:
            reply.update(ok=False, error=str(problem))
        comm.send(reply)
