"""One per-document run as its reader sees it: the plan, the rows so far, the
progress and its estimate, a cancel. The engine does the work (POST /v1/ask/each);
this reads its stream, for the CLI on its own thread and for the window on a worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from engine.wire import FailedEvent
from engine.wire_each import (
    DocumentAnswer,
    EachEvent,
    EachPlan,
    EachSummary,
    FinishedEvent,
    PlanEvent,
    RowEvent,
)

PlanCallback = Callable[[EachPlan], None]
RowCallback = Callable[[DocumentAnswer], None]


class EachRun:
    """State of one run; `read(events)` fills it (blocking) and calls back as it goes."""

    def __init__(
        self,
        *,
        on_plan: PlanCallback | None = None,
        on_row: RowCallback | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_plan = on_plan
        self._on_row = on_row
        self._clock = clock
        self._lock = threading.Lock()
        self.cancel_event = threading.Event()  # handed to the client: ends the stream
        self.plan: EachPlan | None = None
        self.summary: EachSummary | None = None
        self.error = ""
        self._rows: dict[int, DocumentAnswer] = {}
        self._started = clock()
        self._fresh_since: float | None = None  # when the first answer not reused came

    # -- reading ---------------------------------------------------------------------

    def read(self, events: Iterable[EachEvent]) -> None:
        for event in events:
            if isinstance(event, PlanEvent):
                self.plan = event.plan
                if self._on_plan is not None:
                    self._on_plan(event.plan)
            elif isinstance(event, RowEvent):
                with self._lock:
                    self._rows[event.row.number] = event.row
                if self._on_row is not None:
                    self._on_row(event.row)
            elif isinstance(event, FinishedEvent):
                self.summary = event.summary
                return
            elif isinstance(event, FailedEvent):
                self.error = event.message
                return
        if not self.cancelled and not self.error:
            self.error = "the engine's stream ended before the run finished"

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    # -- where it stands -----------------------------------------------------------------

    @property
    def total(self) -> int:
        return len(self.plan.paths) if self.plan is not None else 0

    def rows(self) -> list[DocumentAnswer]:
        """Every document of the plan in order; those without a row yet as cancelled
        (what a table exported now, or after a cancel, shows)."""
        with self._lock:
            done = dict(self._rows)
        paths = self.plan.paths if self.plan is not None else []
        return [
            done.get(n) or DocumentAnswer(number=n, path=p, status="cancelled")
            for n, p in enumerate(paths, start=1)
        ]

    def finished(self) -> int:
        with self._lock:
            return sum(r.status != "cancelled" for r in self._rows.values())

    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def eta_s(self) -> float | None:
        """Seconds left at the pace of the rows answered so far (reused rows cost
        nothing, so they do not count); None until one has been answered."""
        with self._lock:
            fresh = [r for r in self._rows.values() if not r.reused and r.status != "cancelled"]
            reused = sum(r.reused for r in self._rows.values())
        left = self.total - len(fresh) - reused
        if not fresh or left <= 0:
            return None if left > 0 else 0.0
        return self.elapsed_s() / len(fresh) * left


def progress_text(*, run: EachRun) -> str:
    """ "12 of 50 documents · 1:05 elapsed · about 3:10 left" """
    parts = [f"{run.finished()} of {run.total} documents", f"{_clock(run.elapsed_s())} elapsed"]
    eta = run.eta_s()
    if eta is not None and eta > 0:
        parts.append(f"about {_clock(eta)} left")
    return " · ".join(parts)


def summary_text(*, summary: EachSummary) -> str:
    """ "31 answered, 17 not stated, 2 reused" (the parts that are not zero)."""
    parts = [
        (summary.answered, "answered"),
        (summary.not_stated, "not stated"),
        (summary.failed, "failed"),
        (summary.cancelled, "not answered"),
        (summary.reused, "from the last run"),
    ]
    return ", ".join(f"{n} {word}" for n, word in parts if n) or "no documents"


def _clock(seconds: float) -> str:
    s = max(0, round(seconds))
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )
