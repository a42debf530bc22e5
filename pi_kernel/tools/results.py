"""What a tool returned → the ``AgentToolResult`` the model and the UI receive.

Conversion table (first match wins):

=====================================  ==========================================================
returned value                         result
=====================================  ==========================================================
``AgentToolResult``                    passed through
``str``                                one text block
a content block / non-empty list of    passed through as ``content``
content blocks (text, image)
``bytes`` with PNG/JPEG/GIF/WebP       one ``ImageContent`` with that MIME type (bounded, see
magic                                  below)
other ``bytes``                        UTF-8 text, else ``<N bytes of binary data>``
PIL image, matplotlib Figure/Axes,     one ``ImageContent`` (``image/png``, bounded, see below)
object with ``_repr_png_``
object with ``_repr_mimebundle_``,     text for the model (markdown, else plain text, truncated)
``_repr_markdown_`` or ``_repr_html_`` + the rich form in ``details["display"]``
(a pandas DataFrame, say)
``None``, numbers, ``dict``, ``list``  JSON text (pydantic models through ``model_dump``,
``tuple``, pydantic model, dataclass   dataclasses through ``asdict``, numpy values through
                                       ``tolist``, dates as ISO text, others through ``str``)
anything else                          ``str(value)``
=====================================  ==========================================================

The display convention, for the widgets: ``details["display"]`` is a MIME
bundle (a dict of MIME type → data, as IPython's ``display_data`` carries) or a
list of them, to be shown in order. Text types hold ``str``; image types hold
base64 ``str``. The model never sees ``details``.

**Images for the model** are bounded by ``fit_image`` (pi's ``image-resize.ts`` limits: a provider
rejects a request whose image is too large, and every later request of the run repeats it); ``read``,
``python`` and MCP results use it too. Content blocks and ``AgentToolResult`` values pass through
untouched: a tool that builds them has chosen exactly what the model receives.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import io
import json
import reprlib
import sys
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import ImageContent, TextContent

MAX_IMAGE_WIDTH = 2000
MAX_IMAGE_HEIGHT = 2000
MAX_IMAGE_BASE64_BYTES = int(4.5 * 1024 * 1024)
"""Below Anthropic's 5 MB limit, as pi chose; other providers accept it too."""
_JPEG_QUALITIES = (80, 85, 70, 55, 40)
MODEL_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types every provider accepts."""
_PILLOW_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
IMAGE_OMITTED_NOTE = "[Image omitted: could not be resized below the inline image size limit.]"
"""What the model reads in place of an image ``fit_image`` could not bring under the limits."""


@dataclasses.dataclass(frozen=True, slots=True)
class FittedImage:
    data: str
    """Base64 of the image bytes."""
    mime_type: str
    note: str | None = None
    """pi's dimension note when the image was scaled, for the model."""


def _base64_size(size: int) -> int:
    return 4 * ((size + 2) // 3)


def _as_is(data: bytes, mime_type: str) -> FittedImage | None:
    """The image unchanged when its base64 is under the byte limit, else None."""
    if _base64_size(len(data)) < MAX_IMAGE_BASE64_BYTES:
        return FittedImage(base64.b64encode(data).decode("ascii"), mime_type)
    return None


def verified_image_type(data: bytes) -> str | None:
    """The type of ``data`` when Pillow decodes it as one of ``MODEL_IMAGE_TYPES``, else None (also without
    Pillow). For images from untrusted sources (MCP servers): bytes that are not such an image would make the
    provider refuse every later request of the conversation."""
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(data)) as opened:
            image_format = opened.format
            opened.load()
    except Exception:  # noqa: BLE001 - anything Pillow cannot decode is not an image to send
        return None
    return _PILLOW_FORMATS.get(image_format or "")


