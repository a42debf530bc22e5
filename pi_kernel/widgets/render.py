"""How a turn looks: HTML pieces, JSON, the footer, tool cards and the static bundle of a finished turn.

No ipywidgets here: the live widget view, the static rendering and the
kernel's text view all draw from these functions and from the view model
(``turn_state``), whose text is already masked (a definition's render
hook's output too): nothing here masks keys.

- **HTML pieces**: self-contained (inline styles, no classes, no scripts).
  Colours that carry meaning (status, diff lines, syntax) are mid-tone
  accents or translucent tints, and text otherwise inherits the page's
  colour, so one rendering reads in light and dark themes alike, in
  JupyterLab, nbconvert and on GitHub. Text from the model is always escaped
  (markdown is rendered with raw HTML escaped and harmful link schemes
  dropped): a prompt-injected answer must not run script in the notebook.
  Rich HTML from a tool result (a DataFrame's ``_repr_html_``) comes from
  code the person let run, and is shown as is.
- **JSON for people** and **the footer** (``turn_summary``, ``Footer``).
- **A tool call and its result**: defaults per tool (``python`` and ``bash``
  show their code highlighted, ``edit`` a diff of each replacement, ``write``
  the new file highlighted by its name, other tools pretty JSON; a result
  shows the notebook outputs of ``python`` (``details["outputs"]``), the diff
  of ``edit`` (``details["diff"]``), rich displays (``details["display"]``),
  else its text and images). A definition's ``render_call(args)`` /
  ``render_result(result)`` replace the defaults (a str or any IPython
  display object); a hook that raises falls back to the default, with the
  error named. While arguments stream, the preview shows only their end
  (``LIVE_PREVIEW_CHARS``, made from ``ToolCallBlock.shown_arguments``, cut
  first), so a redraw costs the same for a 5 MB argument as for a short one.
  Complete arguments are shown whole (wrapped, scrollable) up to
  ``FINAL_ARGUMENTS_CHARS``, beyond that as their head and tail around a
  plain "characters hidden" warning: what a person approves is never cut at
  one end. The card's header line (label, name, status, elapsed time,
  decision) serves the live card and the static card's ``<summary>``.
- **The static bundle**: ``render_static(state)`` gives ``text/html``,
  ``text/markdown`` and ``text/plain`` (what a terminal console shows), and
  the turn's structured data in the output metadata under ``"pi_kernel"``:
  model, usage, tool calls with arguments, results (text, truncated) and
  decisions. A saved notebook then renders on reopen, in nbconvert and on
  GitHub with no widget state. The model's base URL is not recorded at all.

Long: everything a turn looks like (HTML pieces, JSON, tool cards, the footer, the static bundle) shares its
helpers here.
"""

from __future__ import annotations

import base64
import dataclasses
import difflib
import json
import re
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from typing import Any

from pi_kernel.ai import ImageContent, TextContent
from pi_kernel.ai.messages import map_strings
from pi_kernel.tools.approval import (
    ApprovalDecision,
    cut_middle,
    hidden_marker,
    invisible_warning,
    reveal_invisible,
    reveal_invisible_data,
)
from pi_kernel.widgets.turn_state import (
    NoticeBlock,
    TextBlock,
    ToolCallBlock,
    TurnState,
    content_text,
    joined_text,
    json_default,
    mime_text,
    outputs_text,
    strip_ansi,
)

MONO = "font-family:var(--jp-code-font-family,SFMono-Regular,Menlo,Consolas,monospace);font-size:12px;line-height:1.45"
PRE_STYLE = (
    f"margin:3px 0;padding:6px 8px;border-radius:4px;background:rgba(127,127,127,.10);{MONO};"
    "white-space:pre-wrap;word-break:break-word;overflow:auto;max-height:32em;color:inherit"
)
MUTED = "opacity:.7"
HIDDEN_STYLE = "display:block;margin:4px 0;padding:2px 6px;border-left:3px solid #d9822b;font-weight:600;color:#d9822b"
"""The "characters hidden" warning inside a call cut in the middle."""
STATUS_COLORS = {
    "streaming": "#8a63d2",
    "pending": "#8a8a8a",
    "waiting": "#d4a72c",
    "running": "#3b8eea",
    "done": "#2da44e",
    "error": "#e5534b",
    "denied": "#e5534b",
    "interrupted": "#d18616",
}
"""Mid-tone accents, readable on white and on a dark background."""
ADDED_BG = "rgba(46,160,67,.22)"
REMOVED_BG = "rgba(248,81,73,.22)"
MAX_IMAGE_BYTES = 2_000_000
"""Larger images are named, not inlined (a notebook is not an image store)."""


