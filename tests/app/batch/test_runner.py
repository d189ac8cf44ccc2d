from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from app.batch.runner import BatchResult, BatchRun, summary
from engine.wire import (
    AnswerDone,
    AnswerEvent,
    Citation,
    CitationsEvent,
    DoneEvent,
    FailedEvent,
    TokenEvent,
)
from tests.support.stalls import Stopwatch

CITATION = Citation(
    index=1, chunk_id="c1", path="/d/a.pdf", page=3, text="t", score=1.0, char_start=0, char_end=1
)


class FakeEngine:
    """Answers "Q<n>" after a delay that makes early questions finish last;
    counts how many answers are open at once."""

    def __init__(self, *, delay_s: float = 0.05, block: threading.Event | None = None) -> None:
        self.delay_s = delay_s
        self.block = block
        self.lock = threading.Lock()
        self.open = 0
        self.most_open = 0
        self.asked: list[str] = []
        self.closed = 0

    def ask(self, question: str) -> Iterator[AnswerEvent]:
        with self.lock:
            self.asked.append(question)
            self.open += 1
            self.most_open = max(self.most_open, self.open)
        try:
            yield CitationsEvent(citations=[CITATION])
            if self.block is not None:
                self.block.wait(5)
            if question == "broken":
                raise ConnectionError("the engine stopped answering")
            if question == "refused":
                yield FailedEvent(message="the question was refused")
                return
            n = int(question[1:]) if question[1:].isdigit() else 0
            time.sleep(self.delay_s * (1 + (20 - n) % 4))
            yield TokenEvent(text="A")
            yield DoneEvent(done=AnswerDone(answer=f"A{question[1:]}", mode="extractive"))
        finally:
            with self.lock:
                self.open -= 1
                self.closed += 1


def test_results_in_question_order_with_a_bounded_number_in_flight() -> None:
    engine = FakeEngine()
    questions = [f"Q{i}" for i in range(20)]
    seen: list[tuple[int, int]] = []
    run = BatchRun(
        questions=questions,
        ask=engine.ask,
        max_in_flight=4,
        on_result=lambda r, done: seen.append((r.number, done)),
    )
    assert run.start().wait(timeout_s=20)
    results = run.results()
    assert [r.question for r in results] == questions
    assert [r.answer for r in results] == [f"A{i}" for i in range(20)]
    assert all(r.status == "answered" and r.citations == (CITATION,) for r in results)
    assert all(r.seconds > 0 for r in results)
    assert engine.most_open == 4  # concurrent, and never more than the bound
    assert sorted(n for n, _ in seen) == list(range(1, 21))
    assert [done for _, done in seen] == list(range(1, 21))  # progress only grows
    assert summary(results=results) == "20 answered"


def test_a_failing_question_is_its_own_row() -> None:
    engine = FakeEngine(delay_s=0.001)
    run = BatchRun(questions=["Q1", "broken", "refused", "Q2"], ask=engine.ask).start()
    assert run.wait(timeout_s=10)
    ok1, broken, refused, ok2 = run.results()
    assert (ok1.status, ok2.status) == ("answered", "answered")
    assert broken == BatchResult(
        number=2,
        question="broken",
        status="failed",
        citations=(CITATION,),
        error="the engine stopped answering",
        seconds=broken.seconds,
    )
    assert (refused.status, refused.error) == ("failed", "the question was refused")
    assert summary(results=run.results()) == "2 answered, 2 failed"


def test_cancel_returns_at_once_keeps_the_answers_and_closes_the_streams() -> None:
    block = threading.Event()
    engine = FakeEngine(delay_s=0.001, block=block)
    questions = [f"Q{i}" for i in range(10)]
    results: list[BatchResult] = []
    run = BatchRun(
        questions=questions,
        ask=engine.ask,
        max_in_flight=3,
        on_result=lambda r, _: results.append(r),
    ).start()
    deadline = time.monotonic() + 5
    while engine.open < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    with Stopwatch() as cancelling:
        run.cancel()
        assert run.wait(timeout_s=1)
    assert cancelling.took.own_s < 0.5, cancelling.took
    block.set()  # the open answers now move on, see the cancel and stop
    deadline = time.monotonic() + 5
    while engine.closed < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.closed == 3 and engine.open == 0
    assert len(engine.asked) == 3  # nothing was sent after the cancel
    assert results == []
    assert [r.status for r in run.results()] == ["cancelled"] * 10
    assert run.cancelled


def test_an_empty_list_is_over_at_once() -> None:
    run = BatchRun(questions=[], ask=FakeEngine().ask).start()
    assert run.wait(timeout_s=1) and run.results() == []