def fit_image(data: bytes, mime_type: str) -> FittedImage | None:
    """The image within the limits (at most 2000x2000 pixels, under 4.5 MB of base64), or None when it cannot
    be brought under them. A larger one is scaled down with Pillow (PNG, then JPEG at falling quality, then
    smaller sizes) with pi's dimension note; without Pillow only the byte limit can be checked."""
    try:
        from PIL import Image, ImageOps
    except ImportError:
        return _as_is(data, mime_type)
    try:
        with Image.open(io.BytesIO(data)) as opened:
            image = ImageOps.exif_transpose(opened)
            image.load()
    except Exception:  # noqa: BLE001 - not decodable by Pillow: send as is if small enough
        return _as_is(data, mime_type)
    width, height = image.size
    if width <= MAX_IMAGE_WIDTH and height <= MAX_IMAGE_HEIGHT and (as_is := _as_is(data, mime_type)) is not None:
        return as_is
    target_width, target_height = width, height
    if target_width > MAX_IMAGE_WIDTH:
        target_height, target_width = max(1, round(target_height * MAX_IMAGE_WIDTH / target_width)), MAX_IMAGE_WIDTH
    if target_height > MAX_IMAGE_HEIGHT:
        target_width, target_height = max(1, round(target_width * MAX_IMAGE_HEIGHT / target_height)), MAX_IMAGE_HEIGHT
    while True:
        resized = image.resize((target_width, target_height), Image.Resampling.LANCZOS)
        for encoded, mime in _encodings(resized):
            if _base64_size(len(encoded)) < MAX_IMAGE_BASE64_BYTES:
                note = (
                    f"[Image: original {width}x{height}, displayed at {target_width}x{target_height}. "
                    f"Multiply coordinates by {width / target_width:.2f} to map to original image.]"
                )
                return FittedImage(base64.b64encode(encoded).decode("ascii"), mime, note)
        if target_width == 1 and target_height == 1:
            return None
        target_width = max(1, int(target_width * 0.75))
        target_height = max(1, int(target_height * 0.75))


def _encodings(image: Any) -> Iterator[tuple[bytes, str]]:
    """A Pillow image as PNG, then as JPEG at each quality step (JPEG needs RGB)."""
    yield _encoded(image, "PNG"), "image/png"
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    for quality in _JPEG_QUALITIES:
        yield _encoded(rgb, "JPEG", quality=quality), "image/jpeg"


def _encoded(image: Any, image_format: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=image_format, **options)
    return buffer.getvalue()