def pre(text: str, *, limit: int | None = None, tail: bool = False, style: str = "", middle: bool = False) -> str:
    """Escaped preformatted text, bounded (see ``bounded_pre``)."""
    return bounded_pre(strip_ansi(text), escape, limit=limit, tail=tail, middle=middle, style=style)


def bounded_pre(
    text: str, draw: Callable[[str], str], *, limit: int | None, tail: bool, middle: bool, style: str = ""
) -> str:
    """``text`` drawn by ``draw`` in a ``<pre>``, bounded to ``limit``: its two ends around the "characters
    hidden" warning (``middle``: a call a person approves is never cut at one end only), else its end
    (``tail``, from a line start: a cut first line of a diff would read as context) or start, with a note of
    what was left out."""
    if limit is None or len(text) <= limit:
        body = draw(text)
    elif middle:
        keep = max(limit // 2, 1)
        hidden = f'<span style="{HIDDEN_STYLE}">{escape(hidden_marker(len(text) - 2 * keep))}</span>'
        body = draw(text[:keep]) + hidden + draw(text[-keep:])
    else:
        shown = text[-limit:] if tail else text[:limit]
        if tail and "\n" in shown:
            shown = shown.split("\n", 1)[1]
        omitted = len(text) - len(shown)
        note = f'<span style="{MUTED}">… {omitted:,} {"earlier" if tail else "more"} characters not shown</span>'
        body = f"{note}\n{draw(shown)}" if tail else f"{draw(shown)}\n{note}"
    return f'<pre style="{PRE_STYLE}{style}">{body}</pre>'


def badge(status: str, text: str | None = None) -> str:
    color = STATUS_COLORS.get(status, "#8a8a8a")
    label = escape(text if text is not None else status)
    return (
        f'<span style="color:{color};border:1px solid {color};border-radius:9px;padding:0 7px;'
        f'font-size:11px;line-height:16px;display:inline-block;white-space:nowrap">{label}</span>'
    )


# ---------------------------------------------------------------------- code


@lru_cache(maxsize=1)
def _formatter() -> Any:
    try:
        from pygments.formatters import HtmlFormatter
        from pygments.style import Style
        from pygments.styles import get_style_by_name
        from pygments.token import Comment, Generic, Operator, Token
    except ImportError:
        return None
    styles = dict(get_style_by_name("solarized-light").styles)
    # Plain text inherits the theme's colour; pale greys get a contrast that works on both themes.
    styles.update({Token: "", Generic: "", Generic.Output: "", Operator: "", Comment: "italic #7a8a8c"})
    styles = {
        token: " ".join(part for part in rule.split() if not part.startswith("bg:")) for token, rule in styles.items()
    }
    theme = type("PiStyle", (Style,), {"styles": styles, "background_color": "", "highlight_color": ""})
    return HtmlFormatter(style=theme, noclasses=True, nowrap=True)


@lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    from pygments.lexers import get_lexer_by_name, get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        if "." in language or "/" in language:
            return get_lexer_for_filename(language, stripnl=False, ensurenl=False)
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def highlight(code: str, language: str, *, limit: int | None = None, tail: bool = False, middle: bool = False) -> str:
    """Syntax-highlighted code in a ``<pre>``, bounded (see ``bounded_pre``); ``language`` is a lexer name or a
    file name."""
    formatter = _formatter()
    lexer = _lexer(language) if formatter is not None and language else None
    if formatter is None or lexer is None:
        return pre(code, limit=limit, tail=tail, middle=middle)
    from pygments import highlight as run_highlight

    return bounded_pre(code, lambda part: run_highlight(part, lexer, formatter), limit=limit, tail=tail, middle=middle)


def unified_diff(old: str, new: str, path: str = "") -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        f"a/{path}" if path else "before",
        f"b/{path}" if path else "after",
        n=2,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def diff_html(diff: str, *, limit: int | None = None, tail: bool = False, middle: bool = False) -> str:
    """A unified diff with added and removed lines tinted, bounded (see ``bounded_pre``)."""
    return bounded_pre(diff, _diff_rows, limit=limit, tail=tail, middle=middle)


def _diff_rows(diff: str) -> str:
    rows = []
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            style = f"background:{ADDED_BG};"
        elif line.startswith("-") and not line.startswith("---"):
            style = f"background:{REMOVED_BG};"
        else:
            style = f"{MUTED};" if line.startswith("@@") else ""
        rows.append(f'<span style="{style}display:block">{escape(line) or " "}</span>')
    return "".join(rows)


# ---------------------------------------------------------------------- markdown


@lru_cache(maxsize=1)
def _markdown() -> Any:
    try:
        import mistune
    except ImportError:
        return None

    class Renderer(mistune.HTMLRenderer):
        def block_code(self, code: str, info: str | None = None) -> str:
            language = (info or "").split()[0] if info else ""
            return highlight(code, language) if language else pre(code)

        def codespan(self, text: str) -> str:
            return (
                f'<code style="background:rgba(127,127,127,.15);padding:0 3px;border-radius:3px">{escape(text)}</code>'
            )

    return mistune.create_markdown(renderer=Renderer(escape=True), plugins=["strikethrough", "table", "url"])


_TABLE_STYLES = {
    "<table>": '<table style="border-collapse:collapse;color:inherit;font-size:inherit;margin:4px 0">',
    "<th>": '<th style="border:1px solid rgba(127,127,127,.4);padding:2px 8px;text-align:left">',
    "<td>": '<td style="border:1px solid rgba(127,127,127,.4);padding:2px 8px">',
}
_TABLE_TAGS = re.compile("|".join(re.escape(tag) for tag in _TABLE_STYLES))


def markdown_html(text: str) -> str:
    """The model's markdown as HTML, with raw HTML escaped (no markdown library: wrapped text)."""
    render = _markdown()
    if render is None:
        return f'<div style="white-space:pre-wrap">{escape(text)}</div>'
    # Raw HTML in ``text`` is escaped, so these tags can only be the renderer's own.
    return _TABLE_TAGS.sub(lambda match: _TABLE_STYLES[match.group(0)], str(render(text)))


# ---------------------------------------------------------------------- rich outputs

_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def image_html(data: str | bytes, mime_type: str) -> str:
    encoded = base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else "".join(data.split())
    if len(encoded) * 3 // 4 > MAX_IMAGE_BYTES:
        return f'<div style="{MUTED}">[{escape(mime_type)} image, {len(encoded) * 3 // 4:,} bytes, not inlined]</div>'
    return f'<img src="data:{mime_type};base64,{encoded}" style="max-width:100%;height:auto" alt="{mime_type}">'


def mime_html(bundle: Mapping[str, Any], *, limit: int | None = 20_000) -> str:
    """The richest part of a MIME bundle as HTML."""
    if "text/html" in bundle:
        return joined_text(bundle["text/html"])
    if "image/svg+xml" in bundle:
        return joined_text(bundle["image/svg+xml"])
    for mime in _IMAGE_TYPES:
        if mime in bundle:
            return image_html(joined_text(bundle[mime]), mime)
    if "text/markdown" in bundle:
        return markdown_html(joined_text(bundle["text/markdown"]))
    if "application/json" in bundle:
        return pre(json.dumps(bundle["application/json"], indent=2, ensure_ascii=False, default=str), limit=limit)
    if "text/latex" in bundle:
        return pre(joined_text(bundle["text/latex"]), limit=limit)
    return pre(joined_text(bundle.get("text/plain", "")), limit=limit)


def outputs_html(outputs: list[Any], *, limit: int = 20_000) -> str:
    """Notebook-style outputs (``stream``, ``display_data``, ``execute_result``, ``error`` dicts) as HTML."""
    parts = []
    for output in outputs:
        if not isinstance(output, Mapping):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            tint = f";border-left:3px solid {STATUS_COLORS['error']}" if output.get("name") == "stderr" else ""
            parts.append(pre(joined_text(output.get("text", "")), limit=limit, tail=True, style=tint))
        elif kind in ("display_data", "execute_result"):
            parts.append(mime_html(output.get("data") or {}, limit=limit))
        elif kind == "error":
            trace = "\n".join(output.get("traceback") or []) or f"{output.get('ename')}: {output.get('evalue')}"
            parts.append(pre(trace, limit=limit, tail=True, style=f";border-left:3px solid {STATUS_COLORS['error']}"))
    return "".join(parts)


# ---------------------------------------------------------------------- JSON


def pretty_json(value: Any) -> str:
    """Indented JSON text of ``value`` (non-JSON values through their dump or ``str``)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=json_default)
    except (TypeError, ValueError, RecursionError):  # circular or too deep data, say: still show something
        return reprlib.repr(value)


def bound_strings(value: Any, limit: int) -> Any:
    """JSON data with every string longer than ``limit`` cut, saying how much was cut (iterative; data
    nested deeper than ``messages.MAX_DEPTH`` is shown as a mark)."""

    def cut(text: str) -> str:
        return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters]"

    return map_strings(value, cut)


def parse_arguments(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """Edited arguments from a text box: ``(arguments, None)`` or ``(None, error message)``."""
    try:
        value = json.loads(text)
    except ValueError as error:
        return None, f"Invalid JSON: {error}"
    except RecursionError:
        return None, "Invalid JSON: nested too deeply"
    if not isinstance(value, dict):
        return None, f"The arguments must be a JSON object, not {type(value).__name__}"
    return value, None


# ---------------------------------------------------------------------- the footer


def turn_summary(state: TurnState) -> str:
    """The footer line: ``provider:model · 1,234 in (1,000 cached, 200 to cache) · 56 out · $0.0012 · context
    12,345 / 128,000 (10%) · 3.2 s`` (the context meter when the model's window is known).

    "in" is the whole prompt (``usage.input`` counts only its uncached part),
    so the cached count in parentheses is a part of it, as a reader expects.
    """
    parts = []
    model, provider, usage = state.model, state.provider, state.usage
    if model:
        parts.append(f"{provider}:{model}" if provider and provider not in model else model)
    if usage.prompt_tokens or usage.output:
        parts.append(f"{usage.prompt_tokens:,} in{cache_note(usage.cache_read, usage.cache_write)}")
        parts.append(f"{usage.output:,} out")
    if usage.cost is not None:
        parts.append(f"${usage.cost:.4f}")
    if state.context_window and state.context_tokens:
        parts.append(context_meter(state.context_tokens, state.context_window))
    duration = _duration(state)
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

    def update(self, state: TurnState) -> None:
        self.widget.value = footer_html(turn_summary(state))


# ---------------------------------------------------------------------- tool calls

CODE_ARGUMENTS: dict[str, tuple[str, str]] = {"python": ("code", "python"), "bash": ("command", "bash")}
"""Tool name → (argument holding code, its language)."""
EDIT_TOOLS = frozenset({"edit"})
"""Tools whose ``old_text``/``new_text`` arguments are drawn as a diff (another tool's arguments of the
same names may mean something else: a search-and-replace over a database, say)."""
TAIL_RESULTS = frozenset({"bash", "python"})
"""Tools whose long output matters most at its end (errors come last)."""
LIVE_PREVIEW_CHARS = 2_000
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


def header_html(block: ToolCallBlock, now: float) -> str:
    """``label  name  [status]  1.2 s  decision``, wrapping when narrow: the live card's header and the static
    card's ``<summary>``, so phrasing content only, bounded to what is left beside the disclosure caret (a line
    as wide as the card would drop below it). A decision with a reason (a denial's, of any length) goes on the
    next line."""
    elapsed = block.elapsed(now)
    parts = [f"<b>{escape(block.label or block.name or 'tool')}</b>"]
    if block.name and block.name != block.label:
        parts.append(f'<code style="{MUTED}">{escape(block.name)}</code>')
    parts.append(badge(block.status, STATUS_TEXT.get(block.status, block.status)))
    if elapsed is not None and block.status != "pending":
        parts.append(f'<span style="{MUTED};font-size:12px">{format_duration(elapsed)}</span>')
    below = ""
    if block.decision is not None and block.status != "interrupted":
        shown = f'<span style="{MUTED};font-size:12px">{escape(decision_text(block.decision))}</span>'
        if block.decision.reason:
            below = f'<span style="display:block;margin-left:1.3em">{shown}</span>'
        else:
            parts.append(shown)
    return (
        '<span style="display:inline-flex;flex-wrap:wrap;gap:8px;align-items:center;vertical-align:middle;'
        f'max-width:calc(100% - 1.5em)">{" ".join(parts)}</span>{below}'
    )


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
    rendered = block.hook_output(hook, block.arguments) if hook is not None and not live else None
    if isinstance(rendered, dict):  # with a warning: the hook's own view cannot be trusted to show them
        return _invisible_note(block.shown_arguments()) + mime_html(rendered)
    return _default_call_html(block, live) + _hook_error(rendered)


def _invisible_note(args: Any) -> str:
    """A warning line when ``args`` hold characters that hide or reorder text (``reveal_invisible``)."""
    _, invisible = reveal_invisible_data(args)
    if not invisible:
        return ""
    return f'<div style="color:{STATUS_COLORS["error"]};font-size:12px">{escape(invisible_warning(invisible))}</div>'


def call_text(block: ToolCallBlock, definition: Any = None) -> tuple[str, str]:
    """``(text, language)`` of the call, for markdown and plain text (``language`` may be ``""``), beyond
    ``FINAL_ARGUMENTS_CHARS`` as its head and tail around the "characters hidden" warning, as in HTML."""
    hook = getattr(definition, "render_call", None)
    rendered = block.hook_output(hook, block.arguments) if hook is not None else None
    args = block.shown_arguments()
    code, edits = _code_argument(block.name, args), _edits(block.name, args)
    if isinstance(rendered, dict):
        text, language = mime_text(rendered), ""
    elif code is not None:
        text, language = code, CODE_ARGUMENTS[block.name][1]
    elif edits is not None:
        path = str(args.get("path") or args.get("file_path") or "")
        text, language = "".join(unified_diff(old, new, path) for old, new in edits), "diff"
    else:
        text, language = pretty_json(args), "json"
    return cut_middle(text, FINAL_ARGUMENTS_CHARS), language


def result_html(block: ToolCallBlock, definition: Any = None) -> str:
    result = block.result
    if result is None:
        return ""
    hook = getattr(definition, "render_result", None)
    rendered = block.hook_output(hook, result) if hook is not None else None
    if isinstance(rendered, dict):
        return mime_html(rendered)
    return _default_result_html(block) + _hook_error(rendered)


def rendered_result_text(block: ToolCallBlock, definition: Any = None, *, limit: int = RESULT_CHARS) -> str:
    result = block.result
    if result is None:
        return ""
    hook = getattr(definition, "render_result", None)
    if hook is not None:
        rendered = block.hook_output(hook, result)
        if isinstance(rendered, dict):
            return _bounded(mime_text(rendered), limit, block.name)
    details = result.details if isinstance(result.details, Mapping) else {}
    outputs = details.get("outputs")
    if isinstance(outputs, list) and outputs:
        return _bounded(outputs_text(outputs), limit, block.name)
    return _bounded(content_text(result.content), limit, block.name)


# ---------------------------------------------------------------------- defaults


def _default_call_html(block: ToolCallBlock, live: bool) -> str:
    limit = LIVE_PREVIEW_CHARS if live else FINAL_ARGUMENTS_CHARS
    args = block.shown_arguments()  # while streaming: their end only, redrawn often
    if not args and block.raw.length and live:
        return pre(_shown(block.shown_raw()), limit=limit, tail=True)
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
    shown_by_call = _edits(block.name, block.shown_arguments()) is not None
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
    if len(text) <= limit:
        return text
    if name in TAIL_RESULTS:
        return f"… [{len(text) - limit:,} earlier characters]\n{text[-limit:]}"
    return f"{text[:limit]}\n… [{len(text) - limit:,} more characters]"


def _hook_error(message: str | None) -> str:
    if message is None:
        return ""
    return f'<div style="{MUTED};font-size:12px">render hook failed ({escape(message)}); default view shown</div>'


# ---------------------------------------------------------------------- the static bundle

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
    """A finished turn as HTML, markdown and plain text (what a terminal console shows), in one pass, and its
    metadata. ``definitions``: tool name → its definition (default: the state's own, ``TurnState.definitions``)."""
    lookup: Callable[[str], Any] = definitions or state.definition
    html, markdown, plain = [], [], []
    for block in state.blocks:  # their text was masked as it entered the view model
        if isinstance(block, TextBlock) and block.kind == "thinking" and not state.saves_thinking:
            continue
        if isinstance(block, TextBlock) and block.kind == "thinking":
            html.append(
                f'<details style="margin:4px 0"><summary style="{MUTED};cursor:pointer">Thinking</summary>'
                f'<div style="white-space:pre-wrap;{MUTED};font-size:13px;padding-left:12px">'
                f"{escape(block.text)}</div></details>"
            )
            markdown.append("\n".join("> " + line for line in ["*Thinking*", "", *block.text.splitlines()]))
            plain.append("[thinking]\n" + _indent(block.text))
        elif isinstance(block, TextBlock):
            html.append(f"<div>{markdown_html(block.text)}</div>")
            markdown.append(block.text)
            plain.append(block.text)
        elif isinstance(block, ToolCallBlock):
            definition = lookup(block.name)
            code, language = call_text(block, definition)
            result = rendered_result_text(block, definition)
            html.append(_card_html(block, definition, state, f"{code}\n{result}"))
            status = _status_line(block, state)
            md = [f"**{_md_escape(block.label or block.name)}** `{block.name}` — {status}", "", _fence(code, language)]
            text = [f"── {block.label or block.name} ({block.name}) · {status}", _indent(code)]
            if block.result is not None:
                md += ["", _fence(result, "")]
                text += ["  →", _indent(result)]
            markdown.append("\n".join(md))
            plain.append("\n".join(text))
        else:
            html.append(notice_html(block))
            markdown.append(f"*{_md_escape(_notice_text(block))}*")
            plain.append(f"[{_notice_text(block)}]")
    summary = turn_summary(state)
    html.append(footer_html(summary))
    if summary:
        markdown.append(f"*{_md_escape(summary)}*")
        plain.append(f"── {summary}")
    data = {
        "text/html": f'<div style="{_TURN_STYLE}">{"".join(html)}</div>',
        "text/markdown": "\n\n".join(part for part in markdown if part),
        "text/plain": "\n\n".join(part for part in plain if part),
    }
    return StaticOutput(data, {METADATA_KEY: turn_metadata(state, lookup)})


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
                "arguments": bound_strings(block.shown_arguments(), METADATA_ARGUMENT_CHARS),
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


# ---------------------------------------------------------------------- the static bundle: cards, notices, text


def _card_html(block: ToolCallBlock, definition: Any, state: TurnState, text: str) -> str:
    """A call's card; ``text``: its arguments and result as text (short ones stay open, shown without a click)."""
    color = STATUS_COLORS.get(block.status, "#8a8a8a")
    short = len(text) <= OPEN_CARD_CHARS and text.count("\n") < OPEN_CARD_LINES
    is_open = " open" if block.status in ("error", "denied", "interrupted") or short else ""
    style = (
        f"border:1px solid rgba(127,127,127,.35);border-left:3px solid {color};border-radius:4px;"
        "padding:2px 8px;margin:6px 0"
    )
    summary = header_html(block, state.ended_at or 0.0)
    body = call_html(block, definition) + result_html(block, definition)
    return f'<details{is_open} style="{style}"><summary style="cursor:pointer">{summary}</summary>{body}</details>'


def notice_html(block: NoticeBlock) -> str:
    """A notice between blocks: an error or interruption with its badge, a steering message or compaction muted."""
    if block.kind in ("user", "compaction"):
        return f'<div style="{MUTED};margin:4px 0">{_notice_text(block)[:2]}{escape(block.text)}</div>'
    status = "error" if block.kind == "error" else "interrupted"
    return f'<div style="margin:4px 0">{badge(status)} {escape(block.text)}</div>'  # masked as it entered


def _status_line(block: ToolCallBlock, state: TurnState) -> str:
    parts = [STATUS_TEXT.get(block.status, block.status)]
    elapsed = block.elapsed(state.ended_at or 0.0)
    if elapsed is not None:
        parts.append(format_duration(elapsed))
    decision = _decision(block)
    if decision is not None and block.status != "interrupted":
        parts.append(decision["text"])
    return " · ".join(parts)


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
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)


def _duration(state: TurnState) -> float | None:
    if state.started_at is None or state.ended_at is None:
        return None
    return state.ended_at - state.started_at


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
