"""Hostile MCP servers (results, tool names, schemas, URLs), approval rules and allowed_models entries."""

from __future__ import annotations

import base64

import mcp_types

from pi_kernel.ai import ImageContent
from pi_kernel.tools.mcp import to_result


def _image_result(data: bytes, mime: str) -> mcp_types.CallToolResult:
    block = mcp_types.ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime)
    return mcp_types.CallToolResult(content=[block])


def test_an_undecodable_image_from_a_server_never_reaches_the_model() -> None:
    """A server's "image/png" that is not an image is passed to the provider as is (``fit_image`` sends
    what Pillow cannot open when it is small): every later request of the conversation is refused (400
    invalid image), so one hostile result makes the session unsendable."""
    result = to_result("evil", "shot", _image_result(b"<html>not an image</html>", "image/png"))
    assert not any(isinstance(part, ImageContent) for part in result.content), result.content


def test_an_image_with_a_mime_type_providers_refuse_is_not_sent() -> None:
    """The server's mime type is copied into the data URL: ``image/x-evil`` or ``image/svg+xml``."""
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'
    result = to_result("evil", "shot", _image_result(svg, "image/svg+xml"))
    assert not any(isinstance(part, ImageContent) for part in result.content), result.content
