"""``WidgetTurnView``: the live widget view of one ``%%pi`` turn, replaced by static output when it ends.

The kernel's ``%%pi`` runner calls ``handle_event`` for every agent event,
``handle_approval`` for the broker's notifications (both on the event loop's
thread) and ``finish(outcome)``; ``attach(agent)`` does the same wiring
without the kernel. The view folds each event into its
``TurnState`` and asks the ``Throttle`` for a redraw (at most ``1/interval``
a second, the last change always drawn). A redraw creates widgets for new
blocks and updates the changed ones: the assistant's text streams as plain
text into an ``Output`` widget (append-only ``stream`` messages, see
``frontend``) and becomes rendered markdown when its block ends; thinking
streams into a collapsed section; each tool call gets a ``ToolCard``. Under the footer, given the
agent's ``steer`` and ``follow_up``, a ``SteerBox`` sends the person's messages to the running turn.

Long turns: only the most recent ``LIVE_BLOCKS`` blocks (and every call
waiting for approval) are live widgets, under a line counting the earlier
ones; a block that scrolls out leaves the box (its widgets are closed with
the rest at the end). A redraw touches only those, so a turn of thousands of
tool calls costs time and bytes linear in its size, and the static output at
the end holds every block.

Keys: every message is masked on its way out (``pi_kernel.kernel.outgoing``);
the text this view draws was masked as it entered the view model (the
``TurnState``'s blocks), before it becomes markdown or escaped HTML (a
highlighted or escaped key is spelt differently and would escape that mask).

Approvals: ``requested`` shows the buttons on the call's card; ``resolved``
(whoever decided) disables them and shows the decision. Threads: the
``TurnState`` and every redraw change on the loop's thread only (``attach``
hands the broker's notifications from other threads to the loop). A click,
on whatever thread delivered it, is the panel's own (``ApprovalPanel``: it
shows its decision at once); the loop's redraw of the same ``resolved`` then
finds the panel decided and leaves it.

``finish()`` (also on ``agent_end``) sends the streamed text still pending
(append-only, a few bytes) but drops other pending redraws (the markdown of
the last answer, say: the static output renders it right away), replaces the
live display by ``render_static`` through its display id, and closes every
widget, so a saved notebook holds no widget state.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from pi_kernel.agent.types import AgentEndEvent, AgentEvent
from pi_kernel.tools.approval import ApprovalBroker, ApprovalDecision, ApprovalRequest
from pi_kernel.widgets.kit import WidgetKit
from pi_kernel.widgets.render import (
    MUTED,
    DefinitionLookup,
    Footer,
    StaticOutput,
    markdown_html,
    notice_html,
    render_static,
)
from pi_kernel.widgets.steer_box import SteerBox
from pi_kernel.widgets.stream_output import IopubSender, OutputRouter, StreamOutput
from pi_kernel.widgets.throttle import Scheduler, Throttle
from pi_kernel.widgets.tool_card import ARGUMENTS_PREVIEW_INTERVAL, ToolCard
from pi_kernel.widgets.turn_state import Block, NoticeBlock, TextBlock, ToolCallBlock, TurnState
from pi_kernel.widgets.undo_offer import UndoOffer

logger = logging.getLogger("pi_kernel.widgets")

LIVE_PLAIN_TEXT = "Pi is working… (the live view needs JupyterLab or Notebook 7 with ipywidgets)"
TICK_SECONDS = 1.0
"""How often the elapsed time of running and waiting calls is redrawn."""
LIVE_BLOCKS = 20
"""Blocks drawn as live widgets: the most recent (calls waiting for approval too); the static output has all."""


class EventSource(Protocol):
    """What ``attach`` subscribes to: an ``Agent``."""

    def subscribe(self, listener: Callable[[AgentEvent], Any]) -> Callable[[], None]: ...


class TurnEnding(Protocol):
    """What ``finish`` reads of the kernel's ``TurnOutcome``."""

    @property
    def status(self) -> str: ...


class _TextView:
    """Streamed text (or thinking) of one block; the text becomes rendered markdown when the block ends."""

    def __init__(self, kit: WidgetKit, router: OutputRouter, block: TextBlock) -> None:
        self.stream = StreamOutput(kit.output(), router)
        self.widget = self.stream.widget if block.kind == "text" else kit.accordion(self.stream.widget, "Thinking")
        self.version = -1
        self._sent = 0
        self._rendered = False

    def drain(self, block: TextBlock) -> None:
        """Send the streamed text not shown yet (no markdown: the static output is about to replace it)."""
        if not self._rendered and block.buffer.length > self._sent:
            self.stream.append(block.text[self._sent :])
            self._sent = block.buffer.length

    def update(self, block: TextBlock) -> None:
        self.version = block.version
        if self._rendered:
            return
        if block.final and block.kind == "text":
            # Masked as it entered the view model (``TextBlock``), before highlighting could cut a key into spans.
            self.stream.show({"text/html": markdown_html(block.text)})
            self._rendered = True
        else:
            self.drain(block)
        if block.final:
            self._rendered = True
            self.stream.done()


