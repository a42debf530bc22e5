"""``SteerBox``: the live turn view's message box, to steer a running turn.

Enter sends the text as a steering message (``steer``: the agent sees it after the tool calls running
now), the "Queue" button as a follow-up (``follow_up``: after the turn would have ended). Both are the
agent's methods, handed in by whoever builds the view; the box calls nothing else. The message shows
in the turn's transcript when the agent takes it (its ``message_start``), as any user message does;
until then the box says it is waiting.

Threads: a submit or click arrives on whatever thread delivers the comm message (a subshell's, say);
``steer`` / ``follow_up`` are safe from any thread, and the box only changes its own widgets.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from pi_kernel.widgets.kit import WidgetKit
from pi_kernel.widgets.render import MUTED

PLACEHOLDER = "Message to the agent: Enter steers it (seen after the running tool calls)"


class SteerBox:
    def __init__(self, kit: WidgetKit, steer: Callable[[str], Any], follow_up: Callable[[str], Any]) -> None:
        self._steer = steer
        self._follow_up = follow_up
        self.text = kit.text(PLACEHOLDER)
        self.queue = kit.button("Queue", "", "Send it as a follow-up, after the turn ends")
        self.note = kit.html("")
        self.widget = kit.vbox([kit.hbox([self.text, self.queue]), self.note])
        self.text.on_msg(self._on_message)  # Enter: ipywidgets' "submit" event (on_submit is deprecated)
        self.queue.on_click(lambda _button: self.send("follow-up"))

    def send(self, kind: str) -> bool:
        """Send the box's text as a ``steering`` message or a ``follow-up``; returns whether there was text."""
        text = self.text.value.strip()
        if not text:
            return False
        (self._steer if kind == "steering" else self._follow_up)(text)
        self.text.value = ""
        when = "after the running tool calls" if kind == "steering" else "when the turn ends"
        self.note.value = f'<div style="{MUTED}">Sent ({kind}, seen {when}): {escape(text)}</div>'
        return True

    def _on_message(self, _widget: Any, content: dict[str, Any], _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "submit":
            self.send("steering")
