"""The footer: model, tokens in and out, cached tokens, cost when known, context use.

``usage_summary`` is plain text (the static rendering and the text view use
it too); ``Footer`` shows it in a widget made by the view's ``WidgetKit``.
"""

from __future__ import annotations

from typing import Any

from pi_kernel.ai import Usage
from pi_kernel.widgets.html_render import MUTED, escape


def usage_summary(
    model: str,
    provider: str,
    usage: Usage,
    *,
    duration: float | None = None,
    context: tuple[int, int] | None = None,
) -> str:
    """``provider:model · 1,234 in (1,000 cached, 200 to cache) · 56 out · $0.0012 · context 12,345 / 128,000 (10%)``.

    ``context``: (tokens the conversation holds now, the model's window), the meter of a long session.

    "in" is the whole prompt (``usage.input`` counts only its uncached part),
    so the cached count in parentheses is a part of it, as a reader expects.
    """
    parts = []
    if model:
        parts.append(f"{provider}:{model}" if provider and provider not in model else model)
    prompt = usage.prompt_tokens
    if prompt or usage.output:
        cached = cache_note(usage.cache_read, usage.cache_write)
        parts.append(f"{prompt:,} in{cached}")
        parts.append(f"{usage.output:,} out")
    if usage.cost is not None:
        parts.append(f"${usage.cost:.4f}")
    if context is not None:
        parts.append(context_meter(*context))
    if duration is not None:
        parts.append(format_duration(duration))
    return " · ".join(parts)


def cache_note(read: int, written: int) -> str:
    """`` (1,000 cached, 200 to cache)``: the prompt's tokens read from and written to the provider's cache."""
    parts = [f"{read:,} cached"] if read else []
    if written:
        parts.append(f"{written:,} to cache")
    return f" ({', '.join(parts)})" if parts else ""


def context_meter(tokens: int, window: int) -> str:
    """``context 12,345 / 128,000 (10%)``."""
    share = 100 * tokens / window if window else 0.0
    return f"context {tokens:,} / {window:,} ({share:.0f}%)"


def format_duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"


def footer_html(summary: str) -> str:
    return f'<div style="{MUTED};font-size:12px;margin-top:4px">{escape(summary)}</div>' if summary else ""


class Footer:
    """A one-line HTML widget (an unchanged value sends nothing: traitlets compares)."""

    def __init__(self, kit: Any) -> None:
        self.widget = kit.html("")

    def update(self, state: Any) -> None:
        window, tokens = state.context_window, state.context_tokens
        context = (tokens, window) if window and tokens else None
        self.widget.value = footer_html(usage_summary(state.model, state.provider, state.usage, context=context))
