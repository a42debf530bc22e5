"""The ``read`` and ``write`` tools: pi's texts, truncation trailers, images, folders, workspace confinement."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import pytest
from builtin_helpers import call_tool, make_ctx, text_of
from PIL import Image

from pi_kernel.ai import ImageContent
from pi_kernel.tools.builtin import create_read_tool, create_write_tool
from pi_kernel.tools.builtin.output import DEFAULT_MAX_BYTES
from pi_kernel.tools.paths import WorkspaceError

READ = create_read_tool()
WRITE = create_write_tool()


def numbered(count: int) -> str:
    return "\n".join(f"line {i}" for i in range(1, count + 1))


# --------------------------------------------------------------------------- read: text


async def test_read_returns_the_whole_small_file(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    result = await call_tool(READ, {"path": "a.txt"}, make_ctx(tmp_path))
    assert text_of(result) == "alpha\nbeta\n"
    assert result.details == {"path": str(tmp_path / "a.txt"), "truncation": None}


async def test_read_offset_and_limit_point_to_the_rest(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text(numbered(10))
    result = await call_tool(READ, {"path": "n.txt", "offset": 3, "limit": 2}, make_ctx(tmp_path))
    assert text_of(result) == "line 3\nline 4\n\n[6 more lines in file. Use offset=5 to continue.]"
    tail = await call_tool(READ, {"path": "n.txt", "offset": 9}, make_ctx(tmp_path))
    assert text_of(tail) == "line 9\nline 10"


async def test_read_truncates_at_2000_lines_with_pi_trailer(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text(numbered(2500))
    result = await call_tool(READ, {"path": "long.txt"}, make_ctx(tmp_path))
    text = text_of(result)
    assert text.endswith("line 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]")
    assert result.details["truncation"]["truncated_by"] == "lines"
    assert result.details["truncation"]["output_lines"] == 2000
    rest = await call_tool(READ, {"path": "long.txt", "offset": 2001}, make_ctx(tmp_path))
    assert text_of(rest).startswith("line 2001\n") and text_of(rest).endswith("line 2500")


async def test_read_truncates_at_50kb_with_the_limit_named(tmp_path: Path) -> None:
    line = "x" * 99
    (tmp_path / "wide.txt").write_text("\n".join([line] * 1000))  # 100 bytes a line, ~100 KB
    result = await call_tool(READ, {"path": "wide.txt"}, make_ctx(tmp_path))
    shown = DEFAULT_MAX_BYTES // 100  # 512 whole lines fit
    assert text_of(result).endswith(
        f"\n\n[Showing lines 1-{shown} of 1000 (50.0KB limit). Use offset={shown + 1} to continue.]"
    )
    assert result.details["truncation"]["truncated_by"] == "bytes"


async def test_read_single_line_over_the_byte_limit_suggests_bash(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("short\n" + "y" * (60 * 1024) + "\nend")
    result = await call_tool(READ, {"path": "big.txt", "offset": 2}, make_ctx(tmp_path))
    assert text_of(result) == (
        "[Line 2 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '2p' big.txt | head -c 51200]"
    )
    assert result.details["truncation"]["first_line_exceeds_limit"] is True


async def test_read_offset_beyond_end_is_an_error_with_pi_text(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text("a\nb\nc")
    with pytest.raises(ValueError, match=r"^Offset 10 is beyond end of file \(3 lines total\)$"):
        await call_tool(READ, {"path": "s.txt", "offset": 10}, make_ctx(tmp_path))


async def test_read_missing_file_and_directory_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"^File not found: nope\.txt$"):
        await call_tool(READ, {"path": "nope.txt"}, make_ctx(tmp_path))
    (tmp_path / "folder").mkdir()
    with pytest.raises(IsADirectoryError, match="folder is a directory"):
        await call_tool(READ, {"path": "folder"}, make_ctx(tmp_path))


async def test_read_expands_home_and_drops_at_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "notes.txt").write_text("from home")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert text_of(await call_tool(READ, {"path": "~/notes.txt"}, make_ctx(elsewhere))) == "from home"
    assert text_of(await call_tool(READ, {"path": "@../notes.txt"}, make_ctx(elsewhere))) == "from home"


# --------------------------------------------------------------------------- read: images


def image_bytes(fmt: str, size: tuple[int, int] = (4, 3)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("fmt", "mime"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")]
)
async def test_read_image_detected_by_magic_bytes(tmp_path: Path, fmt: str, mime: str) -> None:
    data = image_bytes(fmt)
    (tmp_path / "picture.dat").write_bytes(data)  # the extension says nothing
    result = await call_tool(READ, {"path": "picture.dat"}, make_ctx(tmp_path))
    assert text_of(result) == f"Read image file [{mime}]"
    image = result.content[1]
    assert isinstance(image, ImageContent)
    assert image.mime_type == mime
    assert base64.b64decode(image.data) == data
    assert result.details == {"path": str(tmp_path / "picture.dat"), "mime_type": mime}


async def test_read_large_image_is_scaled_down_with_a_dimension_note(tmp_path: Path) -> None:
    (tmp_path / "wide.png").write_bytes(image_bytes("PNG", (3000, 100)))
    result = await call_tool(READ, {"path": "wide.png"}, make_ctx(tmp_path))
    assert "[Image: original 3000x100, displayed at 2000x67. Multiply coordinates by 1.50" in text_of(result)
    image = result.content[1]
    assert isinstance(image, ImageContent)
    with Image.open(io.BytesIO(base64.b64decode(image.data))) as scaled:
        assert scaled.size == (2000, 67)


# --------------------------------------------------------------------------- write


async def test_write_creates_parent_folders_and_reports_bytes(tmp_path: Path) -> None:
    result = await call_tool(WRITE, {"path": "deep/er/new.txt", "content": "héllo\n"}, make_ctx(tmp_path))
    assert text_of(result) == "Successfully wrote 7 bytes to deep/er/new.txt"  # é is two bytes in UTF-8
    assert (tmp_path / "deep/er/new.txt").read_bytes() == "héllo\n".encode()
    assert result.details == {"path": str(tmp_path / "deep/er/new.txt"), "bytes": 7}


async def test_write_overwrites_and_keeps_newlines_as_given(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old content that is longer")
    await call_tool(WRITE, {"path": "f.txt", "content": "a\r\nb\n"}, make_ctx(tmp_path))
    assert (tmp_path / "f.txt").read_bytes() == b"a\r\nb\n"


async def test_write_through_a_symlink_writes_the_target(tmp_path: Path) -> None:
    (tmp_path / "target.txt").write_text("before")
    (tmp_path / "alias.txt").symlink_to(tmp_path / "target.txt")
    await call_tool(WRITE, {"path": "alias.txt", "content": "after"}, make_ctx(tmp_path))
    assert (tmp_path / "target.txt").read_text() == "after"
    assert (tmp_path / "alias.txt").is_symlink()


# --------------------------------------------------------------------------- workspace confinement


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """``(root, outside)``: a workspace folder and a sibling folder outside it, each with a file."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "inside.txt").write_text("inside")
    (outside / "secret.txt").write_text("secret")
    return root, outside


