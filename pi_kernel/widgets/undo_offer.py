"""``UndoOffer``: the "Undo this turn" button under a finished turn's static output.

Shown (a display of its own, under a display id) when the kernel says the turn changed something it can
revert. A click calls ``undo(show)``, the kernel's undo of that turn (what ``%pi undo`` does), on the
event loop's thread (the click may arrive on another); ``show(text)`` replaces the button by the report,
as plain text, and closes its widgets. Without a click the button stays until the kernel replaces it
(``retire``): a saved notebook keeps the text/plain line naming ``%pi undo``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from pi_kernel.widgets.kit import WidgetKit
from pi_kernel.widgets.render import MUTED
from pi_kernel.widgets.stream_output import IopubSender

logger = logging.getLogger("pi_kernel.widgets")

PLAIN_TEXT = "%pi undo reverts what this turn changed (variables, files, cells)"


class UndoOffer:
    def __init__(
        self,
        sender: IopubSender,
        undo: Callable[[Callable[[str], None]], Any],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._sender = sender
        self._undo = undo
        self._loop = loop
        self._kit = WidgetKit()
        self.button = self._kit.button(
            "Undo this turn", "warning", "Revert what this turn changed: variables, files, notebook cells"
        )
        note = self._kit.html(f'<span style="{MUTED}">or run <code>%pi undo</code></span>')
        self.widget = self._kit.hbox([self.button, note])
        self.display_id = uuid.uuid4().hex
        self.done = False
        self.button.on_click(lambda _button: self.click())

    def display(self) -> None:
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/plain"] = PLAIN_TEXT
        content = {"data": bundle, "metadata": {}, "transient": {"display_id": self.display_id}}
        self._sender.send("display_data", content)

    def click(self) -> None:
        """The button: undo on the loop's thread (or here, without a loop)."""
        if self.done:
            return
        self.done = True
        self.button.disabled = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._run)
        else:
            self._run()

    def retire(self, text: str = PLAIN_TEXT) -> None:
        """Replace the button by ``text`` (the undo's report, or the plain line) and close its widgets."""
        content = {"data": {"text/plain": text}, "metadata": {}, "transient": {"display_id": self.display_id}}
        self._sender.send("update_display_data", content)
        self._kit.close_all()

    def _run(self) -> None:
        try:
            self._undo(self.retire)
        except Exception as error:  # a failed undo says so where the button was
            logger.exception("pi_kernel.widgets: undo failed")
            self.retire(f"Undo failed: {type(error).__name__}: {error}")
