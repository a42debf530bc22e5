"""A finished turn as a static MIME bundle: what the notebook keeps once the live widgets are gone.

``render_static(state)`` gives ``text/html`` (self-contained: inline styles,
no script, readable in light and dark themes), ``text/markdown`` and
``text/plain`` (what a terminal console shows), and the turn's structured
data in the output metadata under ``"pi_kernel"``: model, usage, tool calls
with arguments, results (text, truncated) and decisions. A saved notebook
then renders on reopen, in nbconvert and on GitHub with no widget state.

Secrets never leave: every string of the bundle and the metadata goes
through ``turn_blocks.masked`` (values of the key variables in the environment, URL
credentials, ``sk-...`` keys); the model's base URL is not recorded at all.
No ipywidgets here: the kernel's text view uses this module too.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pi_kernel.widgets.footer import footer_html, format_duration, usage_summary
from pi_kernel.widgets.html_render import MUTED, STATUS_COLORS, badge, escape, markdown_html
from pi_kernel.widgets.json_view import bound_strings, jsonable
from pi_kernel.widgets.tool_render import (
    STATUS_TEXT,
    DefinitionLookup,
    call_html,
    call_text,
    decision_text,
    rendered_result_text,
    result_html,
    summary_html,
)
from pi_kernel.widgets.turn_blocks import keys_read_once, masked
from pi_kernel.widgets.turn_state import NoticeBlock, TextBlock, ToolCallBlock, TurnState

METADATA_KEY = "pi_kernel"
METADATA_VERSION = 1
METADATA_RESULT_CHARS = 2_000
METADATA_ARGUMENT_CHARS = 10_000
OPEN_CARD_CHARS = 600
OPEN_CARD_LINES = 12
"""A finished call whose arguments and result fit in this stays open; longer ones fold to their header
(failed, denied and interrupted calls always stay open)."""
_TURN_STYLE = "line-height:1.5;color:inherit;max-width:100%"


@dataclass(slots=True)
class StaticOutput:
    data: dict[str, str]
    """``text/html``, ``text/markdown`` and ``text/plain``."""
    metadata: dict[str, Any]
    """``{"pi_kernel": {...}}``: the turn's structured data."""


def render_static(state: TurnState, definitions: DefinitionLookup | None = None) -> StaticOutput:
    lookup: Callable[[str], Any] = definitions or (lambda _name: None)
    with keys_read_once():  # a turn of thousands of calls masks tens of thousands of strings
        data = {
            "text/html": _html(state, lookup),
            "text/markdown": _markdown(state, lookup),
            "text/plain": _plain(state, lookup),
        }
        return StaticOutput(masked(data), {METADATA_KEY: masked(turn_metadata(state, lookup))})


def turn_metadata(state: TurnState, lookup: Callable[[str], Any]) -> dict[str, Any]:
    calls = []
    for block in state.blocks:
        if not isinstance(block, ToolCallBlock):
            continue
        text = rendered_result_text(block, lookup(block.name), limit=METADATA_RESULT_CHARS) if block.result else None
        calls.append(
            {
                "id": block.id,
                "name": block.name,
                "label": block.label,
                "arguments": bound_strings(masked(jsonable(block.arguments)), METADATA_ARGUMENT_CHARS),
                "status": block.status,
                "elapsed_s": _rounded(block.elapsed(state.ended_at or 0.0)),
                "decision": _decision(block),
                "result": None if block.result is None else {"text": text, "is_error": block.is_error},
            }
        )
    return {
        "version": METADATA_VERSION,
        "model": state.model,
        "provider": state.provider,
        "usage": dataclasses.asdict(state.usage),
        "context": {"tokens": state.context_tokens, "window": state.context_window},
        "stop_reason": state.stop_reason,
        "duration_s": _rounded(_duration(state)),
        "tool_calls": calls,
        "answer": _clip(_answer(state), METADATA_RESULT_CHARS),  # its blocks were masked as they entered
        "errors": [block.text for block in state.blocks if isinstance(block, NoticeBlock) and block.kind == "error"],
    }


def _answer(state: TurnState) -> str:
    """The turn's answer: its text after the last tool call."""
    last_call = max((i for i, block in enumerate(state.blocks) if isinstance(block, ToolCallBlock)), default=-1)
    texts = [
        block.text
        for block in state.blocks[last_call + 1 :]
        if isinstance(block, TextBlock) and block.kind != "thinking"
    ]
    return "\n\n".join(texts)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


# ---------------------------------------------------------------------- html


def _html(state: TurnState, lookup: Callable[[str], Any]) -> str:
    parts = []
    for block in _shown_blocks(state):
        if isinstance(block, TextBlock) and block.kind == "thinking":
            parts.append(
                f'<details style="margin:4px 0"><summary style="{MUTED};cursor:pointer">Thinking</summary>'
                f'<div style="white-space:pre-wrap;{MUTED};font-size:13px;padding-left:12px">'
                f"{escape(block.text)}</div>"  # masked as it entered the view model
                "</details>"
            )
        elif isinstance(block, TextBlock):
            parts.append(f"<div>{markdown_html(block.text)}</div>")  # masked as it entered, before highlighting
        elif isinstance(block, ToolCallBlock):
            parts.append(_card_html(block, lookup(block.name), state))
        else:
            parts.append(_notice_html(block))
    parts.append(footer_html(_summary(state)))
    return f'<div style="{_TURN_STYLE}">{"".join(parts)}</div>'


