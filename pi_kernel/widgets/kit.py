"""``WidgetKit``: makes a view's widgets cheaply and remembers them, to close them all at the end.

Every ipywidgets widget made with default ``layout`` and ``style`` opens two
more comms (about 1.4 KB of setup per widget, measured); the kit shares one
``Layout`` and one style object per kind across the whole view. The only
module of the package that imports ipywidgets at import time.

Nothing here masks keys: the views set widget values drawn from the view
model (``turn_state``), masked as text entered it; every comm message is
masked again on its way out (``pi_kernel.kernel.outgoing``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets
from ipywidgets.widgets.widget_button import ButtonStyle
from ipywidgets.widgets.widget_string import HTMLStyle, TextStyle

CARD_LAYOUT = {
    "border": "1px solid rgba(127,127,127,.35)",
    "padding": "2px 8px 4px 8px",
    "margin": "4px 0",
}


class WidgetKit:
    def __init__(self) -> None:
        self.created: list[ipywidgets.Widget] = []
        self._shared: dict[str, Any] = {}
        """Layouts and styles, made on first use (a text-only turn never needs a button style)."""

    @property
    def layout(self) -> ipywidgets.Layout:
        return self._once("layout", ipywidgets.Layout)

    @property
    def card_layout(self) -> ipywidgets.Layout:
        return self._once("card", lambda: ipywidgets.Layout(**CARD_LAYOUT))

    @property
    def wide_layout(self) -> ipywidgets.Layout:
        """The full width of the parent box: ``auto`` stretches inside its margins (``100%`` plus the widget's
        margin overflows the box, which clips its right border)."""
        return self._once("wide", lambda: ipywidgets.Layout(width="auto"))

    def html(self, value: str = "") -> ipywidgets.HTML:
        return self._keep(ipywidgets.HTML(value, layout=self.layout, style=self._once("html", HTMLStyle)))

    def output(self) -> ipywidgets.Output:
        return self._keep(ipywidgets.Output(layout=self.layout))

    def vbox(self, children: Sequence[Any] = (), *, card: bool = False) -> ipywidgets.VBox:
        return self._keep(ipywidgets.VBox(list(children), layout=self.card_layout if card else self.layout))

    def hbox(self, children: Sequence[Any] = ()) -> ipywidgets.HBox:
        return self._keep(ipywidgets.HBox(list(children), layout=self.layout))

    def accordion(self, child: Any, title: str) -> ipywidgets.Accordion:
        """A collapsed section with one child."""
        return self._keep(ipywidgets.Accordion([child], titles=(title,), selected_index=None, layout=self.layout))

    def button(self, description: str, kind: str = "", tooltip: str = "") -> ipywidgets.Button:
        return self._keep(
            ipywidgets.Button(
                description=description,
                button_style=kind,
                tooltip=tooltip or description,
                layout=self.layout,
                style=self._once("button", ButtonStyle),
            )
        )

    def text(self, placeholder: str) -> ipywidgets.Text:
        return self._keep(
            ipywidgets.Text(placeholder=placeholder, layout=self.wide_layout, style=self._once("text", TextStyle))
        )

    def textarea(self, value: str, rows: int) -> ipywidgets.Textarea:
        return self._keep(
            ipywidgets.Textarea(value, rows=rows, layout=self.wide_layout, style=self._once("text", TextStyle))
        )

    def close_all(self) -> None:
        """Close every widget made here (views first, the shared layouts and styles last)."""
        for widget in reversed(self.created):
            widget.close()
        self.created.clear()
        self._shared.clear()

    def _once(self, name: str, make: Callable[[], Any]) -> Any:
        shared = self._shared.get(name)
        if shared is None:
            shared = self._shared[name] = self._keep(make())
        return shared

    def _keep(self, widget: Any) -> Any:
        self.created.append(widget)
        return widget
