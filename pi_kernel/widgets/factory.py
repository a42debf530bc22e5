"""``make_turn_view``: the factory the kernel's ``%%pi`` runner calls (``pi_kernel.kernel.views``).

``pi_kernel.widgets.turn_view`` is imported lazily, once ``ipywidgets`` is
known to import: it needs ``ipywidgets``, an optional dependency.

``make_turn_view(session, prompt, options)`` returns a displayed ``TurnView``
with the kernel's ``TurnView`` protocol: ``handle_event(event)``,
``handle_approval(kind, request)`` (both called on the event loop's thread)
and ``finish(outcome)``. It reads from the session: ``session.broker`` (the
buttons resolve there), ``session.tool_definition(name)`` (labels and render
hooks), ``session.model`` and ``options.model`` (the footer's model until the
first answer names it), and ``session.kernel`` (its iopub socket and the
request being executed). Where widgets cannot work (no ipywidgets, or no
kernel request to attach output to) it returns ``None`` and the kernel picks
its text view: the widgets layer sits above the kernel's views, never below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pi_kernel.widgets.stream_output import KernelIopub

if TYPE_CHECKING:
    from pi_kernel.widgets.turn_view import TurnView


def make_turn_view(session: Any, prompt: str = "", options: Any = None, *, interval: float = 0.05) -> TurnView | None:
    """A displayed live view of the turn, or ``None`` where widgets cannot work (the caller falls back)."""
    sender = _sender(session)
    if sender is None or not _ipywidgets_importable():
        return None
    from pi_kernel.widgets.turn_view import TurnView

    model = getattr(session, "model", None)
    model_name = getattr(options, "model", None) or getattr(model, "id", "") or ""
    provider = "" if getattr(options, "model", None) else getattr(model, "provider", "") or ""
    view = TurnView(
        sender,
        broker=getattr(session, "broker", None),
        definitions=getattr(session, "tool_definition", None),
        model=str(model_name),
        provider=str(provider),
        interval=interval,
    )
    view.state.context_window = getattr(model, "resolved_context_window", None)
    view.display()
    return view


def _sender(session: Any) -> KernelIopub | None:
    kernel = getattr(session, "kernel", None)
    if kernel is not None and hasattr(kernel, "get_parent"):
        parent = kernel.get_parent()
        if parent and parent.get("header", {}).get("msg_id"):
            return KernelIopub(kernel, parent)
    return KernelIopub.current()


def _ipywidgets_importable() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
