"""Which view shows a turn: the widget view where widgets render, else the plain-text view.

``pi_kernel.widgets`` is imported lazily, on first use (``widget_view_factory``):
it is optional for a front-end without widgets, and costs time a kernel should
not spend at start.
"""

from __future__ import annotations

from typing import Protocol

from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.text_view import TextTurnView
from pi_kernel.kernel.turn import FrontendTracker
from pi_kernel.kernel.views import TurnOptions, TurnView, TurnViewFactory, ViewHost


class ViewChooser(ViewHost, Protocol):
    """What the choice reads of the session (``PiSession`` has it)."""

    @property
    def view_factory(self) -> TurnViewFactory | None: ...

    @property
    def frontend(self) -> FrontendTracker: ...

    @property
    def settings(self) -> PiSettings:
        """``save_thinking``: whether the view's saved output keeps the model's thinking."""


def widget_view_factory() -> TurnViewFactory | None:
    """``pi_kernel.widgets.make_widget_view`` when the widgets package provides it, else ``None``."""
    try:
        from pi_kernel.widgets.factory import make_widget_view
    except ImportError:
        return None
    return make_widget_view


def make_turn_view(session: ViewChooser, prompt: str, options: TurnOptions, widgets: bool | None = None) -> TurnView:
    """The view for one turn: ``session.view_factory``, else widgets where they render, else text.

    ``widgets``: whether the requesting front-end renders widgets (``None``: any front-end connected so far).
    A factory returns ``None`` where its view cannot work (the widgets' with no kernel request to attach
    to, say): the text view is chosen here, the one fallback for every front-end.
    """
    view: TurnView | None = None
    if session.view_factory is not None:
        view = session.view_factory(session, prompt, options)
    elif session.frontend.widgets if widgets is None else widgets:
        factory = widget_view_factory()
        if factory is not None:
            view = factory(session, prompt, options)
    if view is None:
        view = TextTurnView(session, prompt, options)
    state, settings = getattr(view, "state", None), getattr(session, "settings", None)
    if state is not None and settings is not None and hasattr(state, "saves_thinking"):
        state.saves_thinking = settings.save_thinking
    return view
