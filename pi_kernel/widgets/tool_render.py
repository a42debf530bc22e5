"""How a tool call and its result look: defaults per tool, and the definition's overrides.

Defaults: ``python`` and ``bash`` show their code highlighted, ``edit`` a diff
of each replacement, ``write`` the new file highlighted by its name, other
tools pretty JSON. A result shows the notebook outputs of ``python``
(``details["outputs"]``), the diff of ``edit`` (``details["diff"]``), rich
displays (``details["display"]``), else its text and images. A definition's
``render_call(args)`` / ``render_result(result)`` replace the defaults (a str
or any IPython display object); a hook that raises falls back to the default,
with the error named. While arguments stream in, the preview shows only their
end (``LIVE_PREVIEW_CHARS``): the live view must not resend 40 KB per update,
and is made from the arguments cut first (``live_tail``), so a redraw costs the
same for a 5 MB argument as for a short one.
Complete arguments are shown whole (wrapped, scrollable) up to
``FINAL_ARGUMENTS_CHARS``, beyond that as their head and tail around a plain
"characters hidden" warning: what a person approves is never cut at one end.
The card's header line (label, name, status, elapsed time, decision) is here
too, and its ``<summary>`` form for the static card. No ipywidgets here: the static rendering uses the same functions.

Secrets are masked in the data, before it is highlighted (a highlighter cuts a
key into several ``<span>``s, where masking the HTML would no longer find it);
while arguments stream, what may be the start of a key is left out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from pi_kernel.ai import ImageContent, TextContent
from pi_kernel.tools.approval import ApprovalDecision, invisible_warning, reveal_invisible, reveal_invisible_data
from pi_kernel.widgets.footer import format_duration
from pi_kernel.widgets.html_render import (
    MUTED,
    STATUS_COLORS,
    badge,
    diff_html,
    escape,
    highlight,
    image_html,
    mime_bundle_of,
    mime_html,
    mime_text,
    outputs_html,
    outputs_text,
    pre,
    unified_diff,
)
from pi_kernel.widgets.json_view import jsonable, pretty_json
from pi_kernel.widgets.turn_blocks import key_values, masked
from pi_kernel.widgets.turn_state import ToolCallBlock

CODE_ARGUMENTS: dict[str, tuple[str, str]] = {"python": ("code", "python"), "bash": ("command", "bash")}
"""Tool name → (argument holding code, its language)."""
EDIT_TOOLS = frozenset({"edit"})
"""Tools whose ``old_text``/``new_text`` arguments are drawn as a diff (another tool's arguments of the
same names may mean something else: a search-and-replace over a database, say)."""
TAIL_RESULTS = frozenset({"bash", "python"})
"""Tools whose long output matters most at its end (errors come last)."""
LIVE_PREVIEW_CHARS = 2_000
LIVE_STRING_KEEP = LIVE_PREVIEW_CHARS + 1_024
"""Characters of each string of streaming arguments kept for their preview (its end: the part being written)."""
LIVE_ITEMS_KEEP = 200
LIVE_DEPTH = 24
FINAL_ARGUMENTS_CHARS = 20_000
RESULT_CHARS = 20_000

DefinitionLookup = Callable[[str], Any]
"""Tool name → its ``ToolDefinition`` (or ``None``)."""

STATUS_TEXT = {
    "streaming": "writing arguments",
    "pending": "queued",
    "waiting": "waiting for approval",
    "running": "running",
    "done": "done",
    "error": "error",
    "denied": "denied",
    "interrupted": "interrupted",
}


HEADER_STYLE = "flex-wrap:wrap;gap:8px;align-items:center"


def header_html(block: ToolCallBlock, now: float) -> str:
    """``label  name  [status]  1.2 s  decision``, one line (wrapping when narrow)."""
    parts = _header_parts(block, now)
    decision = _decision_html(block)
    if decision:
        parts.append(decision)
    return f'<div style="display:flex;{HEADER_STYLE}">{" ".join(parts)}</div>'


def summary_html(block: ToolCallBlock, now: float) -> str:
    """The header as the content of a ``<details>``'s ``<summary>`` (the static card).

    Phrasing content only, the name's line bounded to what is left beside the disclosure caret: a line
    as wide as the card would not fit there and drop below the caret. A decision with a reason (a
    denial's, of any length) goes on the next line.
    """
    parts = _header_parts(block, now)
    decision = _decision_html(block)
    with_reason = block.decision is not None and bool(block.decision.reason)
    if decision and not with_reason:
        parts.append(decision)
    line = (
        f'<span style="display:inline-flex;{HEADER_STYLE};vertical-align:middle;max-width:calc(100% - 1.5em)">'
        f"{' '.join(parts)}</span>"
    )
    if decision and with_reason:
        line += f'<span style="display:block;margin-left:1.3em">{decision}</span>'
    return line


def _header_parts(block: ToolCallBlock, now: float) -> list[str]:
    elapsed = block.elapsed(now)
    parts = [f"<b>{escape(block.label or block.name or 'tool')}</b>"]
    if block.name and block.name != block.label:
        parts.append(f'<code style="{MUTED}">{escape(block.name)}</code>')
    parts.append(badge(block.status, STATUS_TEXT.get(block.status, block.status)))
    if elapsed is not None and block.status != "pending":
        parts.append(f'<span style="{MUTED};font-size:12px">{format_duration(elapsed)}</span>')
    return parts


def _decision_html(block: ToolCallBlock) -> str:
    if block.decision is None or block.status == "interrupted":
        return ""
    return f'<span style="{MUTED};font-size:12px">{escape(decision_text(block.decision))}</span>'


def decision_text(decision: ApprovalDecision) -> str:
    """``approved``, ``always allowed``, ``denied: <reason>``, ``interrupted``, ... with who decided."""
    edited = " with edited arguments" if decision.args is not None else ""
    if decision.kind == "approve":
        text = f"approved{edited}"
    elif decision.kind == "always":
        text = f"always allowed{edited}"
    elif decision.source == "interrupt":
        text = "interrupted"
    else:
        text = "denied" + (f": {decision.reason}" if decision.reason else "")
    if decision.source not in ("user", "interrupt"):
        text += f" ({decision.source})"
    return text


def call_html(block: ToolCallBlock, definition: Any = None) -> str:
    """The call's arguments as HTML: the definition's ``render_call`` once they are complete."""
    live = block.status == "streaming"
    hook = getattr(definition, "render_call", None)
    if hook is not None and not live:
        rendered = _run_hook(hook, block.arguments)
        warning = _invisible_note(jsonable(block.arguments))  # the hook's own view cannot be trusted to show them
        if isinstance(rendered, dict):
            return warning + mime_html(rendered)
        return _default_call_html(block, live) + _hook_error(rendered)
    return _default_call_html(block, live)


def _invisible_note(args: Any) -> str:
    """A warning line when ``args`` hold characters that hide or reorder text (``reveal_invisible``)."""
    _, invisible = reveal_invisible_data(args)
    return _warning_line(invisible_warning(invisible)) if invisible else ""


def _warning_line(text: str) -> str:
    return f'<div style="color:{STATUS_COLORS["error"]};font-size:12px">{escape(text)}</div>'


def call_text(block: ToolCallBlock, definition: Any = None) -> tuple[str, str]:
    """``(text, language)`` of the call, for markdown and plain text (``language`` may be ``""``)."""
    hook = getattr(definition, "render_call", None)
    if hook is not None:
        rendered = _run_hook(hook, block.arguments)
        if isinstance(rendered, dict):
            return mime_text(rendered), ""
    args = jsonable(block.arguments) if block.arguments is not None else {}
    code = _code_argument(block.name, args)
    if code is not None:
        return code, CODE_ARGUMENTS[block.name][1]
    edits = _edits(block.name, args)
    if edits is not None:
        path = str(args.get("path") or args.get("file_path") or "")
        return "".join(unified_diff(old, new, path) for old, new in edits), "diff"
    return pretty_json(args), "json"


def result_html(block: ToolCallBlock, definition: Any = None) -> str:
    result = block.result
    if result is None:
        return ""
    hook = getattr(definition, "render_result", None)
    if hook is not None:
        rendered = _run_hook(hook, result)
        if isinstance(rendered, dict):
            return mime_html(rendered)
        return _default_result_html(block) + _hook_error(rendered)
    return _default_result_html(block)


def rendered_result_text(block: ToolCallBlock, definition: Any = None, *, limit: int = RESULT_CHARS) -> str:
    result = block.result
    if result is None:
        return ""
    hook = getattr(definition, "render_result", None)
    if hook is not None:
        rendered = _run_hook(hook, result)
        if isinstance(rendered, dict):
            return _bounded(mime_text(rendered), limit, block.name)
    details = result.details if isinstance(result.details, Mapping) else {}
    outputs = details.get("outputs")
    if isinstance(outputs, list) and outputs:
        return _bounded(outputs_text(outputs), limit, block.name)
    parts = [
        item.text if isinstance(item, TextContent) else f"[{item.mime_type} image]"
        for item in result.content
        if isinstance(item, (TextContent, ImageContent))
    ]
    return _bounded("\n".join(parts), limit, block.name)


# ---------------------------------------------------------------------- defaults


def _default_call_html(block: ToolCallBlock, live: bool) -> str:
    limit = LIVE_PREVIEW_CHARS if live else FINAL_ARGUMENTS_CHARS
    secrets = key_values()
    value = live_tail(block.arguments) if live else block.arguments  # redrawn often: never the whole value
    args = jsonable(value) if value is not None else {}
    args = masked(args, secrets, partial=live)
    if not args and block.raw.length and live:
        return pre(_shown(masked(block.raw.text, secrets, partial=True)), limit=limit, tail=True)
    note = "" if live else _invisible_note(args)
    return note + _default_args_html(block.name, args, limit, live)


def _shown(text: str, json_text: bool = False) -> str:
    """``text`` with bidi overrides, zero-width characters, ESC, ... written as ``\\uXXXX``."""
    return reveal_invisible(text, json_text=json_text)[0]


def _json_shown(value: Any) -> str:
    return _shown(pretty_json(value), json_text=True)


def _default_args_html(name: str, args: Any, limit: int, live: bool) -> str:
    if not isinstance(args, dict):
        return pre(_json_shown(args), limit=limit, tail=live, middle=not live)
    code = _code_argument(name, args)
    if code is not None:
        key, language = CODE_ARGUMENTS[name]
        shown = _shown(code)
        return highlight(shown, language, limit=limit, tail=live, middle=not live) + _other_arguments(args, {key})
    edits = _edits(name, args)
    path = args.get("path") or args.get("file_path")
    if edits is not None:
        diff = _shown("".join(unified_diff(old, new, str(path or "")) for old, new in edits))
        # live: the end, being written; complete: both ends, as for every call a person may approve
        return _path_line(path) + diff_html(diff, limit=limit, tail=live, middle=not live)
    content = args.get("content")
    if name == "write" and isinstance(content, str) and isinstance(path, str):
        return _path_line(path) + highlight(_shown(content), path, limit=limit, tail=live, middle=not live)
    return pre(_json_shown(args), limit=limit, tail=live, middle=not live)


def live_tail(value: Any, depth: int = 0) -> Any:
    """Streaming arguments cut for their live preview, whatever their size: each long string keeps its
    last ``LIVE_STRING_KEEP`` characters, each long container its last ``LIVE_ITEMS_KEEP`` items, and
    nesting deeper than ``LIVE_DEPTH`` shows as ``…`` (no recursion on the model's depth)."""
    if isinstance(value, str):
        return value if len(value) <= LIVE_STRING_KEEP else "…" + value[-LIVE_STRING_KEEP:]
    if hasattr(value, "model_dump") and not isinstance(value, type):
        value = dict(value)
    if isinstance(value, (dict, list, tuple)) and depth >= LIVE_DEPTH:
        return "…"
    if isinstance(value, dict):
        items = list(itertools.islice(reversed(value.items()), LIVE_ITEMS_KEEP))[::-1]
        return {
            live_tail(key, depth + 1) if isinstance(key, str) else key: live_tail(item, depth + 1)
            for key, item in items
        }
    if isinstance(value, (list, tuple)):
        return [live_tail(item, depth + 1) for item in value[-LIVE_ITEMS_KEEP:]]
    return value


def _default_result_html(block: ToolCallBlock) -> str:
    result = block.result
    assert result is not None
    details = result.details if isinstance(result.details, Mapping) else {}  # masked as it entered the block
    tail = block.name in TAIL_RESULTS
    text = "\n".join(item.text for item in result.content if isinstance(item, TextContent))
    images = "".join(image_html(item.data, item.mime_type) for item in result.content if isinstance(item, ImageContent))
    outputs = details.get("outputs")
    if isinstance(outputs, list) and outputs:
        return outputs_html(outputs, limit=RESULT_CHARS)
    display = details.get("display")
    if isinstance(display, Mapping):
        display = [display]
    if isinstance(display, list) and display:
        return "".join(mime_html(bundle) for bundle in display if isinstance(bundle, Mapping)) + images
    diff = details.get("diff")
    shown_by_call = _edits(block.name, jsonable(block.arguments)) is not None
    if isinstance(diff, str) and diff and not shown_by_call:
        return (pre(text, limit=RESULT_CHARS) if text else "") + diff_html(diff, limit=RESULT_CHARS)
    return (pre(text, limit=RESULT_CHARS, tail=tail) if text or not images else "") + images


def _code_argument(name: str, args: Any) -> str | None:
    if name not in CODE_ARGUMENTS or not isinstance(args, dict):
        return None
    code = args.get(CODE_ARGUMENTS[name][0])
    return code if isinstance(code, str) else None


def _edits(name: str, args: Any) -> list[tuple[str, str]] | None:
    """``(old, new)`` pairs of an ``edit`` call (``edits: [...]`` or one pair), else ``None``."""
    if name not in EDIT_TOOLS or not isinstance(args, dict):
        return None
    edits = args.get("edits")
    items: list[Any] = edits if isinstance(edits, list) else [args]
    pairs = []
    for item in items:
        if not isinstance(item, dict):
            continue
        old = item.get("old_text", item.get("oldText"))
        new = item.get("new_text", item.get("newText"))
        if isinstance(old, str) or isinstance(new, str):
            pairs.append((old if isinstance(old, str) else "", new if isinstance(new, str) else ""))
    return pairs or None


def _other_arguments(args: dict[str, Any], shown: set[str]) -> str:
    rest = {key: value for key, value in args.items() if key not in shown}
    if not rest:
        return ""
    text = ", ".join(f"{_shown(key)}={_json_shown(value)}" for key, value in rest.items())
    return f'<div style="{MUTED};font-size:12px">{escape(text)}</div>'


def _path_line(path: Any) -> str:
    return f'<div style="font-size:12px"><code>{escape(_shown(str(path)))}</code></div>' if path else ""


def _bounded(text: str, limit: int, name: str) -> str:
    text = masked(text)  # before the cut: a key cut in two would no longer be found
    if len(text) <= limit:
        return text
    if name in TAIL_RESULTS:
        return f"… [{len(text) - limit:,} earlier characters]\n{text[-limit:]}"
    return f"{text[:limit]}\n… [{len(text) - limit:,} more characters]"


def _run_hook(hook: Callable[[Any], Any], value: Any) -> dict[str, Any] | str:
    """The hook's output as a MIME bundle, or the text of its error."""
    try:
        return masked(mime_bundle_of(hook(value)))
    except Exception as error:  # noqa: BLE001 - a user's render hook must not break the view
        return f"{type(error).__name__}: {error}"


def _hook_error(message: str) -> str:
    return f'<div style="{MUTED};font-size:12px">render hook failed ({escape(message)}); default view shown</div>'
