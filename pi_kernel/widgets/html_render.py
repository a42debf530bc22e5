"""HTML pieces shared by the live view and the static rendering (no ipywidgets here).

Everything is self-contained: inline styles, no classes, no scripts. Colours
that carry meaning (status, diff lines, syntax) are mid-tone accents or
translucent tints, and text otherwise inherits the page's colour, so one
rendering reads in light and dark themes alike, in JupyterLab, nbconvert and
on GitHub.

Text from the model is always escaped (markdown is rendered with raw HTML
escaped and harmful link schemes dropped): a prompt-injected answer must not
run script in the notebook. Rich HTML from a tool result (a DataFrame's
``_repr_html_``) comes from code the person let run, and is shown as is.
"""

from __future__ import annotations

import base64
import difflib
import html
import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pi_kernel.tools.approval import hidden_marker

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

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def escape(text: str) -> str:
    return html.escape(text, quote=True)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def truncate(text: str, limit: int | None, *, tail: bool = False) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters (its end when ``tail``) and how many were left out."""
    if limit is None or len(text) <= limit:
        return text, 0
    return (text[-limit:] if tail else text[:limit]), len(text) - limit


def omitted_note(count: int, *, before: bool) -> str:
    where = "earlier" if before else "more"
    return f"… {count:,} {where} characters not shown"


def middle_cut(text: str, limit: int | None) -> tuple[str, str, int]:
    """``(head, tail, hidden)``: ``text`` whole as ``head`` when it fits, else its two ends (for a call a
    person approves: never cut at one end only)."""
    if limit is None or len(text) <= limit:
        return text, "", 0
    keep = max(limit // 2, 1)
    return text[:keep], text[-keep:], len(text) - 2 * keep


def hidden_note(count: int) -> str:
    """The warning between the two ends of a call cut by ``middle_cut``."""
    return f'<span style="{HIDDEN_STYLE}">{escape(hidden_marker(count))}</span>'


def pre(text: str, *, limit: int | None = None, tail: bool = False, style: str = "", middle: bool = False) -> str:
    """Escaped preformatted text, bounded; the note says what was left out (``middle``: both ends kept)."""
    if middle:
        head, end, hidden = middle_cut(strip_ansi(text), limit)
        body = escape(head) + (hidden_note(hidden) + escape(end) if hidden else "")
        return f'<pre style="{PRE_STYLE}{style}">{body}</pre>'
    shown, omitted = truncate(strip_ansi(text), limit, tail=tail)
    body = escape(shown)
    if omitted:
        note = f'<span style="{MUTED}">{escape(omitted_note(omitted, before=tail))}</span>'
        body = f"{note}\n{body}" if tail else f"{body}\n{note}"
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
    """Syntax-highlighted code in a ``<pre>``; ``language`` is a lexer name or a file name (``middle``: a
    long text keeps both ends, see ``middle_cut``)."""
    shown, omitted = truncate(code, limit, tail=tail)
    formatter = _formatter()
    lexer = _lexer(language) if formatter is not None and language else None
    if formatter is None or lexer is None:
        return pre(code, limit=limit, tail=tail, middle=middle)
    from pygments import highlight as run_highlight

    if middle:
        head, end, hidden = middle_cut(code, limit)
        body = run_highlight(head, lexer, formatter)
        if hidden:
            body += hidden_note(hidden) + run_highlight(end, lexer, formatter)
        return f'<pre style="{PRE_STYLE}">{body}</pre>'

    body = run_highlight(shown, lexer, formatter)
    if omitted:
        note = f'<span style="{MUTED}">{escape(omitted_note(omitted, before=tail))}</span>'
        body = f"{note}\n{body}" if tail else f"{body}\n{note}"
    return f'<pre style="{PRE_STYLE}">{body}</pre>'


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
    """A unified diff with added and removed lines tinted; ``tail``: its end when cut (a diff being written);
    ``middle``: both ends (see ``middle_cut``)."""
    if middle:
        head, end, hidden = middle_cut(diff, limit)
        if hidden:
            parts = diff_html(head).removesuffix("</pre>"), hidden_note(hidden), diff_html(end).split(">", 1)[1]
            return "".join(parts)
    shown, omitted = truncate(diff, limit, tail=tail)
    if omitted and tail and "\n" in shown:  # a cut first line would read as context, not as + or -
        cut, shown = shown.split("\n", 1)
        omitted += len(cut) + 1
    rows = []
    if omitted and tail:
        rows.append(f'<span style="{MUTED};display:block">{escape(omitted_note(omitted, before=True))}</span>')
    for line in shown.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            rows.append(f'<span style="background:{ADDED_BG};display:block">{escape(line)}</span>')
        elif line.startswith("-") and not line.startswith("---"):
            rows.append(f'<span style="background:{REMOVED_BG};display:block">{escape(line)}</span>')
        elif line.startswith("@@"):
            rows.append(f'<span style="{MUTED};display:block">{escape(line)}</span>')
        else:
            rows.append(f'<span style="display:block">{escape(line) or " "}</span>')
    if omitted and not tail:
        rows.append(f'<span style="{MUTED}">{escape(omitted_note(omitted, before=False))}</span>')
    return f'<pre style="{PRE_STYLE}">{"".join(rows)}</pre>'


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
        return _joined(bundle["text/html"])
    if "image/svg+xml" in bundle:
        return _joined(bundle["image/svg+xml"])
    for mime in _IMAGE_TYPES:
        if mime in bundle:
            return image_html(_joined(bundle[mime]), mime)
    if "text/markdown" in bundle:
        return markdown_html(_joined(bundle["text/markdown"]))
    if "application/json" in bundle:
        return pre(json.dumps(bundle["application/json"], indent=2, ensure_ascii=False, default=str), limit=limit)
    if "text/latex" in bundle:
        return pre(_joined(bundle["text/latex"]), limit=limit)
    return pre(_joined(bundle.get("text/plain", "")), limit=limit)


def mime_text(bundle: Mapping[str, Any]) -> str:
    """The plainest readable text of a MIME bundle."""
    for mime in ("text/plain", "text/markdown", "text/latex"):
        if mime in bundle:
            return strip_ansi(_joined(bundle[mime]))
    kinds = ", ".join(sorted(bundle))
    return f"[{kinds}]"


def mime_bundle_of(value: Any) -> dict[str, Any]:
    """A MIME bundle for a render hook's return value (a str, or an IPython display object)."""
    if isinstance(value, str):
        return {"text/plain": value}
    if isinstance(value, Mapping):
        return dict(value)
    bundle: dict[str, Any] = {}
    method = getattr(value, "_repr_mimebundle_", None)
    if callable(method):
        produced = method()
        data = produced[0] if isinstance(produced, tuple) else produced
        if isinstance(data, Mapping):
            bundle.update(data)
    for mime, name in (
        ("text/html", "_repr_html_"),
        ("text/markdown", "_repr_markdown_"),
        ("image/svg+xml", "_repr_svg_"),
        ("image/png", "_repr_png_"),
        ("image/jpeg", "_repr_jpeg_"),
        ("text/latex", "_repr_latex_"),
    ):
        if mime in bundle or not callable(getattr(value, name, None)):
            continue
        data = getattr(value, name)()
        if isinstance(data, tuple):
            data = data[0]
        if data is None:
            continue
        bundle[mime] = base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else data
    bundle.setdefault("text/plain", repr(value))
    return bundle


