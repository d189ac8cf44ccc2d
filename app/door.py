"""The one way from a worker thread into a QObject, shut when the object is destroyed."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Door:
    """Runs closures (which emit queued signals) only while the owner lives.

    Connect the owner's `destroyed` to `close`: a plain object's method, since
    Qt does not call back into a QObject that is being destroyed. Holding the
    lock across the check and the call (a queued emit only posts an event, so it
    is instant) means the owner cannot be deleted in between."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = True

    @property
    def is_open(self) -> bool:
        return self._open

    def close(self, *_: object) -> None:
        with self._lock:
            self._open = False

    def call(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if self._open:
                fn()
