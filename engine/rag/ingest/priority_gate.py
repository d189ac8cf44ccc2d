"""The embedder's one gate: a question's encode goes before ingestion's batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# After a question's encode, ingestion waits this long before its next batch:
# an answer encodes more than once (the question, then its passages' sentences),
# with a search between.
QUESTION_QUIET_S = 1.0


class PriorityGate:
    """One holder at a time; a waiting question goes before any background turn,
    and no background turn starts while a question is encoded, nor `quiet_s`
    after: the rest of its answer (the search, the answer's sentences, which
    are encoded too) then gets the cores, not the next ingestion batch."""

    def __init__(self, *, quiet_s: float = QUESTION_QUIET_S) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._busy_background = False
        self._urgent_waiting = 0
        self._asking = 0
        self._quiet_until = 0.0
        self.quiet_s = quiet_s

    @property
    def background_running(self) -> bool:
        """A background turn is running now."""
        return self._busy and self._busy_background

    @contextmanager
    def asking(self) -> Iterator[None]:
        """A question's encode, through the gate or beside a background turn."""
        with self._cond:
            self._asking += 1
        try:
            yield
        finally:
            with self._cond:
                self._asking -= 1
                self._quiet_until = time.monotonic() + self.quiet_s
                self._cond.notify_all()

    def _background_may_start(self) -> bool:
        if self._busy or self._urgent_waiting or self._asking:
            return False
        return time.monotonic() >= self._quiet_until

    @contextmanager
    def turn(self, *, background: bool) -> Iterator[None]:
        with self._cond:
            if background:
                while not self._background_may_start():
                    left = self._quiet_until - time.monotonic()
                    self._cond.wait(timeout=left if left > 0 else None)
            else:
                self._urgent_waiting += 1
                try:
                    self._cond.wait_for(lambda: not self._busy)
                finally:
                    self._urgent_waiting -= 1
            self._busy = True
            self._busy_background = background
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._busy_background = False
                self._cond.notify_all()
