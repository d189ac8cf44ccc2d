"""Freed memory given back to the system.

glibc keeps what a thread frees in that thread's arena for its later allocations, so
an engine that ingested (parsing, tokenising, embedding in a thread of its own) or
loaded a model held about 0.3 GB it no longer used (docs/benchmarks.md, "The engine's
memory"). `malloc_trim(0)` returns every arena's free pages. Linux with glibc only;
elsewhere nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable


def give_back_freed_memory() -> None:
    """Return the heap's free pages to the system (milliseconds)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # musl and others: no glibc arenas to trim
        return None
    return getattr(libc, "malloc_trim", None)
