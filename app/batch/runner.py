"""Answering a list of questions together, so that the engine can batch them.

All questions go to the engine at once (at most `max_in_flight` open at a time)
as "background" work: the engine batches concurrent background requests, which
is where one person with many questions gains. Each answer lands in its row as
it comes; one failing question does not stop the others; a cancel stops reading
at once and keeps what was answered. Daemon threads rather than an executor: a
stream stuck in a read must never keep the process from exiting after Ctrl-C.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from engine.wire import AnswerEvent, Citation, CitationsEvent, DoneEvent, FailedEvent

Status = Literal["answered", "failed", "cancelled"]
# question -> the engine's answer stream (k and the priority bound by the caller)
AskFn = Callable[[str], Iterable[AnswerEvent]]
MAX_IN_FLIGHT = 16


@dataclass(frozen=True, kw_only=True)
class BatchResult:
    """One row of the table: a question and what became of it."""

    number: int  # 1-based position in the list
    question: str
    status: Status
    answer: str = ""
    mode: str = ""  # "extractive" or "generative" when answered
    citations: tuple[Citation, ...] = field(default=())
    error: str = ""
    seconds: float = 0.0


ResultCallback = Callable[[BatchResult, int], None]  # the result, how many are finished


class BatchRun:
    """One list of questions being answered; `start()` it, then `wait()` or `cancel()`."""

    def __init__(
        self,
        *,
        questions: Sequence[str],
        ask: AskFn,
        max_in_flight: int = MAX_IN_FLIGHT,
        on_result: ResultCallback | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._questions = tuple(questions)
        self._ask = ask
        self._workers = min(max_in_flight, len(self._questions))
        self._on_result = on_result
        self._clock = clock
        self._lock = threading.Lock()
        # Callbacks one at a time, so that a progress line or a table row is
        # never written by two threads at once and `finished` only grows.
        self._report_lock = threading.Lock()
        self._cancel = threading.Event()
        self._over = threading.Event()
        self._next = 0
        self._results: dict[int, BatchResult] = {}
        self._started_at: float | None = None
        if not self._questions:
            self._over.set()

    @property
    def total(self) -> int:
        return len(self._questions)

    @property
    def finished(self) -> int:
        with self._lock:
            return len(self._results)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        """Set by `cancel`: `ask` passes it to the engine client, which then ends
        every open answer at once (one waiting for its turn in the engine's queue
        too) and the engine drops those questions."""
        return self._cancel

    def elapsed_s(self) -> float:
        return 0.0 if self._started_at is None else self._clock() - self._started_at

    def start(self) -> BatchRun:
        self._started_at = self._clock()
        for n in range(self._workers):
            threading.Thread(target=self._work, name=f"ragdoll-batch-{n}", daemon=True).start()
        return self

    def cancel(self) -> None:
        """Stop: no question is sent any more, open answers are dropped at their
        next event; `wait()` returns now."""
        self._cancel.set()
        self._over.set()

    def wait(self, *, timeout_s: float | None = None) -> bool:
        """Until every question is finished or the run is cancelled; False on timeout.
        Waits in short steps so that Ctrl-C reaches the main thread promptly."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._over.wait(0.1):
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    def results(self) -> list[BatchResult]:
        """Every question in list order; those without an answer yet count as cancelled."""
        with self._lock:
            done = dict(self._results)
        return [
            done.get(i) or BatchResult(number=i + 1, question=q, status="cancelled")
            for i, q in enumerate(self._questions)
        ]

    # -- the workers -------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._lock:
                if self._cancel.is_set() or self._next >= len(self._questions):
                    return
                i = self._next
                self._next += 1
            result = self._answer(number=i + 1, question=self._questions[i])
            if result.status == "cancelled":
                return  # cancel() already released the waiter; the row stays unanswered
            with self._report_lock:
                with self._lock:
                    self._results[i] = result
                    finished = len(self._results)
                if self._on_result is not None:
                    self._on_result(result, finished)
            if finished == len(self._questions):
                self._over.set()

    def _answer(self, *, number: int, question: str) -> BatchResult:
        started = self._clock()
        citations: tuple[Citation, ...] = ()

        def row(status: Status, **values: object) -> BatchResult:
            return BatchResult(
                number=number,
                question=question,
                status=status,
                citations=citations,
                seconds=self._clock() - started,
                **values,  # type: ignore[arg-type]
            )

        events = None
        try:
            events = self._ask(question)
            for event in events:
                if self._cancel.is_set():
                    return row("cancelled")
                if isinstance(event, CitationsEvent):
                    citations = tuple(event.citations)
                elif isinstance(event, FailedEvent):
                    return row("failed", error=event.message)
                elif isinstance(event, DoneEvent):
                    return row("answered", answer=event.done.answer, mode=event.done.mode)
            return row("failed", error="the answer stream ended without a result")
        except Exception as e:  # one question's failure is its row's, not the run's
            if self._cancel.is_set():
                return row("cancelled")
            return row("failed", error=str(e).strip() or type(e).__name__)
        finally:
            # Closing the stream tells the engine that nobody reads this answer any more.
            close = getattr(events, "close", None)
            if close is not None:
                close()


def summary(*, results: Sequence[BatchResult]) -> str:
    """ "12 answered, 1 failed, 3 not answered" (the parts that are not zero)."""
    counts = {s: sum(r.status == s for r in results) for s in ("answered", "failed", "cancelled")}
    words = {"answered": "answered", "failed": "failed", "cancelled": "not answered"}
    parts = [f"{n} {words[s]}" for s, n in counts.items() if n]
    return ", ".join(parts) or "no questions"
