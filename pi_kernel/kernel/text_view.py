"""The plain-text view of a turn: one display output, updated in place, throttled.

Shows the assistant's text as it streams, each tool call with its status and
a tail of its output, approval prompts with how to answer them, and at the
end the outcome and token usage. It is the view for consoles and headless
runs, the fallback when widgets do not render, and (``render_messages``) the
static transcript of ``%pi history``.

Updates are coalesced to at most ``1 / interval`` per second: a per-token
update floods the front-end (see the field notes: ZeroMQ queues overflow and
the final ``idle`` can be lost).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pi_kernel.kernel.approval_hook import plain_arguments
from pi_kernel.kernel.config import redact
from pi_kernel.kernel.views import TurnOptions, TurnOutcome

if TYPE_CHECKING:
    from pi_kernel.kernel.session import PiSession

TAIL_LINES = 6
ARGS_LIMIT = 300


def short_json(value: Any, limit: int = ARGS_LIMIT) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


@dataclass
class ToolLine:
    name: str
    args: Any = None
    status: str = "running"
    """``running``, ``approval``, ``done``, ``error``."""
    output: str = ""


APPROVAL_HELP = (
    "    waiting for approval ({id}): answer on the stdin prompt if one is shown, over the pi.approval comm,\n"
    "    or from a console on this kernel: %pi allow {id} [--always] | %pi deny {id} [reason]"
)


class TextTurnView:
    def __init__(self, session: PiSession, prompt: str, options: TurnOptions, interval: float = 0.1) -> None:
        self.session = session
        self.interval = interval
        self.model_name = options.model or (session.model.id if session.model is not None else "?")
        self.messages: list[Any] = []
        """Assistant messages of this turn, in order (the streaming one is updated in place)."""
        self.tools: dict[str, ToolLine] = {}
        self.footer = ""
        self._handle: Any = None
        self._shown = ""
        self._last_flush = 0.0
        self._scheduled: asyncio.TimerHandle | None = None
        self._live = hasattr(session.shell, "kernel")
        """In a kernel the output is updated in place; a terminal gets the final text once."""

    # -- TurnView -----------------------------------------------------------------------------

    def handle_event(self, event: Any) -> None:
        kind = event.type
        if kind in ("message_start", "message_update", "message_end") and event.message.role == "assistant":
            self._track_message(event.message)
        elif kind == "tool_execution_start":
            self.tools[event.tool_call_id] = ToolLine(event.tool_name, event.args)
        elif kind == "tool_execution_update":
            line = self.tools.setdefault(event.tool_call_id, ToolLine(event.tool_name, event.args))
            line.output = result_text(event.partial_result)
        elif kind == "tool_execution_end":
            line = self.tools.setdefault(event.tool_call_id, ToolLine(event.tool_name))
            line.status = "error" if event.is_error else "done"
            line.output = result_text(event.result)
        else:
            return
        self._request_flush(immediate=kind in ("tool_execution_start", "tool_execution_end", "message_end"))

    def handle_approval(self, kind: str, request: Any) -> None:
        line = self.tools.setdefault(request.tool_call_id, ToolLine(request.tool_name, request.args))
        if kind == "requested":
            line.status = "approval"
        elif line.status == "approval":
            decision = request.decision
            line.status = "running"
            if decision is not None and decision.kind == "deny":
                line.output = f"denied: {decision.reason or 'by the user'}"
        self._request_flush(immediate=True)

    def finish(self, outcome: TurnOutcome) -> None:
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        for message in outcome.messages:
            if getattr(message, "role", "") == "assistant":
                self._track_message(message)
        if outcome.status == "interrupted":
            self.footer = "Interrupted"
        elif outcome.status == "error":
            self.footer = f"Error: {outcome.error}"
        else:
            self.footer = usage_line(outcome.messages)
        if self._live:
            self._flush()
        else:
            print(self.render())

    # -- rendering ----------------------------------------------------------------------------

    def render(self) -> str:
        rows = [f"π {self.model_name}"]
        for message in self.messages:
            rows.extend(self._render_message(message))
        if self.footer:
            rows.append(f"── {self.footer}")
        elif not self.messages:
            rows.append("…")
        return redact("\n".join(rows))

    def _render_message(self, message: Any) -> list[str]:
        rows: list[str] = []
        for block in message.content:
            kind = getattr(block, "type", "")
            if kind == "text" and block.text.strip():
                rows.append(block.text.strip("\n"))
            elif kind == "thinking" and block.thinking.strip():
                rows.append(indent(tail(block.thinking, 3), "  ~ "))
            elif kind == "tool_call":
                rows.extend(self._render_tool(block.id, block.name, block.arguments))
        if message.stop_reason == "error" and message.error_message:
            rows.append(f"✗ {message.error_message}")
        return rows

    def _render_tool(self, tool_call_id: str, name: str, arguments: Any) -> list[str]:
        line = self.tools.get(tool_call_id)
        args = line.args if line is not None and line.args is not None else arguments
        args = plain_arguments(args)
        mark = {"running": "▶", "approval": "⏸", "done": "✓", "error": "✗"}.get(line.status if line else "", "…")
        rows = [f"{mark} {name} {short_json(args)}"]
        if line is not None and line.status == "approval":
            rows.append(APPROVAL_HELP.format(id=tool_call_id))
        if line is not None and line.output.strip():
            rows.append(indent(tail(line.output)))
        return rows

    # -- output -------------------------------------------------------------------------------

    def _track_message(self, message: Any) -> None:
        for index, known in enumerate(self.messages):
            if known is message or (known.timestamp == message.timestamp and known.role == message.role):
                self.messages[index] = message
                return
        self.messages.append(message)

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
        if not self._live:
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


def usage_line(messages: list[Any]) -> str:
    """``tokens in/out`` and cost over the assistant messages of ``messages``."""
    prompt = completion = 0
    cost = 0.0
    priced = False
    for message in messages:
        if getattr(message, "role", "") != "assistant":
            continue
        prompt += message.usage.input
        completion += message.usage.output
        if message.usage.cost is not None:
            cost += message.usage.cost
            priced = True
    text = f"tokens: {prompt} in · {completion} out"
    return text + (f" · ${cost:.4f}" if priced else "")


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
    return redact("\n".join(rows) if rows else "(no conversation yet)")
