from __future__ import annotations

from app.each.runner import EachRun, progress_text, summary_text
from engine.wire import FailedEvent
from engine.wire_each import (
    DocumentAnswer,
    EachPlan,
    EachSummary,
    FinishedEvent,
    PlanEvent,
    RowEvent,
)

PATHS = [f"/d/{n}.pdf" for n in range(1, 6)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _row(n: int, *, reused: bool = False) -> RowEvent:
    return RowEvent(
        row=DocumentAnswer(number=n, path=PATHS[n - 1], status="not_stated", reused=reused)
    )


def test_the_estimate_counts_answered_rows_only_and_rows_keep_plan_order() -> None:
    clock = Clock()
    seen: list[int] = []
    run = EachRun(on_row=lambda r: seen.append(r.number), clock=clock)
    run.read([PlanEvent(plan=EachPlan(question="Q", paths=PATHS, mode="extractive"))])
    assert run.eta_s() is None  # nothing answered yet: no pace to go by
    run.read([_row(5, reused=True), _row(4, reused=True)])  # from the last run: free
    clock.now = 10.0
    run.read([_row(2)])
    # One answered in 10 s, two left to answer (two came reused): about 20 s.
    assert run.eta_s() == 20.0
    assert progress_text(run=run) == "3 of 5 documents · 0:10 elapsed · about 0:20 left"
    assert [r.number for r in run.rows()] == [1, 2, 3, 4, 5]
    assert [r.status for r in run.rows()][:3] == ["cancelled", "not_stated", "cancelled"]
    assert seen == [5, 4, 2]


def test_the_stream_ends_with_a_summary_or_says_why_not() -> None:
    run = EachRun()
    run.read(
        [
            PlanEvent(plan=EachPlan(question="Q", paths=PATHS[:1], mode="extractive")),
            FinishedEvent(summary=EachSummary(answered=1, reused=1)),
            _row(1),  # nothing after the summary is read
        ]
    )
    assert run.summary is not None and summary_text(summary=run.summary) == (
        "1 answered, 1 from the last run"
    )
    assert run.finished() == 0 and not run.error
    failed = EachRun()
    failed.read([FailedEvent(message="the engine is shutting down")])
    assert failed.error == "the engine is shutting down"
    cut = EachRun()
    cut.read([])
    assert "ended before" in cut.error
    cancelled = EachRun()
    cancelled.cancel()
    cancelled.read([])
    assert cancelled.error == ""  # a cancel cuts the stream: not an error