class _NoticeView:
    def __init__(self, kit: WidgetKit, block: NoticeBlock) -> None:
        self.widget = kit.html("")
        self.version = -1

    def update(self, block: NoticeBlock) -> None:
        self.version = block.version
        self.widget.value = notice_html(block)  # masked as it entered the view model (``NoticeBlock``)


class WidgetTurnView:
    def __init__(
        self,
        sender: IopubSender,
        *,
        broker: ApprovalBroker | None = None,
        definitions: DefinitionLookup | None = None,
        model: str = "",
        provider: str = "",
        interval: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        scheduler: Scheduler | None = None,
        steer: Callable[[str], Any] | None = None,
        follow_up: Callable[[str], Any] | None = None,
    ) -> None:
        self._sender = sender
        self._clock = clock
        self.state = TurnState(model=model, provider=provider, definitions=definitions, clock=clock)
        self._kit = WidgetKit()
        self._router = OutputRouter(sender)
        self._views: list[Any] = []
        """The live views, in display order (``_shown`` holds their blocks)."""
        self._shown: list[Block] = []
        self._live: dict[int, tuple[Block, Any]] = {}
        """``id(block)`` → (block, view) for the blocks drawn live now."""
        self._earlier: Any = None
        """The line counting blocks no longer drawn live (made when the first one scrolls out)."""
        self.footer = Footer(self._kit)
        self.footer.update(self.state)
        self.steer_box = SteerBox(self._kit, steer, follow_up) if steer and follow_up else None
        """The message box that steers the running turn (when the agent's ``steer`` / ``follow_up`` are given)."""
        self.widget = self._kit.vbox(self._bottom())
        self.display_id = uuid.uuid4().hex
        self.displayed = False
        self.finished = False
        self.static: StaticOutput | None = None
        self._throttle = Throttle(self._flush, interval, clock=clock, scheduler=scheduler)
        self._broker = broker
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._bind_loop()
        self._detach: list[Callable[[], Any]] = []

    # ------------------------------------------------------------------ public

    def display(self) -> None:
        """Show the live view in the cell (under a display id the static output will reuse)."""
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/plain"] = LIVE_PLAIN_TEXT
        self._sender.send(
            "display_data", {"data": bundle, "metadata": {}, "transient": {"display_id": self.display_id}}
        )
        self.displayed = True

    def attach(self, agent: EventSource | None = None) -> Callable[[], None]:
        """Subscribe to ``agent`` and to the broker (the kernel's runner does this itself); returns a detach."""
        if agent is not None:
            self._detach.append(agent.subscribe(self.handle_event))
        if self._broker is not None:
            self._detach.append(self._broker.subscribe(self._on_broker))
            for request in self._broker.pending():  # asked before this view existed
                self.handle_approval("requested", request)
        return self.detach

    def detach(self) -> None:
        while self._detach:
            self._detach.pop()()

    def handle_event(self, event: AgentEvent) -> None:
        """An agent listener: every agent event, on the event loop's thread."""
        if self.finished:
            return
        self._bind_loop()
        self.state.apply(event)
        if isinstance(event, AgentEndEvent):
            self.finish()
        else:
            self._throttle.request()

    def handle_approval(self, kind: str, request: ApprovalRequest) -> None:
        """A broker notification (``requested`` / ``resolved``), on the event loop's thread."""
        if self.finished:
            return
        if self.state.apply_approval(kind, request) is not None:
            self._throttle.request()

    def finish(self, outcome: TurnEnding | None = None) -> StaticOutput:
        """End the live view: static output replaces it (through the display id); widgets are closed.

        ``outcome`` (the kernel's ``TurnOutcome``) only matters when ``agent_end`` never came: an
        ``interrupted`` outcome marks unfinished calls as interrupted.
        """
        if self.static is not None:
            return self.static
        self.finished = True
        self._throttle.cancel()
        self.detach()
        if outcome is not None and outcome.status == "interrupted":
            self.state.aborted = True
        for block, view in zip(self._shown, self._views, strict=True):
            if isinstance(view, _TextView) and isinstance(block, TextBlock):
                view.drain(block)  # the last tokens land even when their redraw was still pending
        self.state.finish()
        self._router.release()
        try:
            self.static = render_static(self.state)
        except Exception:  # a rendering bug must still leave the answer, and no live widgets
            logger.exception("pi_kernel.widgets: static rendering failed")
            self.static = StaticOutput({"text/plain": self.state.text()}, {})
        if self.displayed:
            transient = {"display_id": self.display_id}
            content = {"data": self.static.data, "metadata": self.static.metadata, "transient": transient}
            self._sender.send("update_display_data", content)
        self._kit.close_all()
        return self.static

    def offer_undo(self, undo: Callable[[Callable[[str], None]], Any]) -> UndoOffer:
        """After ``finish``: show an "Undo this turn" button under the static output (``UndoOffer``)."""
        offer = UndoOffer(self._sender, undo, self._loop)
        offer.display()
        return offer

    @property
    def flushes(self) -> int:
        """Redraws so far."""
        return self._throttle.flushes

    def card(self, tool_call_id: str) -> ToolCard | None:
        """The card of a tool call, once drawn."""
        for block, view in zip(self._shown, self._views, strict=True):
            if isinstance(view, ToolCard) and isinstance(block, ToolCallBlock) and block.id == tool_call_id:
                return view
        return None

    # ------------------------------------------------------------------ approvals

    def _on_broker(self, event: str, request: ApprovalRequest) -> None:
        """A broker listener (``attach``): hands notifications from other threads to the loop."""
        loop = self._loop
        if loop is None or threading.get_ident() == self._loop_thread:
            self.handle_approval(event, request)
        else:
            loop.call_soon_threadsafe(self.handle_approval, event, request)

    def _resolve(self, tool_call_id: str, decision: ApprovalDecision) -> bool:
        return self._broker is not None and self._broker.resolve(tool_call_id, decision)

    # ------------------------------------------------------------------ drawing

    def _flush(self) -> None:
        try:
            self._draw()
        except Exception:
            logger.exception("pi_kernel.widgets: redraw failed")

    def _draw(self) -> None:
        now = self._clock()
        self._arrange()
        ticking = deferred = False
        for block, view in zip(self._shown, self._views, strict=True):
            if isinstance(block, ToolCallBlock):
                view.update(block, now)
                ticking = ticking or block.status in ("running", "waiting")
                deferred = deferred or view.deferred
            elif block.version != view.version:
                view.update(block)
        self.footer.update(self.state)
        if deferred:
            self._throttle.request(ARGUMENTS_PREVIEW_INTERVAL)
        elif ticking:
            self._throttle.request(TICK_SECONDS)

    def _arrange(self) -> None:
        """Make views for the blocks to draw live, drop the others; the box changes only when they do."""
        blocks = self.state.blocks
        window, pinned = self.state.live_window(LIVE_BLOCKS)
        wanted = [*pinned, *window]
        if [id(block) for block in wanted] == [id(block) for block in self._shown]:
            return
        keep = {id(block) for block in wanted}
        for key in [key for key in self._live if key not in keep]:
            del self._live[key]  # its widgets stay open until the turn ends (closed with the rest)
        for block in wanted:
            if id(block) not in self._live:
                self._live[id(block)] = (block, self._make_view(block))
        self._shown = wanted
        self._views = [self._live[id(block)][1] for block in wanted]
        children = [view.widget for view in self._views]
        hidden = len(blocks) - len(window) - len(pinned)
        if hidden > 0 or self._earlier is not None:
            if self._earlier is None:
                self._earlier = self._kit.html("")
            self._earlier.value = (
                f'<div style="{MUTED}">… {hidden} earlier item(s) of this turn (all shown when it ends)</div>'
            )
            children.insert(0, self._earlier)
        self.widget.children = [*children, *self._bottom()]

    def _bottom(self) -> list[Any]:
        return [self.footer.widget] + ([self.steer_box.widget] if self.steer_box is not None else [])

    def _make_view(self, block: Block) -> Any:
        if isinstance(block, TextBlock):
            return _TextView(self._kit, self._router, block)
        if isinstance(block, ToolCallBlock):
            return ToolCard(self._kit, self._router, self.state.definition, self._resolve)
        return _NoticeView(self._kit, block)

    # ------------------------------------------------------------------ helpers

    def _bind_loop(self) -> None:
        if self._loop is not None:
            return
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._loop_thread = threading.get_ident()
