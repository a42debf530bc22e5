"""The plain-text view of a turn: a live display while it runs, the static rendering when it ends.

Used where widgets do not render: terminal consoles, nbclient/papermill, a
notebook without a widget manager. While the turn runs, one display output
is updated in place (throttled: at most ``1 / interval`` updates a second; a
per-token update floods the front-end, see the field notes; only a new
approval request is drawn at once) with the recent part of the turn: the
last ``LIVE_BLOCKS`` blocks (the assistant's text as its last
``TEXT_TAIL_CHARS`` characters, each tool call with its status, a bounded
preview of its arguments and a tail of its output), a line counting the
earlier ones, and every call still waiting for approval with how to answer
it. A redraw costs the size of what it shows (blocks keep their rendered
rows until their ``version`` changes; previews never serialize a whole
value), so a turn of thousands of tool calls or a streamed argument of
megabytes costs time and iopub bytes linear in its size.

When the turn ends the live display is replaced by a fresh ``display_data``
holding ``pi_kernel.widgets.static_render.render_static`` of the turn:
``text/html``, ``text/markdown``, ``text/plain`` and the structured
``metadata["pi_kernel"]`` (no secrets), the same bundle the widget view
leaves. It is preceded by ``clear_output(wait=True)``, so a notebook
front-end (JupyterLab, nbclient) keeps only the final output, with no
flicker and no stale copy of the live display, while a terminal console
(``jupyter console`` ignores ``update_display_data``, so it saw only the
first state of the live display) prints the final text. The clear also
removes anything else the cell printed during the turn (a tool's own
``print``, JupyterLab's echo of a stdin answer); the final output records
the tool results and approval decisions instead.

Outside a kernel (IPython in a terminal) nothing is shown live; the final
text is printed once. ``render_messages`` is the static transcript of
``%pi history``.

Keys: every message is masked on its way out (``outgoing``). The turn's text,
notices and tool results were masked as they entered the view model
(``TurnState``'s blocks); what this view cuts itself is masked first through
the kernel's hook (``outgoing.masked``): arguments and a value cut to a length
(the cut may fall inside a key, leaving a piece too short to be recognised)
and live output still arriving (``partial=True``: its end may be the
beginning of a key, left out until it is whole).
"""

from __future__ import annotations

import asyncio
import json
import logging
import reprlib
import time
from typing import TYPE_CHECKING, Any

from pi_kernel.kernel.approval_hook import preview_text
from pi_kernel.kernel.outgoing import key_values, masked
from pi_kernel.kernel.text_preview import preview_json, text_tail
from pi_kernel.kernel.views import TurnOptions, TurnOutcome, ViewHost
from pi_kernel.tools.approval import ApprovalRequest, cut_middle, invisible_warning, plain_arguments, reveal_invisible
from pi_kernel.tools.definition import ToolDefinition
from pi_kernel.widgets.static_render import StaticOutput, render_static
from pi_kernel.widgets.turn_state import Block, NoticeBlock, TextBlock, ToolCallBlock, TurnState

if TYPE_CHECKING:
    from pi_kernel.agent.types import AgentEvent

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


def short_json(value: Any, limit: int = ARGS_LIMIT) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # too deep: arguments still streaming, say
        text = reprlib.repr(value)
    text = masked(text)  # before the cut: a cut key would no longer be found
    text, invisible = reveal_invisible(text, json_text=True)  # bidi overrides, zero-width: shown as \uXXXX
    note = f"[{invisible_warning(invisible)}] " if invisible else ""
    return note + cut_middle(text, limit)  # both ends stay visible, the hidden middle is named


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


