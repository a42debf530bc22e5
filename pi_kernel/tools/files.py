"""Writing files for the user: atomically, and making folders without recursion.

Every file pi-kernel writes for the user (``%pi save``, the ``write`` and
``edit`` tools, the kernelspec) goes through ``write_file_atomic``: the bytes
go to a temporary file in the same folder, are flushed to disk, and replace
the target with one ``os.replace``. A failure at any point (an encoding error
before, a full disk or a denied permission during) leaves the old file as it
was and no temporary file behind. An existing file keeps its permission bits;
a new one gets the usual ``0o666`` minus the umask. A symlink is followed (the
file it points to is replaced, the link stays). The folder must take a new
file (the temporary one): a writable file in a read-only folder is refused
rather than rewritten in place. An existing file the user may not write (made
read-only: ``chmod a-w``) is refused with ``PermissionError`` as ``open(path,
"w")`` would, although a rename needs only the folder's permission. Hard links to the old file keep the old
content.

``make_dirs`` is ``os.makedirs(path, exist_ok=True)`` without its recursion:
a path ``d/d/d/...`` thousands of levels deep raised ``RecursionError``.
"""

from __future__ import annotations

import contextlib
import errno
import os


def make_dirs(path: str | os.PathLike[str]) -> None:
    """Create folder ``path`` and its missing parents (no error when it exists); iterative."""
    missing: list[str] = []
    current = os.path.abspath(os.fspath(path))
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        if not os.path.isdir(folder):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), folder)


def write_file_atomic(path: str | os.PathLike[str], data: bytes, *, make_parents: bool = False) -> str:
    """Replace the file at ``path`` with ``data`` atomically (see the module doc); returns the path written."""
    target = os.path.abspath(os.fspath(path))
    if os.path.islink(target):
        target = os.path.realpath(target)
    folder = os.path.dirname(target)
    if make_parents:
        make_dirs(folder)
    try:
        mode: int | None = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    else:
        if not os.access(target, os.W_OK):  # a rename would replace a file its owner made read-only
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), target)
    temporary = os.path.join(folder, f".pi-write-{os.urandom(8).hex()}.tmp")
    # A new file is created as ``0o666`` minus the umask (the system applies it); a rewrite stays private
    # until it gets the old file's bits.
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return target


def write_text_atomic(path: str | os.PathLike[str], text: str, *, make_parents: bool = False) -> str:
    """``write_file_atomic`` of ``text`` as UTF-8 (encoded first: an encoding error writes nothing)."""
    return write_file_atomic(path, text.encode("utf-8"), make_parents=make_parents)
