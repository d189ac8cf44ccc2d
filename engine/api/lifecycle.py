"""Answers in flight, and the shutdown that ends them cleanly.

A shutdown (POST /v1/shutdown or SIGTERM) stops every answer being written: its
stream ends with an error event instead of hanging until the server gives up on
it, and ingestion jobs are cancelled after the file in hand (each file's chunks
are written at once, so what was indexed stays; a later ingest resumes).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from engine.errors import RagdollError

STOPPING_MESSAGE = "The engine is shutting down; the answer was cut short."


class EngineStoppingError(RagdollError, RuntimeError):
    """Raised inside an answer stream when the engine begins to shut down."""

    def __init__(self) -> None:
        super().__init__(STOPPING_MESSAGE)


class Lifecycle:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: set[threading.Event] = set()
        self.stopping = threading.Event()

    @contextmanager
    def answer(self) -> Iterator[threading.Event]:
        """A cancel event for one answer, set when the engine shuts down."""
        cancel = threading.Event()
        with self._lock:
            self._answers.add(cancel)
            if self.stopping.is_set():
                cancel.set()
        try:
            yield cancel
        finally:
            cancel.set()  # the client went away or we finished: stop generating
            with self._lock:
                self._answers.discard(cancel)

    def check(self) -> None:
        """Between two events of a stream: raise once a shutdown has begun."""
        if self.stopping.is_set():
            raise EngineStoppingError

    @property
    def answers_active(self) -> int:
        with self._lock:
            return len(self._answers)

    def begin_shutdown(self) -> None:
        self.stopping.set()
        with self._lock:
            for cancel in self._answers:
                cancel.set()