MAX_SUMMARY_CHARS = 20_000
"""Longest text summary of a rich object (a DataFrame's text form) sent to the model."""

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def to_agent_tool_result(value: Any) -> AgentToolResult:
    """Convert whatever a tool returned into an ``AgentToolResult`` (see the module table)."""
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, str):
        return AgentToolResult([TextContent(value)])
    if isinstance(value, (TextContent, ImageContent)):
        return AgentToolResult([value])
    if isinstance(value, list) and value and all(isinstance(item, (TextContent, ImageContent)) for item in value):
        return AgentToolResult(list(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_result(bytes(value))
    if (png := image_png_bytes(value)) is not None:
        return AgentToolResult(image_blocks(fit_image(png, "image/png")))
    if (rich := _rich_result(value)) is not None:
        return rich
    if _is_json_like(value):
        return AgentToolResult([TextContent(to_json_text(value))])
    return AgentToolResult([TextContent(str(value))])


def image_blocks(fitted: FittedImage | None, omitted: str = IMAGE_OMITTED_NOTE) -> list[TextContent | ImageContent]:
    """The content of a ``fit_image`` result: pi's dimension note when scaled, then the image; ``omitted``
    when it could not be fitted."""
    if fitted is None:
        return [TextContent(omitted)]
    image = ImageContent(fitted.data, fitted.mime_type)
    return [TextContent(fitted.note), image] if fitted.note else [image]


def image_mime_type(data: bytes) -> str | None:
    """The MIME type when ``data`` starts with a known image signature."""
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _bytes_result(data: bytes) -> AgentToolResult:
    if (mime := image_mime_type(data)) is not None:
        return AgentToolResult(image_blocks(fit_image(data, mime)))
    try:
        return AgentToolResult([TextContent(data.decode("utf-8"))])
    except UnicodeDecodeError:
        return AgentToolResult([TextContent(f"<{len(data)} bytes of binary data>")])


def image_png_bytes(value: Any) -> bytes | None:
    """PNG bytes of a PIL image, a matplotlib figure or axes, or a ``_repr_png_`` object; else None.
    PIL and matplotlib are looked up in ``sys.modules`` only: a value of their types cannot exist unless
    they were imported."""
    pil_image = sys.modules.get("PIL.Image")
    if pil_image is not None and isinstance(value, pil_image.Image):
        image = value if value.mode in ("1", "L", "LA", "I", "P", "RGB", "RGBA") else value.convert("RGBA")
        return _encoded(image, "PNG")
    figure_module = sys.modules.get("matplotlib.figure")
    if figure_module is not None:
        axes_module = sys.modules.get("matplotlib.axes")
        if axes_module is not None and isinstance(value, axes_module.Axes):
            value = value.get_figure()
        if isinstance(value, figure_module.Figure):
            buffer = io.BytesIO()
            value.savefig(buffer, format="png", bbox_inches="tight")
            return buffer.getvalue()
    if isinstance(value, type):
        return None
    data = _call_repr(value, "_repr_png_")
    if isinstance(data, str):
        return base64.b64decode(data)
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    return None


def _rich_result(value: Any) -> AgentToolResult | None:
    """Text for the model, MIME bundle for the UI, for objects IPython would display richly."""
    if isinstance(value, type):
        return None
    bundle = display_bundle(value)
    if bundle is None:
        return None
    # ``str`` of a DataFrame honours pandas' display limits; ``to_string`` would print every row.
    summary = bundle.get("text/markdown") or str(value)
    bundle.setdefault("text/plain", summary)
    return AgentToolResult([TextContent(truncate_summary(summary))], details={"display": bundle})


def display_bundle(value: Any) -> dict[str, Any] | None:
    """The MIME bundle of an object with ``_repr_mimebundle_`` / ``_repr_markdown_`` / ``_repr_html_``."""
    bundle: dict[str, Any] = {}
    data = _call_repr(value, "_repr_mimebundle_", include=None, exclude=None)
    if isinstance(data, Mapping):
        bundle.update(data)
    for mime, method in (("text/markdown", "_repr_markdown_"), ("text/html", "_repr_html_")):
        if mime not in bundle:
            text = _call_repr(value, method)
            if isinstance(text, str):
                bundle[mime] = text
    if not bundle.keys() & {"text/markdown", "text/html"} and not any(key.startswith("image/") for key in bundle):
        return None
    return bundle


def _call_repr(value: Any, method_name: str, **kwargs: Any) -> Any:
    """Call an IPython ``_repr_*_`` method (its data when it gives ``(data, metadata)``); a missing or failing
    one gives None, as in IPython."""
    method = getattr(value, method_name, None)
    if not callable(method):
        return None
    try:
        produced = method(**kwargs)
    except Exception:  # noqa: BLE001 - a broken rich repr falls back to plain text, as IPython does
        return None
    return produced[0] if isinstance(produced, tuple) else produced


def truncate_summary(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters truncated]"


def _is_json_like(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, (bool, int, float, dict, list, tuple, set, frozenset, BaseModel, Decimal, enum.Enum))
        or (dataclasses.is_dataclass(value) and not isinstance(value, type))
        or _numpy_value(value)
    )


def _numpy_value(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "tolist")


_DEEP_REPR = reprlib.Repr()
_DEEP_REPR.maxlevel = 20
_DEEP_REPR.maxstring = _DEEP_REPR.maxother = 200


def to_json_text(value: Any) -> str:
    """JSON text for the model (a value nested deeper than the serializer recurses: a bounded ``repr``)."""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    except RecursionError:
        return f"[value nested too deeply for JSON; shown to depth {_DEEP_REPR.maxlevel}] {_DEEP_REPR.repr(value)}"


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if _numpy_value(value):
        return value.tolist()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)  # Decimal, UUID, paths and the rest
