"""Requests that arrive while a generation batch decodes join it at a step boundary
(`Scheduling(join_running_batch=True)`), as far as eq. 4-8 would batch them with the
rows in flight; never while a placement change waits."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

from engine.rag.pipeline.policies import Fits, Scheduling
from engine.rag.pipeline.requests import Question
from engine.rag.pipeline.stages import DONE, GenerationJob, Stages
from engine.rag.pipeline.workers import Pipeline
from engine.runtime.planner.profiling import PowerLawFit

Incoming = Callable[[], Sequence[GenerationJob]] | None


class Stepper:
    """A generate_batch that decodes `steps` pieces per row and asks `incoming` at
    every step boundary, as the executor does; `on_step` runs before each step."""

    def __init__(self, *, steps: int = 4) -> None:
        self.steps = steps
        self.on_step: Callable[[int], None] = lambda step: None
        self.batches: list[list[str]] = []
        self.joined: list[tuple[int, str]] = []  # (step, question)

    def __call__(self, jobs: Sequence[GenerationJob], incoming: Incoming = None) -> Iterator:
        rows = [[job, 0] for job in jobs]
        self.batches.append([j.question.text for j in jobs])
        step = 0
        while rows:
            self.on_step(step)
            for row in rows:
                job = row[0]
                yield job.request_id, f"{job.question.text}#{row[1]} "
                row[1] += 1
            for row in [r for r in rows if r[1] >= self.steps]:
                yield row[0].request_id, DONE
            rows = [r for r in rows if r[1] < self.steps]
            for job in incoming() if incoming is not None else ():
                self.joined.append((step, job.question.text))
                rows.append([job, 0])
            step += 1


def pipeline_with(stepper: Stepper, *, fit: PowerLawFit | None = None) -> Pipeline:
    def retrieve(questions: Sequence[Question]) -> list[str]:
        return [q.text for q in questions]

    return Pipeline(
        stages=Stages(
            retrieve=retrieve,
            generate=stepper,
        ),
        scheduling=Scheduling(
            join_running_batch=True,
        ),
        fits=Fits(
            generation=fit,
        ),
        start=False,
    )


def test_a_question_asked_mid_batch_joins_it_and_both_answer_in_full() -> None:
    stepper = Stepper(steps=4)
    pipeline = pipeline_with(stepper)
    first = pipeline.submit(question="a")
    pipeline.retrieval.run_once()
    late: list = []

    def arrive(step: int) -> None:
        if step == 1:  # while "a" decodes: asked, retrieved, waiting for generation
            late.append(pipeline.submit(question="b"))
            pipeline.retrieval.run_once()

    stepper.on_step = arrive
    assert pipeline.generation.run_once()
    assert stepper.batches == [["a"]] and stepper.joined == [(1, "b")]
    assert first.text(timeout=1) == "a#0 a#1 a#2 a#3 "
    assert late[0].text(timeout=1) == "b#0 b#1 b#2 b#3 "
    assert not pipeline.generation.run_once()  # nothing left for another batch
    status = pipeline.status()
    (record,) = status.generation.recent
    assert record.size == 2  # the batch as it grew
    # A batch that grew on the way is no sample of T(B).
    assert status.generation.fit_online is False and pipeline.generation._model.samples == ()
    times = late[0].times()
    assert times.generation_started is not None and times.generation_started >= times.retrieved


def test_no_joining_where_eq_7_says_split() -> None:
    # c = 1: two requests in one batch take twice as long; running them one after the
    # other is better on average, so the waiting one does not join.
    stepper = Stepper(steps=3)
    pipeline = pipeline_with(stepper, fit=PowerLawFit(a=1.0, c=1.0, r2=1.0, samples=()))
    pipeline.submit(question="a")
    pipeline.retrieval.run_once()

    def arrive(step: int) -> None:
        if step == 0:
            pipeline.submit(question="b")
            pipeline.retrieval.run_once()

    stepper.on_step = arrive
    pipeline.generation.run_once()
    assert stepper.joined == []
    stepper.on_step = lambda step: None
    pipeline.generation.run_once()
    assert stepper.batches == [["a"], ["b"]]


def test_nothing_joins_while_a_placement_change_waits() -> None:
    stepper = Stepper(steps=6)
    pipeline = pipeline_with(stepper)
    pipeline.submit(question="a")
    pipeline.retrieval.run_once()
    changer: list[threading.Thread] = []

    class Placement:
        batch = 2
        max_batch = 4
        max_retrieval_batch = 8

    def arrive(step: int) -> None:
        if step == 1:
            pipeline.submit(question="b")
            pipeline.retrieval.run_once()
            # The change needs the generation worker's lock, held by this batch: it
            # waits, and from now on the batch admits no one.
            thread = threading.Thread(target=pipeline.generation.set_placement, args=(Placement,))
            thread.start()
            changer.append(thread)
            while not pipeline.generation.placements_waiting:
                threading.Event().wait(0.001)

    stepper.on_step = arrive
    pipeline.generation.run_once()
    changer[0].join(timeout=5)
    assert stepper.joined == [] and pipeline.generation.cap == 4
    stepper.on_step = lambda step: None
    pipeline.generation.run_once()
    assert stepper.batches == [["a"], ["b"]]
