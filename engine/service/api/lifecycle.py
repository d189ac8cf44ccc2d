"""Answers in flight, and the shutdown that ends them cleanly.

A shutdown (POST /v1/shutdown or SIGTERM) stops every answer being written: its
stream ends with an error event instead of hanging until the server gives up on
it, and ingestion jobs are cancelled after the file in hand (each file's chunks
are written at once, so what was indexed stays; a later ingest resumes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

from starlette.concurrency import iterate_in_threadpool

from engine.errors import RagdollError

CLOSE_RETRY_S = 0.02
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
    def answer(self, *, cancel: threading.Event | None = None) -> Iterator[threading.Event]:
        """A cancel event for one answer (`cancel`, or a new one), set when the
        engine shuts down and when the answer ends."""
        cancel = cancel or threading.Event()
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


async def until_disconnect(chunks: Iterator[str], *, cancel: threading.Event) -> AsyncIterator[str]:
    """A streamed answer's body: `chunks` (blocking) read in the thread pool, and
    `cancel` set the moment the stream ends for any reason. When the client goes
    away, Starlette cancels the response's task at once, but the blocking generator
    is left suspended and would be closed only when the garbage collector got to
    it, seconds later, while the answer went on being generated to its last token
    (the window's Stop, a batch's Cancel, an OpenAI client that hangs up). `cancel`
    reaches the answer's request in the pipeline, which leaves its queue or its
    batch at the next decode step; the generator is then closed in the background
    (its `finally` blocks free what it holds: a lock, the batch's KV cache)."""
    ended = False
    try:
        async for chunk in iterate_in_threadpool(chunks):
            yield chunk
        ended = True
    finally:
        cancel.set()
        if not ended:
            closer = threading.Thread(
                target=_close_when_idle, args=(chunks,), name="ragdoll-stream-close", daemon=True
            )
            closer.start()


def _close_when_idle(chunks: Iterator[str], *, within_s: float = 60.0) -> None:
    """Close a generator that a pool thread may still be advancing (its step ends
    soon: its request was cancelled)."""
    close = getattr(chunks, "close", None)
    if close is None:
        return
    deadline = time.monotonic() + within_s
    while True:
        try:
            close()
            return
        except ValueError:  # "generator already executing": its step ends soon
            if time.monotonic() > deadline:
                return
            time.sleep(CLOSE_RETRY_S)