def _card_html(block: ToolCallBlock, definition: Any, state: TurnState) -> str:
    color = STATUS_COLORS.get(block.status, "#8a8a8a")
    is_open = " open" if block.status in ("error", "denied", "interrupted") or _is_short(block, definition) else ""
    style = (
        f"border:1px solid rgba(127,127,127,.35);border-left:3px solid {color};border-radius:4px;"
        "padding:2px 8px;margin:6px 0"
    )
    summary = summary_html(block, state.ended_at or 0.0)
    body = call_html(block, definition) + result_html(block, definition)
    return f'<details{is_open} style="{style}"><summary style="cursor:pointer">{summary}</summary>{body}</details>'


def _is_short(block: ToolCallBlock, definition: Any) -> bool:
    """Arguments and result small enough to stay open: the transcript shows them without a click."""
    text = call_text(block, definition)[0] + "\n" + rendered_result_text(block, definition, limit=OPEN_CARD_CHARS + 1)
    return len(text) <= OPEN_CARD_CHARS and text.count("\n") < OPEN_CARD_LINES


def _notice_html(block: NoticeBlock) -> str:
    if block.kind in ("user", "compaction"):
        return f'<div style="{MUTED};margin:4px 0">{_notice_text(block)[:2]}{escape(block.text)}</div>'
    status = "error" if block.kind == "error" else "interrupted"
    return f'<div style="margin:4px 0">{badge(status)} {escape(block.text)}</div>'  # masked as it entered


# ---------------------------------------------------------------------- markdown and plain text


def _markdown(state: TurnState, lookup: Callable[[str], Any]) -> str:
    parts = []
    for block in _shown_blocks(state):
        if isinstance(block, TextBlock) and block.kind == "thinking":
            parts.append("\n".join("> " + line for line in ["*Thinking*", "", *block.text.splitlines()]))
        elif isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            definition = lookup(block.name)
            code, language = call_text(block, definition)
            lines = [f"**{_md_escape(block.label or block.name)}** `{block.name}` — {_status_line(block, state)}", ""]
            lines.append(_fence(code, language))
            if block.result is not None:
                lines += ["", _fence(rendered_result_text(block, definition), "")]
            parts.append("\n".join(lines))
        else:
            parts.append(f"*{_md_escape(_notice_text(block))}*")
    summary = _summary(state)
    if summary:
        parts.append(f"*{_md_escape(summary)}*")
    return "\n\n".join(part for part in parts if part)


def _plain(state: TurnState, lookup: Callable[[str], Any]) -> str:
    parts = []
    for block in _shown_blocks(state):
        if isinstance(block, TextBlock) and block.kind == "thinking":
            parts.append("[thinking]\n" + _indent(block.text))
        elif isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            definition = lookup(block.name)
            code, _ = call_text(block, definition)
            lines = [f"── {block.label or block.name} ({block.name}) · {_status_line(block, state)}", _indent(code)]
            if block.result is not None:
                lines += ["  →", _indent(rendered_result_text(block, definition))]
            parts.append("\n".join(lines))
        else:
            parts.append(f"[{_notice_text(block)}]")
    summary = _summary(state)
    if summary:
        parts.append(f"── {summary}")
    return "\n\n".join(part for part in parts if part)


def _shown_blocks(state: TurnState) -> list[Any]:
    """The blocks the static output holds: thinking only where ``state.saves_thinking``."""
    if state.saves_thinking:
        return state.blocks
    return [block for block in state.blocks if not (isinstance(block, TextBlock) and block.kind == "thinking")]


def _status_line(block: ToolCallBlock, state: TurnState) -> str:
    parts = [STATUS_TEXT.get(block.status, block.status)]
    elapsed = block.elapsed(state.ended_at or 0.0)
    if elapsed is not None:
        parts.append(format_duration(elapsed))
    decision = _decision(block)
    if decision is not None and block.status != "interrupted":
        parts.append(decision["text"])
    return " · ".join(parts)


def _summary(state: TurnState) -> str:
    """The footer line: usage, cost, the context meter (when the window is known) and the duration."""
    window, tokens = state.context_window, state.context_tokens
    context = (tokens, window) if window and tokens else None
    return usage_summary(state.model, state.provider, state.usage, duration=_duration(state), context=context)


NOTICE_PREFIX = {"error": "Error: ", "interrupted": "Interrupted: ", "user": "↳ ", "compaction": "⇣ "}


def _notice_text(block: NoticeBlock) -> str:
    return NOTICE_PREFIX[block.kind] + block.text


def _decision(block: ToolCallBlock) -> dict[str, Any] | None:
    decision = block.decision
    if decision is None:
        return None
    return {
        "kind": decision.kind,
        "reason": decision.reason,
        "source": decision.source,
        "edited_arguments": decision.args is not None,
        "text": decision_text(decision),
    }


def _fence(text: str, language: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.rstrip().splitlines())


def _md_escape(text: str) -> str:
    # Masked first: the backslashes added here would hide a key from the final masking.
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", masked(text))


def _duration(state: TurnState) -> float | None:
    if state.started_at is None or state.ended_at is None:
        return None
    return state.ended_at - state.started_at


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
