"""``make_widget_view``: the factory the kernel's ``%%pi`` runner calls (``pi_kernel.kernel.turn``).

``pi_kernel.widgets.turn_view`` is imported lazily, once ``ipywidgets`` is
known to import: it needs ``ipywidgets``, an optional dependency.

``make_widget_view(session, prompt, options)`` returns a displayed
``WidgetTurnView`` (the kernel's ``TurnView`` protocol), or ``None`` where
widgets cannot work (no ipywidgets, or no kernel request to attach output
to): the kernel then picks its text view. The widgets layer sits below the
kernel: ``ViewSession`` and ``ViewOptions`` say what it reads of the session
and of the cell's options (the kernel's ``PiSession`` and ``TurnOptions``
have it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pi_kernel.widgets.stream_output import KernelIopub

if TYPE_CHECKING:
    from pi_kernel.ai.models import Model
    from pi_kernel.tools.approval import ApprovalBroker
    from pi_kernel.tools.definition import ToolDefinition
    from pi_kernel.widgets.turn_view import WidgetTurnView


class ViewSession(Protocol):
    """What the widget view reads from the kernel's session."""

    @property
    def kernel(self) -> Any:
        """The running ipykernel kernel (untyped), or ``None`` outside one."""

    @property
    def model(self) -> Model | None: ...

    @property
    def broker(self) -> ApprovalBroker: ...

    def tool_definition(self, name: str) -> ToolDefinition | None: ...

    @property
    def agent(self) -> Steerable:
        """The session's agent: the view's message box steers it."""


class Steerable(Protocol):
    """The agent's methods the view's message box calls (``Agent.steer`` / ``Agent.follow_up``)."""

    def steer(self, message: Any) -> None: ...

    def follow_up(self, message: Any) -> None: ...


class ViewOptions(Protocol):
    """What the widget view reads from a cell's options."""

    @property
    def model(self) -> str | None:
        """``--model NAME`` for this cell only."""


def make_widget_view(
    session: ViewSession, prompt: str = "", options: ViewOptions | None = None, *, interval: float = 0.05
) -> WidgetTurnView | None:
    """A displayed live view of the turn, or ``None`` where widgets cannot work (the caller falls back)."""
    sender = KernelIopub.of(session.kernel) or KernelIopub.current()
    if sender is None or not _ipywidgets_importable():
        return None
    from pi_kernel.widgets.turn_view import WidgetTurnView

    model = session.model
    cell_model = options.model if options is not None else None
    view = WidgetTurnView(
        sender,
        broker=session.broker,
        definitions=session.tool_definition,
        model=cell_model or (model.id if model is not None else ""),
        provider="" if cell_model else (model.provider if model is not None else ""),
        interval=interval,
        steer=session.agent.steer,
        follow_up=session.agent.follow_up,
    )
    view.state.context_window = model.resolved_context_window if model is not None else None
    view.display()
    return view


def _ipywidgets_importable() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
