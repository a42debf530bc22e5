"""Notebook views of the agent's work: live ipywidgets while a turn runs, static output after.

``make_widget_view(session, prompt, options)`` (in ``factory``) is what the kernel's ``%%pi``
runner calls. Names are loaded lazily so that ``pi_kernel.widgets.render``
and ``turn_state`` (used by the kernel's text view) never import ipywidgets.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "WidgetTurnView": "pi_kernel.widgets.turn_view",
    "make_widget_view": "pi_kernel.widgets.factory",
    "TurnState": "pi_kernel.widgets.turn_state",
    "StaticOutput": "pi_kernel.widgets.render",
    "render_static": "pi_kernel.widgets.render",
    "Throttle": "pi_kernel.widgets.throttle",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pi_kernel.widgets' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
