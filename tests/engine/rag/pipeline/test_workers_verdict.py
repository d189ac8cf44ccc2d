"""The workers with a two-step retrieval (search, then a verdict): a question the
verdict has to read goes to generation before it, what generation writes is held
until the verdict, and a question the verdict settles is stopped and finishes as it
would have without the early start."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from engine.rag.pipeline.requests import Event, Finished, Piece, Question, Retrieved
from engine.rag.pipeline.stages import DONE, GenerationJob, Stages
from engine.rag.pipeline.workers import Pipeline

WAIT_S = 10.0


class Fakes:
    """search gives "searched(q)", the verdict waits for `verdict_may_go` and refuses
    the questions in `refuse`; generation writes `pieces` pieces per row, noting
    which it wrote and when its rows were stopped."""

    def __init__(self, *, refuse: Sequence[str] = (), pieces: int = 3, step_s: float = 0.0):
        self.refuse = set(refuse)
        self.pieces = pieces
        self.step_s = step_s  # each step's time (a row may be stopped between steps)
        self.verdict_may_go = threading.Event()
        self.generation_began = threading.Event()
        self.written: list[str] = []
        self.stopped: list[str] = []
        self.generated_from: list[object] = []
        self.judged: list[str] = []

    def search(self, questions: Sequence[Question]) -> list[str]:
        return [f"searched({q.text})" for q in questions]

    def judge(self, question: Question, searched: object) -> str:
        assert self.verdict_may_go.wait(WAIT_S)
        self.judged.append(question.text)
        if question.text in self.refuse:
            return "nothing"
        return f"verdict({searched})"

    def generate(self, jobs: Sequence[GenerationJob]) -> Iterator[tuple[str, object]]:
        self.generated_from.extend(j.hits for j in jobs)
        self.generation_began.set()
        try:
            for i in range(self.pieces):
                for j in jobs:
                    if j.cancel.is_set():
                        if j.question.text not in self.stopped:
                            self.stopped.append(j.question.text)
                        continue
                    self.written.append(f"{j.question.text}:{i}")
                    yield j.request_id, f"{j.question.text}:{i} "
                time.sleep(self.step_s)
            for j in jobs:
                if not j.cancel.is_set():
                    yield j.request_id, DONE
        except GeneratorExit:  # the worker freed the batch: every row stopped
            self.stopped.extend(
                j.question.text for j in jobs if j.question.text not in self.stopped
            )
            raise


def pipeline(fakes: Fakes, *, speculate: bool = True) -> Pipeline:
    return Pipeline(
        stages=Stages(
            retrieve=fakes.search,
            generate=fakes.generate,
            judge=fakes.judge,
            speculate=(lambda searched: True) if speculate else None,
            settled=lambda hits: hits == "nothing",
        ),
    )


def read_all(events: Iterator[Event]) -> list[Event]:
    return list(events)


def test_generation_starts_before_the_verdict_and_its_text_waits_for_it() -> None:
    fakes = Fakes()
    pipe = pipeline(fakes)
    try:
        handle = pipe.submit(question="q")
        assert fakes.generation_began.wait(WAIT_S)
        # The model began from the search's hits; the reader has seen nothing yet.
        assert fakes.generated_from == ["searched(q)"]
        assert handle.next_event(timeout=0.3) is None
        fakes.verdict_may_go.set()
        events = read_all(handle.events(timeout=WAIT_S))
        assert isinstance(events[0], Retrieved) and events[0].hits == "verdict(searched(q))"
        assert [e.text for e in events if isinstance(e, Piece)] == ["q:0 ", "q:1 ", "q:2 "]
        assert events[-1] == Finished(status="done")
        times = handle.times()
        assert times.first_token is not None and times.retrieved is not None
        assert times.first_token >= times.retrieved  # released by the verdict, not before
    finally:
        pipe.close()


def test_a_refused_question_begun_early_finishes_as_a_refusal_and_stops_its_row() -> None:
    fakes = Fakes(refuse=["q"], pieces=200, step_s=0.01)
    pipe = pipeline(fakes)
    try:
        handle = pipe.submit(question="q")
        assert fakes.generation_began.wait(WAIT_S)
        fakes.verdict_may_go.set()
        events = read_all(handle.events(timeout=WAIT_S))
        # Exactly what a refusal at retrieval gives: the verdict, then done, no text.
        assert events == [Retrieved(hits="nothing"), Finished(status="done")]
        assert handle.tokens == 0
        pipe.close()  # the generation batch ends first
        assert fakes.stopped == ["q"]
        assert len(fakes.written) < 200
        assert pipe.status().finished == 1
    finally:
        pipe.close()


def test_the_refusal_is_the_same_with_and_without_the_early_start() -> None:
    outcomes = []
    for speculate in (True, False):
        fakes = Fakes(refuse=["q"])
        fakes.verdict_may_go.set()
        pipe = pipeline(fakes, speculate=speculate)
        try:
            outcomes.append(read_all(pipe.submit(question="q").events(timeout=WAIT_S)))
        finally:
            pipe.close()
    assert outcomes[0] == outcomes[1] == [Retrieved(hits="nothing"), Finished(status="done")]


def test_a_row_finished_before_its_verdict_waits_for_it_before_the_stream_goes_on() -> None:
    """The executor stores a finished row's answer KV when the stream is asked for
    more or closed: the worker does either only after the verdict, so a refusal
    stops the row first."""
    fakes = Fakes(refuse=["q"], pieces=1)
    asked_after_done = threading.Event()
    cancel_seen: list[bool] = []

    def generate(jobs: Sequence[GenerationJob]) -> Iterator[tuple[str, object]]:
        (job,) = jobs
        fakes.generation_began.set()
        yield job.request_id, "text "
        try:
            yield job.request_id, DONE
        finally:  # asked for more, or closed: where the executor stores the answer's KV
            cancel_seen.append(job.cancel.is_set())
            asked_after_done.set()

    pipe = Pipeline(
        stages=Stages(
            retrieve=fakes.search,
            generate=generate,
            judge=fakes.judge,
            speculate=lambda searched: True,
            settled=lambda hits: hits == "nothing",
        ),
    )
    try:
        handle = pipe.submit(question="q")
        assert fakes.generation_began.wait(WAIT_S)
        assert not asked_after_done.wait(0.3)  # held at the row's end
        fakes.verdict_may_go.set()
        assert read_all(handle.events(timeout=WAIT_S))[-1] == Finished(status="done")
        assert asked_after_done.wait(WAIT_S)
        assert cancel_seen == [True]
    finally:
        pipe.close()


def test_a_failing_verdict_fails_the_question_begun_early() -> None:
    fakes = Fakes()

    def judge(question: Question, searched: object) -> str:
        assert fakes.generation_began.wait(WAIT_S)
        raise OSError("the index went away")

    pipe = Pipeline(
        stages=Stages(
            retrieve=fakes.search,
            generate=fakes.generate,
            judge=judge,
            speculate=lambda searched: True,
        ),
    )
    try:
        handle = pipe.submit(question="q")
        events = read_all(handle.events(timeout=WAIT_S))
        assert not any(isinstance(e, Piece) for e in events)
        assert isinstance(events[-1], Finished) and events[-1].status == "error"
        assert "the index went away" in events[-1].error
    finally:
        pipe.close()


def test_cancelled_while_held_it_finishes_cancelled_with_no_text() -> None:
    fakes = Fakes(pieces=200, step_s=0.01)
    pipe = pipeline(fakes)
    try:
        handle = pipe.submit(question="q")
        assert fakes.generation_began.wait(WAIT_S)
        handle.cancel()
        fakes.verdict_may_go.set()
        events = read_all(handle.events(timeout=WAIT_S))
        assert not any(isinstance(e, Piece) for e in events)
        assert events[-1] == Finished(status="cancelled")
    finally:
        pipe.close()


@pytest.mark.parametrize("speculate", [False, True])
def test_questions_not_picked_wait_for_their_verdict(speculate: bool) -> None:
    """Without `speculate` (or for a question it does not pick) the verdict comes
    first and generation starts from it, as before."""
    fakes = Fakes()
    pipe = Pipeline(
        stages=Stages(
            retrieve=fakes.search,
            generate=fakes.generate,
            judge=fakes.judge,
            speculate=(lambda searched: False) if speculate else None,
        ),
    )
    try:
        handle = pipe.submit(question="q")
        assert not fakes.generation_began.wait(0.3)
        fakes.verdict_may_go.set()
        assert handle.text(timeout=WAIT_S) == "q:0 q:1 q:2 "
        assert fakes.generated_from == ["verdict(searched(q))"]
    finally:
        pipe.close()


def test_each_question_goes_on_at_its_own_verdict_not_its_batch_s() -> None:
    """A batch of questions of one document each (ask each) is judged one question
    after the other: the first is in the generation queue while the next is read."""
    fakes = Fakes()
    fakes.verdict_may_go.set()
    queued_at_verdict: list[tuple[str, int]] = []

    def judge(question: Question, searched: object) -> str:
        queued_at_verdict.append((question.text, pipe.generation.backlog))
        return fakes.judge(question, searched)

    pipe = Pipeline(
        stages=Stages(retrieve=fakes.search, generate=fakes.generate, judge=judge),
        start=False,
    )
    first, second, third = (pipe.submit(question=q) for q in ("a", "b", "c"))
    assert pipe.retrieval.run_once()  # one batch of three
    assert queued_at_verdict == [("a", 0), ("b", 1), ("c", 2)]
    assert pipe.generation.run_once()
    assert [h.text(timeout=WAIT_S) for h in (first, second, third)] == [
        "a:0 a:1 a:2 ",
        "b:0 b:1 b:2 ",
        "c:0 c:1 c:2 ",
    ]


def test_a_verdict_that_fails_fails_its_question_and_the_rest_not_those_handed_on() -> None:
    fakes = Fakes()
    fakes.verdict_may_go.set()

    def judge(question: Question, searched: object) -> str:
        if question.text == "b":
            raise OSError("the index went away")
        return fakes.judge(question, searched)

    pipe = Pipeline(
        stages=Stages(
            retrieve=fakes.search,
            generate=fakes.generate,
            judge=judge,
            speculate=lambda searched: searched == "searched(c)",
        ),
        start=False,
    )
    first, second, third = (pipe.submit(question=q) for q in ("a", "b", "c"))
    assert pipe.retrieval.run_once()
    for failed in (second, third):  # the one begun early (c) is released with the error
        assert failed.outcome is not None and failed.outcome.status == "error"
        assert "the index went away" in failed.outcome.error
    assert pipe.generation.run_once()
    assert first.text(timeout=WAIT_S) == "a:0 a:1 a:2 "
    assert not any(isinstance(e, Piece) for e in read_all(third.events(timeout=WAIT_S)))
    # The worker goes on with the next batch.
    later = pipe.submit(question="d")
    assert pipe.retrieval.run_once() and pipe.generation.run_once()
    assert later.text(timeout=WAIT_S) == "d:0 d:1 d:2 "