def outputs_html(outputs: list[Any], *, limit: int = 20_000) -> str:
    """Notebook-style outputs (``stream``, ``display_data``, ``execute_result``, ``error`` dicts) as HTML."""
    parts = []
    for output in outputs:
        if not isinstance(output, Mapping):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            tint = f";border-left:3px solid {STATUS_COLORS['error']}" if output.get("name") == "stderr" else ""
            parts.append(pre(_joined(output.get("text", "")), limit=limit, tail=True, style=tint))
        elif kind in ("display_data", "execute_result"):
            parts.append(mime_html(output.get("data") or {}, limit=limit))
        elif kind == "error":
            trace = "\n".join(output.get("traceback") or []) or f"{output.get('ename')}: {output.get('evalue')}"
            parts.append(pre(trace, limit=limit, tail=True, style=f";border-left:3px solid {STATUS_COLORS['error']}"))
    return "".join(parts)


def outputs_text(outputs: list[Any]) -> str:
    parts = []
    for output in outputs:
        if not isinstance(output, Mapping):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(strip_ansi(_joined(output.get("text", ""))))
        elif kind in ("display_data", "execute_result"):
            parts.append(mime_text(output.get("data") or {}))
        elif kind == "error":
            parts.append(
                strip_ansi("\n".join(output.get("traceback") or [])) or f"{output.get('ename')}: {output.get('evalue')}"
            )
    return "\n".join(part.rstrip("\n") for part in parts)


def _joined(value: Any) -> str:
    """nbformat allows multi-line strings as lists of lines."""
    if isinstance(value, list):
        return "".join(str(item) for item in value)
    return value if isinstance(value, str) else str(value)
