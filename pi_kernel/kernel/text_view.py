"""How the kernel shows a turn: the choice of view, and the plain-text view with its bounded previews.

**The choice** (``make_turn_view``): ``session.view_factory`` when set, else
the widget view where widgets render in the front-end that sent the cell,
else the plain-text view, the one fallback for every front-end.
``pi_kernel.widgets.factory`` is imported lazily, inside
``widget_view_factory``: it is optional for a front-end without widgets, and
costs time a kernel should not spend at start.

**The plain-text view** (``TextTurnView``) is what terminal consoles,
nbclient/papermill and a notebook without a widget manager get. While the
turn runs, one display output is updated in place, throttled to ``1 /
interval`` updates a second (a per-token update floods the front-end, see the
field notes; a new approval request is drawn at once), with the recent part
of the turn (``render``). A redraw costs the size of what it shows (blocks
keep their rows until their ``version`` changes; a streaming argument is
previewed from its bounded tail, ``ToolCallBlock.shown_arguments``), so a
turn of thousands of tool calls or a streamed argument of megabytes costs
time and iopub bytes linear in its size. When the turn ends,
``clear_output(wait=True)`` and a fresh ``display_data`` of
``pi_kernel.widgets.render.render_static`` replace the live display: a
notebook keeps only the final output (the clear also removes what the cell
printed meanwhile, which the final output records as tool results and
decisions), and a terminal console, which ignores ``update_display_data``,
prints the final text. Outside a kernel the final text is printed once.
``render_messages`` is the static transcript of ``%pi history``.

**Bounded previews** (``preview_json``): JSON of at most ``limit``
characters, whatever the value's size or depth (``render.bound_strings``).

Keys: nothing here masks. Every message is masked on its way out
(``outgoing``), and the view draws from the view model, whose text,
arguments, live output, results and approval requests were masked as they
entered it, before any cut here (``%pi history`` passes a transcript's
arguments through a ``ToolCallBlock`` for that).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from pi_kernel.kernel.approval_hook import preview_text, short_json
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.turn import FrontendTracker, TurnOptions, TurnOutcome, TurnView, TurnViewFactory, ViewHost
from pi_kernel.tools.approval import ApprovalRequest, plain_arguments
from pi_kernel.widgets.render import StaticOutput, bound_strings, render_static
from pi_kernel.widgets.turn_state import Block, NoticeBlock, TextBlock, ToolCallBlock, TurnState, content_text

if TYPE_CHECKING:
    from pi_kernel.agent.types import AgentEvent
    from pi_kernel.ai import Model

logger = logging.getLogger("pi_kernel.kernel")

TAIL_LINES = 6
ARGS_LIMIT = 300
LIVE_BLOCKS = 20
"""Blocks of the turn shown live (the most recent); the final output holds them all."""
TEXT_TAIL_CHARS = 4000
"""Characters of a text block shown live (its end)."""
OUTPUT_TAIL_CHARS = 4000
"""Characters of a running tool's output looked at for its live tail of ``TAIL_LINES`` lines."""
WAITING_ARGS_LIMIT = 4_000
"""A call waiting for approval is shown up to this length, then as its head and tail (``cut_middle``)."""
STATUS_MARKS = {
    "streaming": "…",
    "pending": "…",
    "waiting": "⏸",
    "running": "▶",
    "done": "✓",
    "error": "✗",
    "denied": "⊘",
    "interrupted": "✗",
}


_DIFF_COLOURS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m"}


def colour_diff(text: str) -> str:
    """A diff's lines in ANSI colours (added green, removed red, hunks cyan); the ``---``/``+++`` header plain."""
    rows = []
    for line in text.splitlines():
        colour = None if line.startswith(("---", "+++")) else _DIFF_COLOURS.get(line[:1])
        rows.append(f"{colour}{line}\x1b[0m" if colour else line)
    return "\n".join(rows)


def tail(text: str, lines: int = TAIL_LINES) -> str:
    rows = text.rstrip("\n").splitlines()
    shown = rows[-lines:]
    prefix = [f"… ({len(rows) - lines} more lines)"] if len(rows) > lines else []
    return "\n".join(prefix + shown)


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


APPROVAL_HELP = (
    "    waiting for approval ({id}): answer on the stdin prompt if one is shown, over the pi.approval comm,\n"
    "    or from a console on this kernel: %pi allow {id} [--always] | %pi deny {id} [reason]"
)


