"""A generation batch on a model server: each row one streamed /v1/chat/completions
request, at most `RemoteAnswerer.concurrency` in flight, rows joining as others end,
so that the server's continuous batching does the batching the executor does locally.

It yields what engine/rag/pipeline/adapters.py's `generate_rows` yields (a Piece per
piece of text, DONE per row), and RowFailed for a row the server failed: that
question ends with the server's message while the others go on.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.rag.answer.passages import Passage
from engine.rag.answer.server_client import ChatDelta, ModelServerError
from engine.rag.pipeline.requests import Piece
from engine.rag.pipeline.stages import DONE, GenerationJob, RowFailed, _Done

if TYPE_CHECKING:
    from engine.rag.answer.remote import RemoteAnswerer, ServerRequest

Stream = Iterator[tuple[str, Piece | _Done | RowFailed]]  # adapters.py's, imported there
POLL_S = 0.05  # how often a batch with nothing arriving looks for joining questions


@dataclass(frozen=True, kw_only=True)
class _Ended:
    """A row's request finished (its stream ended without an error)."""


class _Stop:
    """A row's cancel: its caller's, or the whole batch's when the reader left."""

    def __init__(self, *, job: GenerationJob, batch: threading.Event) -> None:
        self._job, self._batch = job, batch

    def is_set(self) -> bool:
        return self._batch.is_set() or self._job.cancel.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        self._batch.wait(timeout)
        return self.is_set()


def remote_rows(
    *,
    answerer: RemoteAnswerer,
    jobs: Sequence[GenerationJob],
    passages: Callable[[GenerationJob], list[Passage]],
    request_of: Callable[[GenerationJob], ServerRequest],
    incoming: Callable[[], Sequence[GenerationJob]] | None = None,
    temperature: float = 0.0,
) -> Stream:
    """The answers to `jobs` (and to those `incoming()` brings) from the server."""
    events: queue.Queue[tuple[int, ChatDelta | _Ended | RowFailed]] = queue.Queue()
    rows: list[GenerationJob] = []
    waiting: deque[int] = deque()
    stop = threading.Event()
    running = 0

    def admit(new: Sequence[GenerationJob]) -> None:
        for job in new:
            rows.append(job)
            waiting.append(len(rows) - 1)

    def run(i: int) -> None:
        job = rows[i]
        try:
            request = request_of(job)
            for delta in answerer.deltas(
                request=request, temperature=temperature, cancel=_Stop(job=job, batch=stop)
            ):
                events.put((i, delta))
            events.put((i, _Ended()))
        except ModelServerError as e:
            events.put((i, RowFailed(message=str(e))))
        except Exception as e:  # one row's failure must not take the batch with it
            events.put((i, RowFailed(message=f"{type(e).__name__}: {e}")))

    admit(jobs)
    try:
        while True:
            while waiting and running < answerer.concurrency:
                i = waiting.popleft()
                if rows[i].cancel.is_set():
                    continue
                running += 1
                threading.Thread(target=run, args=(i,), name="server-row", daemon=True).start()
            if incoming is not None and running + len(waiting) < answerer.concurrency:
                admit(incoming())
                if waiting:
                    continue
            if running == 0 and not waiting:
                return
            try:
                i, item = events.get(timeout=POLL_S)
            except queue.Empty:
                continue
            request_id = rows[i].request_id
            if isinstance(item, ChatDelta):
                if item.text:
                    yield request_id, Piece(text=item.text, tokens=1)
                if item.prompt_tokens:
                    yield request_id, Piece(text="", prompt_tokens=item.prompt_tokens)
                continue
            running -= 1
            yield request_id, (item if isinstance(item, RowFailed) else DONE)
    finally:
        stop.set()  # rows still streaming close their connections at their next piece
