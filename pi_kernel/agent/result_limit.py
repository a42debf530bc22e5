"""The bound on every tool result the model receives (built-in, user ``@tool``, any ``AgentTool``).

The built-in tools cut their own output (pi's ``truncate`` limits, with a path
to the full output); a user tool may return anything, and a 20 MB string sent
whole fails the request and every later one. So the loop cuts the text of each
tool result message to ``max_chars`` characters before it joins the
conversation, keeping the start, and appends a note that says how much was left
out and how to ask for less. Only the message is cut: the
``tool_execution_end`` event still carries the whole result, so the notebook
(the turn's output, ``_pi_results`` in a kernel) keeps the full value.
Images are not counted here: they are bounded where they are made.
"""

from __future__ import annotations

from pi_kernel.ai import ImageContent, TextContent

DEFAULT_TOOL_RESULT_CHARS = 64_000
"""Above the built-ins' own limit (50 KB plus their notice), so their results pass unchanged."""


def cut_note(total: int, kept: int, limit: int) -> str:
    left_out = total - kept
    return (
        f"\n\n[Tool result cut: showing the first {kept:,} of {total:,} characters "
        f"({left_out:,} left out; the limit is {limit:,}). The full value stays with the user. "
        "To see other parts, call the tool again asking for less: a filter, a range or slice, "
        "fewer rows, or a summary.]"
    )


def bound_content(
    content: list[TextContent | ImageContent], max_chars: int | None
) -> tuple[list[TextContent | ImageContent], int]:
    """``content`` with its text cut to ``max_chars`` characters in all; returns it and the characters
    left out (``0``: unchanged, the same list is returned)."""
    if max_chars is None or max_chars <= 0:
        return content, 0
    total = sum(len(block.text) for block in content if isinstance(block, TextContent))
    if total <= max_chars:
        return content, 0
    room = max_chars
    bounded: list[TextContent | ImageContent] = []
    for block in content:
        if not isinstance(block, TextContent):
            bounded.append(block)
            continue
        if room <= 0:
            continue
        text = block.text[:room]
        room -= len(text)
        bounded.append(TextContent(text))
    kept = max_chars - room
    note = cut_note(total, kept, max_chars)
    last_text = next((i for i in range(len(bounded) - 1, -1, -1) if isinstance(bounded[i], TextContent)), None)
    if last_text is None:
        bounded.append(TextContent(note.lstrip()))
    else:
        block = bounded[last_text]
        assert isinstance(block, TextContent)
        bounded[last_text] = TextContent(block.text + note)
    return bounded, total - kept