class TextTurnView:
    def __init__(self, session: ViewHost, prompt: str, options: TurnOptions, interval: float = 0.1) -> None:
        self.session = session
        self.interval = interval
        model = session.model
        self.state = TurnState(
            model=(options.model if options is not None else None) or (model.id if model is not None else "?"),
            provider="" if options is not None and options.model else getattr(model, "provider", "") or "",
            definitions=lambda name: session.tool_definition(name),  # looked up when drawn
            context_window=model.resolved_context_window if model is not None else None,
        )
        self.static: StaticOutput | None = None
        """The final bundle, once ``finish`` ran."""
        self._handle: Any = None
        self._shown = ""
        self._last_flush = 0.0
        self._scheduled: asyncio.TimerHandle | None = None
        self._live = hasattr(session.shell, "kernel")
        """In a kernel the turn is shown live; a terminal gets the final text once."""
        self._rows: dict[int, tuple[int, list[str]]] = {}
        """``id(block)`` → (its version when drawn, its rows)."""

    # -- TurnView -----------------------------------------------------------------------------

    def handle_event(self, event: AgentEvent) -> None:
        if self.static is not None:
            return
        self.state.apply(event)
        self._request_flush()

    def handle_approval(self, kind: str, request: ApprovalRequest) -> None:
        if self.static is not None:
            return
        block = self.state.apply_approval(kind, request)
        if block is not None:
            self._request_flush(immediate=block.status == "waiting")

    def finish(self, outcome: TurnOutcome) -> None:
        if self.static is not None:
            return
        if self._scheduled is not None:  # the last change lands live before the final output replaces it
            self._scheduled.cancel()
            self._scheduled = None
            self._flush()
        if outcome.status == "interrupted":
            self.state.aborted = True
        if outcome.status == "error" and not any(
            isinstance(block, NoticeBlock) and block.kind == "error" for block in self.state.blocks
        ):
            self.state.blocks.append(NoticeBlock("error", outcome.error or "the turn failed"))
        self.state.finish()
        self.static = self._render_static()
        if not self._live:
            print(self.static.data.get("text/plain", ""))
            return
        from IPython.display import clear_output, display

        if self._handle is not None:
            clear_output(wait=True)  # the live display goes when the final output arrives
        display(self.static.data, raw=True, metadata=self.static.metadata)

    # -- rendering ----------------------------------------------------------------------------

    def render(self) -> str:
        """The live text: the last ``LIVE_BLOCKS`` blocks (text as its last ``TEXT_TAIL_CHARS`` characters, each
        call with its status, a bounded preview of its arguments and a tail of its output), a line counting the
        earlier ones, and every call still waiting for approval with how to answer it."""
        rows = [f"π {self.state.model or '?'}"]
        blocks = self.state.blocks
        recent, waiting = self.state.live_window(LIVE_BLOCKS)
        if len(blocks) > len(recent):
            rows.append(f"… {len(blocks) - len(recent)} earlier item(s) of this turn (all shown when it ends)")
        for block in [*waiting, *recent]:
            rows.extend(self._block_rows(block))
        if not blocks:
            rows.append("…")
        return "\n".join(rows)  # drawn from masked text; the whole masked again on its way out (outgoing)

    def _block_rows(self, block: Block) -> list[str]:
        """A block's rows, drawn again only when its version changed."""
        cached = self._rows.get(id(block))
        if cached is not None and cached[0] == block.version:
            return cached[1]
        version = block.version
        if isinstance(block, TextBlock):
            text = text_tail(block.buffer.tail(TEXT_TAIL_CHARS + 1), TEXT_TAIL_CHARS)
            if not text.strip():
                rows = []
            elif block.kind == "text":
                rows = [text.strip("\n")]
            else:
                rows = [indent(tail(text, 3), "  ~ ")]
        elif isinstance(block, ToolCallBlock):
            rows = self._render_tool(block)
        else:
            rows = [f"[{block.kind}: {block.text}]"]
        self._rows[id(block)] = (version, rows)
        return rows

    def _render_tool(self, block: ToolCallBlock) -> list[str]:
        mark = STATUS_MARKS.get(block.status, "…")
        if block.status == "waiting":  # a person reads it to decide: whole, or its head and tail
            arguments = short_json(plain_arguments(block.shown_arguments()), WAITING_ARGS_LIMIT)
        else:
            arguments = preview_json(block.shown_arguments(), ARGS_LIMIT)
        rows = [f"{mark} {block.name} {arguments}"]
        shown = block.shown_request
        if block.status == "waiting" and shown is not None:
            if shown.warning:
                rows.append(f"    ⚠ {shown.warning}")
            if shown.preview is not None:
                rows.append(indent(colour_diff(preview_text(shown.preview, WAITING_ARGS_LIMIT))))
        if block.status == "waiting":
            rows.append(APPROVAL_HELP.format(id=block.id))
        if block.status == "denied" and block.decision is not None:
            output = f"denied: {block.decision.reason or 'by the user'}"
        elif block.result is not None:
            output = block.result_text()  # once per version: the rows are kept
        else:
            output = block.output[-OUTPUT_TAIL_CHARS:]
        if output.strip():
            rows.append(indent(tail(output)))
        return rows

    def _render_static(self) -> StaticOutput:
        try:
            return render_static(self.state)
        except Exception:  # a rendering bug must still leave the answer
            logger.exception("pi_kernel: static rendering of the turn failed")
            return StaticOutput({"text/plain": self.render()}, {})

    # -- output -------------------------------------------------------------------------------

    def _request_flush(self, immediate: bool = False) -> None:
        if not self._live:
            return
        wait = self._last_flush + self.interval - time.monotonic()
        if immediate or wait <= 0:
            if self._scheduled is not None:
                self._scheduled.cancel()
                self._scheduled = None
            self._flush()
        elif self._scheduled is None:
            self._scheduled = asyncio.get_running_loop().call_later(wait, self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._scheduled = None
        self._flush()

    def _flush(self) -> None:
        if not self._live or self.static is not None:
            return
        from IPython.display import display

        text = self.render()
        if text == self._shown:
            if self._handle is not None:
                # Nothing to send, but the next render waits a whole interval too: the redraws of a
                # streamed argument whose preview does not move would otherwise run at every delta.
                self._last_flush = time.monotonic()
            return
        data = {"text/plain": text}
        if self._handle is None:
            self._handle = display(data, raw=True, display_id=True)
        else:
            self._handle.update(data, raw=True)
        self._shown = text
        self._last_flush = time.monotonic()


def render_messages(messages: list[Any]) -> str:
    """A static transcript (``%pi history``)."""
    rows: list[str] = []
    for message in messages:
        role = getattr(message, "role", "")
        if role == "user":
            rows.append(f"[user] {content_text(message.content)}")
        elif role == "assistant":
            body = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
            # each call enters the view model (a ``ToolCallBlock``), masked there before ``short_json`` cuts it
            blocks = [
                ToolCallBlock(call.id, call.name, arguments=call.arguments, status="done")
                for call in message.tool_calls
            ]
            calls = [f"{block.name} {short_json(block.shown_arguments())}" for block in blocks]
            rows.append(f"[assistant] {body}".rstrip())
            rows.extend(f"    → {call}" for call in calls)
            if message.error_message:
                rows.append(f"    ({message.stop_reason}: {message.error_message})")
        elif role == "tool_result":
            mark = "✗" if message.is_error else "✓"
            rows.append(f"[tool {message.tool_name} {mark}] {tail(content_text(message.content), 3)}")
    return "\n".join(rows) if rows else "(no conversation yet)"  # printed, so masked on its way out (outgoing)


# ---------------------------------------------------------------------- bounded previews


def preview_json(value: Any, limit: int) -> str:
    """``value`` (JSON data, masked in the view model; bounded there while it streams) as JSON, each string cut
    to ``limit`` first, the whole to ``limit`` characters (``…`` where cut)."""
    text = json.dumps(bound_strings(value, limit), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def text_tail(text: str, chars: int) -> str:
    """The end of ``text`` (at most ``chars`` characters), starting at a line start when it is cut."""
    if len(text) <= chars:
        return text
    cut = text[-chars:]
    newline = cut.find("\n")
    if 0 <= newline < len(cut) - 1:
        cut = cut[newline + 1 :]
    return "… (earlier text not shown live)\n" + cut


# ---------------------------------------------------------------------- the choice of view


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


def make_turn_view(
    session: ViewChooser, prompt: str, options: TurnOptions, widgets: bool | None = None, model: Model | None = None
) -> TurnView:
    """The view for one turn: ``session.view_factory``, else widgets where they render, else text.

    ``widgets``: whether the requesting front-end renders widgets (``None``: any front-end connected so far).
    ``model``: the turn's own (``--model``), whose provider and context window the view shows.
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
    if state is not None and model is not None and hasattr(state, "context_window"):
        state.model, state.provider = model.id, model.provider
        state.context_window = model.resolved_context_window
    return view
