"""The bound on every tool result the model receives (built-in, user ``@tool``, any ``AgentTool``).

The built-in tools cut their own output (pi's ``truncate`` limits, with a path
to the full output); a user tool may return anything, and a 20 MB string sent
whole fails the request and every later one. So the loop cuts the text of each
tool result message to ``max_chars`` characters before it joins the
conversation, keeping the start, and appends a note that says how much was left
out and how to ask for less. Only the message is cut: the
``tool_execution_end`` event still carries the whole result, so the notebook
(the turn's output, ``_pi_results`` in a kernel) keeps the full value.
Images: each is bounded where it is made (``read``, ``python``, a ``@tool``
returning a picture), and a result keeps at most ``MAX_RESULT_IMAGES`` of
them, ``MAX_RESULT_IMAGE_BYTES`` of base64 in all (a tool returning content
blocks of its own is bounded here); the others are left out with a note.
"""

from __future__ import annotations

from pi_kernel.ai import ImageContent, TextContent

DEFAULT_TOOL_RESULT_CHARS = 64_000
"""Above the built-ins' own limit (50 KB plus their notice), so their results pass unchanged."""
MAX_RESULT_IMAGES = 8
"""Most images one tool result gives the model."""
MAX_RESULT_IMAGE_BYTES = int(4.5 * 1024 * 1024)
"""Most base64 of images one tool result gives the model (one image at the size ``read`` allows)."""


def image_note(left_out: int) -> str:
    plural = "image" if left_out == 1 else "images"
    return (
        f"[{left_out} {plural} left out: a tool result gives the model at most {MAX_RESULT_IMAGES} images, "
        f"{MAX_RESULT_IMAGE_BYTES / (1024 * 1024):.1f} MB of base64 in all. The user sees them all. To see others, "
        "call the tool again asking for fewer or smaller images.]"
    )


def bound_images(content: list[TextContent | ImageContent]) -> list[TextContent | ImageContent]:
    """``content`` with at most ``MAX_RESULT_IMAGES`` images, ``MAX_RESULT_IMAGE_BYTES`` of base64 in all (the
    first that fit are kept) after a note saying how many were left out; the same list when all fit."""
    kept: list[TextContent | ImageContent] = []
    images = size = left_out = 0
    for block in content:
        if isinstance(block, ImageContent):
            if images >= MAX_RESULT_IMAGES or size + len(block.data) > MAX_RESULT_IMAGE_BYTES:
                left_out += 1
                continue
            images += 1
            size += len(block.data)
        kept.append(block)
    if not left_out:
        return content
    return [TextContent(image_note(left_out)), *kept]


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
    """``content`` with its text cut to ``max_chars`` characters in all and its images bounded
    (``bound_images``); returns it and the characters left out (the same list when nothing changed)."""
    if max_chars is None or max_chars <= 0:
        return content, 0
    content = bound_images(content)
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
