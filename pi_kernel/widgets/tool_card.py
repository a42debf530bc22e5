"""One card per tool call: name and label, status with elapsed time, arguments, approval, output, result.

The card redraws from its ``ToolCallBlock`` when the view flushes. Arguments
are an HTML preview while they stream (bounded, see ``render``) and the
definition's ``render_call`` once complete. Live output from ``on_update``
goes append-only into an ``Output`` widget (``StreamOutput``); when the call
ends, the result replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pi_kernel.tools.approval import ApprovalDecision
from pi_kernel.widgets.approval_panel import ApprovalPanel
from pi_kernel.widgets.render import call_html, header_html, result_html
from pi_kernel.widgets.stream_output import OutputRouter, StreamOutput
from pi_kernel.widgets.turn_state import ToolCallBlock

ARGUMENTS_PREVIEW_INTERVAL = 0.2
"""Seconds between two previews of streaming arguments: a highlighted preview is a few KB of HTML,
resent whole (the answer's text, append-only, still streams at the view's full rate)."""
LIVE_OUTPUT_CHARS = 64_000
"""Live output beyond this is cut to its last ``LIVE_OUTPUT_KEEP`` characters (the result shows it all)."""
LIVE_OUTPUT_KEEP = 16_000


class ToolCard:
    def __init__(
        self,
        kit: Any,
        router: OutputRouter,
        definitions: Callable[[str], Any],
        resolve: Callable[[str, ApprovalDecision], bool] | None,
    ) -> None:
        self._kit = kit
        self._router = router
        self._definitions = definitions
        self._resolve = resolve
        self.header = kit.html("")
        self.arguments = kit.html("")
        self.panel: ApprovalPanel | None = None
        self.live: StreamOutput | None = None
        self.result: Any = None
        self.widget = kit.vbox([self.header, self.arguments], card=True)
        self.version = -1
        self._arguments_key: tuple[Any, ...] | None = None
        self._arguments_at = -ARGUMENTS_PREVIEW_INTERVAL
        self.deferred = False
        """The streaming arguments changed but their preview waits for ``ARGUMENTS_PREVIEW_INTERVAL``."""

    def update(self, block: ToolCallBlock, now: float) -> None:
        self.header.value = header_html(block, now)
        if block.version == self.version:
            return  # only the clock moved
        streaming = block.status == "streaming"
        key = (id(block.arguments), streaming, block.version if streaming else 0)
        self.deferred = (
            streaming and key != self._arguments_key and now - self._arguments_at < ARGUMENTS_PREVIEW_INTERVAL
        )
        if self.deferred:
            return  # drawn again on a later redraw (the view asks for one)
        self.version = block.version
        if key != self._arguments_key:
            self._arguments_key = key
            self._arguments_at = now
            self.arguments.value = call_html(block, self._definitions(block.name))
        self._update_panel(block)
        if block.output_updates and not block.finished:
            if self.live is None:
                self.live = StreamOutput(
                    self._kit.output(), self._router, limit=LIVE_OUTPUT_CHARS, keep=LIVE_OUTPUT_KEEP
                )
                self.widget.children = [self.header, self.arguments, *self._panel_widgets(), self.live.widget]
            self.live.sync(block.output)
        if block.finished and block.result is not None and self.result is None:
            if self.live is not None:
                self.live.done()
            self.result = self._kit.html(result_html(block, self._definitions(block.name)))
            self.widget.children = [self.header, self.arguments, *self._panel_widgets(), self.result]

    def _update_panel(self, block: ToolCallBlock) -> None:
        shown = block.shown_request
        if self.panel is None and shown is not None and block.status == "waiting" and self._resolve is not None:
            resolve = self._resolve
            call_id = shown.request.tool_call_id
            self.panel = ApprovalPanel(self._kit, shown, lambda decision: resolve(call_id, decision))
            self.widget.children = [*self.widget.children, self.panel.widget]
        if self.panel is not None and block.decision is not None and not self.panel.decided:
            self.panel.show_decision(block.decision)
        if self.panel is not None and block.finished and not self.panel.decided:
            self.panel.disable()

    def _panel_widgets(self) -> list[Any]:
        return [self.panel.widget] if self.panel is not None else []

    def finish(self) -> None:
        if self.live is not None:
            self.live.done()
