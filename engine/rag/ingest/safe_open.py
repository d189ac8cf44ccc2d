"""Opening a listed file without following a symbolic link on its way.

Discovery lists real paths (links resolved, those leading out of the watched folders
refused), but a folder on a listed path can be swapped for a link afterwards: `mv
zdir ..; ln -s /outside zdir` while the job reads other files makes the listed
`docs/zdir/secret.txt` open `/outside/secret.txt`. So a listed file is opened one
component at a time from the root, each folder with `O_DIRECTORY | O_NOFOLLOW`
relative to the handle of the one above (`openat`), the file itself with
`O_NOFOLLOW`: a link anywhere on the way fails the open, and no later swap can
redirect a handle already held. Where the platform has no `openat` (Windows), the
file is opened and its real path and identity checked against what was asked.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from engine.errors import LinkedPathError

SWAPPED = (
    "a folder on its path was replaced by a symbolic link after the folder was listed "
    "(or the file by one): not read"
)
_WALKS = os.name == "posix" and os.open in os.supports_dir_fd
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)


@contextmanager
def open_listed(path: Path) -> Iterator[BinaryIO]:
    """`path` (as discovery listed it: absolute and real) open for reading, or LinkedPathError
    when a component of it is a symbolic link now; other OSErrors as `open` raises
    them. Only regular files open (a FIFO put in its place would block the reader)."""
    fd = open_listed_fd(path)
    with os.fdopen(fd, "rb") as f:
        yield f


def open_listed_fd(path: Path) -> int:
    path = Path(path)
    if not path.is_absolute():  # tools and tests: from here, `..` walked as the entry it is
        path = Path.cwd() / path
    fd = _walk(path) if _WALKS else _open_and_check(path)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk(path: Path) -> int:
    parts = path.parts
    fd = os.open(parts[0], os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for name in parts[1:-1]:
            step = _step(name, dir_fd=fd, flags=os.O_RDONLY | _DIRECTORY | _NOFOLLOW, path=path)
            os.close(fd)
            fd = step
        flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK
        return _step(parts[-1], dir_fd=fd, flags=flags, path=path)
    finally:
        os.close(fd)


def _step(name: str, *, dir_fd: int, flags: int, path: Path) -> int:
    try:
        return os.open(name, flags | _CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        # A link met with O_NOFOLLOW: ELOOP, or ENOTDIR for a folder (some systems).
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(name, dir_fd):
            raise LinkedPathError(path=str(path), link=name) from e
        raise


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _open_and_check(path: Path) -> int:
    """Without openat: open, then the real path must be the one asked and lead to
    the same file as the handle (a swap between the two checks is caught by the second)."""
    fd = os.open(path, os.O_RDONLY | _BINARY | _NOFOLLOW)
    try:
        real = Path(os.path.realpath(path))
        if os.path.normcase(real) != os.path.normcase(path):
            raise LinkedPathError(path=str(path), link=str(real))
        held, there = os.fstat(fd), os.stat(real)
        if (held.st_dev, held.st_ino) != (there.st_dev, there.st_ino):
            raise LinkedPathError(path=str(path), link=str(real))
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_plain_path(path: Path) -> bool:
    """Whether no component of `path` is a symbolic link now (what a document's path
    was when it was read): the source route serves only such documents."""
    try:
        return Path(os.path.realpath(path)) == Path(os.path.normpath(path))
    except (OSError, ValueError):
        return False