async def test_read_inside_the_workspace_works(workspace: tuple[Path, Path]) -> None:
    root, _ = workspace
    assert text_of(await call_tool(READ, {"path": "inside.txt"}, make_ctx(root, root))) == "inside"


@pytest.mark.parametrize("spelling", ["absolute", "dotdot"])
async def test_read_and_write_outside_the_workspace_are_refused(workspace: tuple[Path, Path], spelling: str) -> None:
    root, outside = workspace
    path = str(outside / "secret.txt") if spelling == "absolute" else "../outside/secret.txt"
    ctx = make_ctx(root, root)
    with pytest.raises(WorkspaceError) as refused:
        await call_tool(READ, {"path": path}, ctx)
    assert path in str(refused.value) and str(root) in str(refused.value)
    with pytest.raises(WorkspaceError, match="outside the workspace root"):
        await call_tool(WRITE, {"path": path, "content": "pwned"}, ctx)
    assert (outside / "secret.txt").read_text() == "secret"


async def test_symlink_escape_is_refused(workspace: tuple[Path, Path]) -> None:
    root, outside = workspace
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    ctx = make_ctx(root, root)
    with pytest.raises(WorkspaceError, match=r"link\.txt \(resolves to .*secret\.txt\) is outside the workspace root"):
        await call_tool(READ, {"path": "link.txt"}, ctx)
    with pytest.raises(WorkspaceError):
        await call_tool(WRITE, {"path": "linkdir/new.txt", "content": "x"}, ctx)
    assert not (outside / "new.txt").exists()


async def test_symlink_that_stays_inside_the_workspace_is_allowed(workspace: tuple[Path, Path]) -> None:
    root, _ = workspace
    (root / "alias.txt").symlink_to(root / "inside.txt")
    assert text_of(await call_tool(READ, {"path": "alias.txt"}, make_ctx(root, root))) == "inside"
    assert os.path.islink(root / "alias.txt")