def result_text(result: Any) -> str:
    """The text blocks of a tool result (``AgentToolResult`` or ``ToolResultMessage``)."""
    parts = []
    for block in getattr(result, "content", None) or []:
        if getattr(block, "type", "") == "text":
            parts.append(block.text)
        elif getattr(block, "type", "") == "image":
            parts.append(f"[image {block.mime_type}]")
    return "\n".join(parts)


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
            label_of=self._label,
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
        self._waiting: dict[str, ToolCallBlock] = {}
        """Calls waiting for approval: shown even when older than the live window."""

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
        if block is None:
            return
        if block.status == "waiting":
            self._waiting[block.id] = block
        else:
            self._waiting.pop(block.id, None)
        self._request_flush(immediate=block.status == "waiting")

    def finish(self, outcome: TurnOutcome) -> None:
        if self.static is not None:
            return
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
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
        """The live text: the recent part of the turn (see the module docstring)."""
        rows = [f"π {self.state.model or '?'}"]
        secrets = key_values()
        blocks = self.state.blocks
        recent = blocks[-LIVE_BLOCKS:]
        if len(blocks) > len(recent):
            rows.append(f"… {len(blocks) - len(recent)} earlier item(s) of this turn (all shown when it ends)")
            shown = {id(block) for block in recent}
            for call in list(self._waiting.values()):
                if call.status != "waiting":
                    del self._waiting[call.id]
                elif id(call) not in shown:
                    rows.extend(self._block_rows(call, secrets))
        for block in recent:
            rows.extend(self._block_rows(block, secrets))
        if not blocks:
            rows.append("…")
        return "\n".join(rows)  # each part masked where it was made; the whole again on its way out (outgoing)

    def _block_rows(self, block: Block, secrets: list[str]) -> list[str]:
        """A block's rows, drawn again only when its version changed."""
        cached = self._rows.get(id(block))
        if cached is not None and cached[0] == block.version:
            return cached[1]
        version = block.version
        if isinstance(block, TextBlock):
            # Masked as it entered the view model (``TextBlock``: what may begin a key waits there).
            text = text_tail(block.buffer.tail(TEXT_TAIL_CHARS + 1), TEXT_TAIL_CHARS)
            if not text.strip():
                rows = []
            elif block.kind == "text":
                rows = [text.strip("\n")]
            else:
                rows = [indent(tail(text, 3), "  ~ ")]
        elif isinstance(block, ToolCallBlock):
            rows = self._render_tool(block, secrets)
        else:
            rows = [f"[{block.kind}: {block.text}]"]
        self._rows[id(block)] = (version, rows)
        return rows

    def _render_tool(self, block: ToolCallBlock, secrets: list[str]) -> list[str]:
        mark = STATUS_MARKS.get(block.status, "…")
        if block.status == "waiting":  # a person reads it to decide: whole, or its head and tail
            arguments = short_json(plain_arguments(block.arguments), WAITING_ARGS_LIMIT)  # masks before it cuts
        else:
            arguments = preview_json(block.arguments, ARGS_LIMIT, secrets, partial=block.status == "streaming")
        rows = [f"{mark} {block.name} {arguments}"]
        if block.status == "waiting":
            if block.request is not None and block.request.warning:
                rows.append(f"    ⚠ {block.request.warning}")
            if block.request is not None and block.request.preview is not None:
                rows.append(indent(colour_diff(preview_text(block.request.preview, WAITING_ARGS_LIMIT))))
            rows.append(APPROVAL_HELP.format(id=block.id))
        if block.status == "denied" and block.decision is not None:
            output = f"denied: {block.decision.reason or 'by the user'}"
        elif block.result is not None:
            output = block.result_text()  # once per version: the rows are kept
        else:
            output = masked(block.output[-OUTPUT_TAIL_CHARS:], secrets, partial=True)
        if output.strip():
            rows.append(indent(tail(output)))
        return rows

    def _render_static(self) -> StaticOutput:
        try:
            return render_static(self.state, self._definition)
        except Exception:  # a rendering bug must still leave the answer
            logger.exception("pi_kernel: static rendering of the turn failed")
            return StaticOutput({"text/plain": self.render()}, {})

    def _definition(self, name: str) -> ToolDefinition | None:
        try:
            return self.session.tool_definition(name)
        except Exception:  # noqa: BLE001 - an unknown tool renders with the defaults
            return None

    def _label(self, name: str) -> str:
        return str(getattr(self._definition(name), "label", "") or name)

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
            content = message.content
            text = content if isinstance(content, str) else result_text(message)
            rows.append(f"[user] {text}")
        elif role == "assistant":
            body = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
            calls = [f"{block.name} {short_json(block.arguments)}" for block in message.tool_calls]
            rows.append(f"[assistant] {body}".rstrip())
            rows.extend(f"    → {call}" for call in calls)
            if message.error_message:
                rows.append(f"    ({message.stop_reason}: {message.error_message})")
        elif role == "tool_result":
            mark = "✗" if message.is_error else "✓"
            rows.append(f"[tool {message.tool_name} {mark}] {tail(result_text(message), 3)}")
    return "\n".join(rows) if rows else "(no conversation yet)"  # printed, so masked on its way out (outgoing)
