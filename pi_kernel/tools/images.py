"""Images for the model: bounded in pixels and bytes (pi's ``image-resize.ts`` limits).

An image goes to the model as it is when it fits (at most 2000x2000 pixels
and under 4.5 MB of base64). A larger one is scaled down with Pillow when
Pillow is installed (PNG and JPEG at falling quality are tried, then smaller
sizes), and the model is told the original size so it can map coordinates.
Without Pillow the dimensions cannot be checked; an image over the byte
limit is then left out with a note.

This module sits in ``pi_kernel.tools`` rather than ``tools.builtin``
because ``tools/results.py`` bounds the images any ``@tool`` returns the
same way, and the built-in tools import ``results``: living under
``builtin`` would make that an import cycle.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class FittedImage:
    data: str
    """Base64 of the image bytes."""
    mime_type: str
    note: str | None = None
    """pi's dimension note when the image was scaled, for the model."""


def _base64_size(size: int) -> int:
    return 4 * ((size + 2) // 3)


def verified_image_type(data: bytes) -> str | None:
    """The type of ``data`` when Pillow decodes it as one of ``MODEL_IMAGE_TYPES``, else None.

    For images from untrusted sources (MCP servers): bytes that are not such an
    image would make the provider refuse every later request of the conversation.
    Without Pillow nothing can be verified, so the answer is None.
    """
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
    """The image within the limits, or None when it cannot be brought under them."""
    try:
        from PIL import Image, ImageOps
    except ImportError:
        if _base64_size(len(data)) < MAX_IMAGE_BASE64_BYTES:
            return FittedImage(base64.b64encode(data).decode("ascii"), mime_type)
        return None
    try:
        with Image.open(io.BytesIO(data)) as opened:
            image = ImageOps.exif_transpose(opened)
            image.load()
    except Exception:  # noqa: BLE001 - not decodable by Pillow: send as is if small enough
        if _base64_size(len(data)) < MAX_IMAGE_BASE64_BYTES:
            return FittedImage(base64.b64encode(data).decode("ascii"), mime_type)
        return None
    width, height = image.size
    if width <= MAX_IMAGE_WIDTH and height <= MAX_IMAGE_HEIGHT and _base64_size(len(data)) < MAX_IMAGE_BASE64_BYTES:
        return FittedImage(base64.b64encode(data).decode("ascii"), mime_type)
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


def _encodings(image: object) -> list[tuple[bytes, str]]:
    """PNG, then JPEG at each quality step (JPEG needs RGB)."""
    from PIL import Image

    assert isinstance(image, Image.Image)
    out: list[tuple[bytes, str]] = []
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    out.append((buffer.getvalue(), "image/png"))
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    for quality in _JPEG_QUALITIES:
        buffer = io.BytesIO()
        rgb.save(buffer, format="JPEG", quality=quality)
        out.append((buffer.getvalue(), "image/jpeg"))
    return out
