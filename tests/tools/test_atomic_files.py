"""Every file written for the user is atomic, and folders of any depth are made without recursion."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from builtin_helpers import call_tool, make_ctx, text_of

from pi_kernel.ai import AssistantMessage, TextContent
from pi_kernel.kernel.persistence import save_conversation
from pi_kernel.tools.builtin import create_edit_tool, create_write_tool
from pi_kernel.tools.files import make_dirs, write_file_atomic

DEPTH = sys.getrecursionlimit() + 500


def remove_tree(root: Path) -> None:
    """Remove ``root`` without recursion: pytest (shutil.rmtree on Python 3.11) recurses once per level,
    and a left-over tree this deep makes its clean-up of old temporary folders fail a later run."""
    found: list[str] = []
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        found.append(folder)
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                os.unlink(entry.path)
    for folder in reversed(found):
        os.rmdir(folder)


@pytest.fixture
def deep_root(tmp_path: Path) -> Iterator[Path]:
    """A folder for a tree deeper than the recursion limit, removed without recursion afterwards."""
    root = tmp_path / "deep"
    root.mkdir()
    yield root
    remove_tree(root)


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)

    with pytest.raises(TypeError):
        write_file_atomic(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["notes.txt"]
    write_file_atomic(target, b"new")
    assert target.read_bytes() == b"new" and stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_a_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("a")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_file_atomic(link, b"b")
    assert link.is_symlink() and real.read_text() == "b"


def test_make_dirs_of_any_depth_without_recursion(deep_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(deep_root)
    deep = os.path.join(*(["d"] * DEPTH))
    with pytest.raises(RecursionError):
        os.makedirs(deep)  # what the write tool used: it recurses once per level
    make_dirs(deep)
    assert os.path.isdir(deep)
    make_dirs(deep)  # exists: fine


async def test_write_into_a_deep_path(deep_root: Path) -> None:
    path = "d/" * DEPTH + "f.txt"
    result = await call_tool(create_write_tool(), {"path": path, "content": "x"}, make_ctx(deep_root))
    assert text_of(result).startswith("Successfully wrote 1 bytes")
    assert (deep_root / path).read_text() == "x"


async def test_a_failed_write_or_edit_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up while the new content is written: the old content stays."""
    target = tmp_path / "keep.txt"
    target.write_text("old text")

    def disk_full(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        await call_tool(create_write_tool(), {"path": "keep.txt", "content": "new"}, make_ctx(tmp_path))
    assert target.read_text() == "old text"
    edit = {"path": "keep.txt", "edits": [{"oldText": "old", "newText": "new"}]}
    with pytest.raises(OSError, match="No space left"):
        await call_tool(create_edit_tool(), edit, make_ctx(tmp_path))
    assert target.read_text() == "old text" and os.listdir(tmp_path) == ["keep.txt"]


def test_a_failing_save_leaves_the_previous_save(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    save_conversation(path, [AssistantMessage([TextContent("first")])])
    before = path.read_bytes()
    # A string the encoder rejects (a message that did not pass through the transcript's entry).
    with pytest.raises(UnicodeEncodeError):
        save_conversation(path, [AssistantMessage([TextContent("bad \ud800")])])
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["chat.jsonl"]


def test_a_cell_id_that_is_not_valid_unicode_does_not_break_save(tmp_path: Path) -> None:
    path = save_conversation(tmp_path / "c.jsonl", [AssistantMessage([TextContent("x")])], cells={"cell\ud800": 0})
    assert "cell\ufffd" in path.read_text(encoding="utf-8")


def _as_unprivileged_user(path: str) -> str:
    """In a child process (as ``nobody`` when run as root): what writing a read-only ``path`` does."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(read_end)
        outcome = "?"
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            try:
                with open(path, "w"):
                    pass
                outcome = "open(w) allowed"
            except PermissionError:
                try:
                    write_file_atomic(path, b"overwritten")
                    outcome = "atomic write replaced a read-only file"
                except PermissionError:
                    outcome = "refused"
        except BaseException as error:  # noqa: BLE001
            outcome = f"child error: {error!r}"
        os.write(write_end, outcome.encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return pipe.read().decode()


def test_a_read_only_file_is_not_replaced() -> None:
    """A rename needs only the folder's permission: a file its owner made read-only is refused, as by
    ``open(path, "w")``. As root, the check runs in a forked child that drops to ``nobody``."""
    folder = tempfile.mkdtemp(prefix="r11b-ro-")
    try:
        os.chmod(folder, 0o777)  # a folder the user may write in
        path = os.path.join(folder, "notes.txt")
        with open(path, "w") as file:
            file.write("protected")
        os.chmod(path, 0o444)
        if os.geteuid() == 0:
            os.chown(path, 65534, 65534)  # the user's own file, made read-only by them
        outcome = _as_unprivileged_user(path)
        if outcome == "open(w) allowed":
            pytest.skip("cannot make a read-only file on this machine")
        with open(path) as file:
            content = file.read()
        assert (outcome, content) == ("refused", "protected")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
