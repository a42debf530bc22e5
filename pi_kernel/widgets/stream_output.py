"""Append-only text into ``Output`` widgets: the way a stream costs its own size, not its square.

A widget's state travels whole: setting a 40 KB ``value`` per token resends
it every time (the field notes measured 4,177x the answer). An ``Output``
widget, though, takes the cell's ordinary iopub messages: the front end hands
every message whose parent is the cell's request to the ``Output`` widget
whose ``msg_id`` names that request. So the live text goes out as ``stream``
messages that carry only the new characters (``benchmarks/widget_bytes.py`` and
``benchmarks/view_scaling.py`` measure it against setting ``value``).

One ``Output`` widget captures at a time (``OutputRouter``), and only while it
is being written to, so stray output of the cell still reaches the cell. The
messages are sent with the cell's parent header captured when the view was
made, because a button callback or a timer may run under another parent.
Nothing here imports ipywidgets; widgets are duck-typed (``msg_id``).

The text written here is the view model's (``turn_state``), masked as it
entered it: streamed pieces passed one ``MaskedStream`` there, so a key
split across two deltas was caught before it reached a view (every message
is masked again on its way out, ``kernel.outgoing``).
"""

from __future__ import annotations

from typing import Any, Protocol

from pi_kernel.widgets.turn_state import appended

_TOPICS = {
    "stream": b"stream.stdout",
    "display_data": b"display_data",
    "update_display_data": b"display_data",
    "clear_output": b"clear_output",
}


class IopubSender(Protocol):
    """Sends iopub messages as children of one cell's request."""

    @property
    def parent_msg_id(self) -> str: ...

    def send(self, msg_type: str, content: dict[str, Any]) -> None: ...


class KernelIopub:
    """The running kernel's iopub socket, with a fixed parent header."""

    def __init__(self, kernel: Any, parent: dict[str, Any]) -> None:
        self._kernel = kernel
        self._parent = parent

    @classmethod
    def of(cls, kernel: Any) -> KernelIopub | None:
        """``kernel``'s iopub under the request it is executing, if any."""
        parent = kernel.get_parent() if kernel is not None and hasattr(kernel, "get_parent") else None
        return cls(kernel, parent) if parent and parent.get("header", {}).get("msg_id") else None

    @classmethod
    def current(cls) -> KernelIopub | None:
        """The kernel this code runs in and the request being executed, if any."""
        try:
            from IPython import get_ipython
        except ImportError:
            return None
        return cls.of(getattr(get_ipython(), "kernel", None))

    @property
    def parent_msg_id(self) -> str:
        return str(self._parent["header"]["msg_id"])

    def send(self, msg_type: str, content: dict[str, Any]) -> None:
        self._kernel.session.send(
            self._kernel.iopub_socket, msg_type, content, parent=self._parent, ident=_TOPICS.get(msg_type)
        )


class OutputRouter:
    """Gives the cell's output to one ``Output`` widget at a time (by its ``msg_id``)."""

    def __init__(self, sender: IopubSender) -> None:
        self.sender = sender
        self.active: Any = None

    def claim(self, widget: Any) -> None:
        if self.active is widget:
            return
        self.release()
        widget.msg_id = self.sender.parent_msg_id
        self.active = widget

    def release(self) -> None:
        if self.active is not None:
            self.active.msg_id = ""
            self.active = None


class StreamOutput:
    """An ``Output`` widget written append-only, bounded to its last ``limit`` characters."""

    def __init__(self, widget: Any, router: OutputRouter, *, limit: int | None = None, keep: int = 16_384) -> None:
        self.widget = widget
        self._router = router
        self._limit = limit
        self._keep = keep
        self._source = ""
        """The full text last shown (``sync``), to tell an append from a rewrite."""
        self._shown = 0
        """Characters sent since the last clear."""

    def append(self, text: str) -> None:
        if not text:
            return
        self._router.claim(self.widget)
        self._router.sender.send("stream", {"name": "stdout", "text": text})
        self._shown += len(text)

    def sync(self, text: str) -> None:
        """Show ``text`` (the whole current output): sends only what was appended since last time.

        ``text`` may also be a rolling tail (``bash`` keeps the last 50 KB): when its start was cut
        but the end of the previous text is found in it exactly once, only the rest is appended.
        """
        if text == self._source:
            return
        added = appended(self._source, text)
        if added is not None and (self._limit is None or self._shown + len(added) <= self._limit):
            self.append(added)
        else:
            tail = text[-self._keep :]
            skipped = len(text) - len(tail)
            self.clear(wait=True)
            self.append((f"… {skipped:,} earlier characters not shown\n" if skipped else "") + tail)
        self._source = text

    def show(self, bundle: dict[str, Any]) -> None:
        """Replace what is shown by one rich output (a MIME bundle)."""
        self.clear(wait=True)
        self._router.claim(self.widget)
        self._router.sender.send("display_data", {"data": bundle, "metadata": {}, "transient": {}})

    def clear(self, *, wait: bool = False) -> None:
        self._router.claim(self.widget)
        self._router.sender.send("clear_output", {"wait": wait})
        self._shown = 0
        self._source = ""

    def done(self) -> None:
        """No more writes for now: let the cell have its output back."""
        if self._router.active is self.widget:
            self._router.release()
