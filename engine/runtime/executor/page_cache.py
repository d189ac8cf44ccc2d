"""Dropping a model's bytes from the OS page cache, so that the next read comes from the
disk itself: benchmarks call it before every run so that "disk" means disk for every
system compared, and the weight store after streaming a layer it will not keep.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol


class ByteRange(Protocol):
    """Bytes [start, end) of a file: a tensor's (TensorSource in executor/weights.py)."""

    @property
    def file(self) -> Path: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


def evict_page_cache(*, files: list[Path]) -> None:
    """Drop `files` from the OS page cache so the next read comes from the disk itself.

    Benchmarks call this before every run so that "disk" means disk, for every system
    compared. A no-op where posix_fadvise does not exist (macOS, Windows).
    """
    if not hasattr(os, "posix_fadvise"):
        return
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def evict_ranges(sources: Sequence[ByteRange]) -> None:
    """Drop these tensors' byte ranges from the page cache (no-op without posix_fadvise)."""
    if not hasattr(os, "posix_fadvise"):
        return
    by_file: dict[Path, list[ByteRange]] = {}
    for s in sources:
        by_file.setdefault(s.file, []).append(s)
    for file, items in by_file.items():
        fd = os.open(file, os.O_RDONLY)
        try:
            for s in items:
                os.posix_fadvise(fd, s.start, s.end - s.start, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
