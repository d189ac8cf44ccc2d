"""A count of one kind of work running now: what the engine asks before it does
something of its own that would compete with a person's work (machine timing)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class WorkInHand:
    """How many of one kind of work are running now (thread-safe)."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def one(self) -> Iterator[None]:
        """Counted while the block runs."""
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1

    def any(self) -> bool:
        with self._lock:
            return self._count > 0
