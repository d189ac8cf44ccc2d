"""The pipeline's status on the wire: epoch times, the waiting / retrieval / generation
breakdown, TTFT and tokens per request, tokens/s, and the batch timeline."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from engine.rag.pipeline.requests import Piece, Question
from engine.rag.pipeline.stages import DONE, GenerationJob, Stages
from engine.rag.pipeline.status_info import describe_placement, pipeline_info
from engine.rag.pipeline.workers import Pipeline


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_request_on_a_fake_clock_reads_back_as_its_own_breakdown() -> None:
    clock = Clock()

    def retrieve(questions: Sequence[Question]) -> list[Any]:
        clock.now += 0.5  # the search
        return [q.text for q in questions]

    def generate(jobs: Sequence[GenerationJob]) -> Iterator[tuple[str, Any]]:
        for job in jobs:
            clock.now += 1.0  # prefill
            yield job.request_id, Piece(text="Hello", tokens=2)
            clock.now += 2.0
            yield job.request_id, Piece(text=" there", tokens=3)
            yield job.request_id, DONE

    pipeline = Pipeline(
        stages=Stages(
            retrieve=retrieve,
            generate=generate,
            settled=lambda hits: hits == "unanswerable",
        ),
        clock=clock,
        start=False,
    )
    handle = pipeline.submit(question="q", priority="background")
    clock.now += 1.5  # waits in the retrieval queue
    assert pipeline.retrieval.run_once()
    clock.now += 0.25  # waits in the generation queue
    assert pipeline.generation.run_once()
    assert handle.text(timeout=1) == "Hello there" and handle.tokens == 5
    settled = pipeline.submit(question="unanswerable")
    assert pipeline.retrieval.run_once() and settled.wait(timeout=1)
    assert not pipeline.generation.run_once()  # it never took a generation row

    info = pipeline_info(
        status=pipeline.status(), placement=None, clock=clock, epoch=lambda: clock.now + 1e9
    )
    first, second = info.requests
    assert first.priority == "background" and first.status == "done"
    assert first.waiting_s == pytest.approx(1.75)
    assert first.retrieval_s == pytest.approx(0.5)
    assert first.generation_s == pytest.approx(3.0)
    assert first.latency_s == pytest.approx(5.25)
    assert first.ttft_s == pytest.approx(3.25)  # submitted → "Hello"
    assert first.tokens == 5
    assert first.finished == pytest.approx(105.25 + 1e9)
    assert second.generation_s == 0 and second.tokens == 0 and second.ttft_s is None
    assert info.submitted == info.finished == 2
    # 5 tokens over the 5.75 s since the pipeline started (shorter than 30 s).
    assert info.tokens_per_s == pytest.approx(5 / 5.75, rel=1e-3)
    assert [(b.worker, b.size) for b in info.batches] == [
        ("retrieval", 1),
        ("generation", 1),
        ("retrieval", 1),
    ]
    assert info.batches[0].started == pytest.approx(101.5 + 1e9)
    assert info.placement.startswith("extractive") and info.placement_batch is None


def test_the_timeline_counts_placement_changes() -> None:
    class P:
        batch = 4
        max_batch = 8
        max_retrieval_batch = 16
        layer_tiers = ("cpu", "cpu", "disk")
        resident_partitions = 3

    pipeline = Pipeline(
        stages=Stages(
            retrieve=lambda qs: [None] * len(qs),
            generate=lambda jobs: iter([(j.request_id, DONE) for j in jobs]),
        ),
        start=False,
    )
    pipeline.submit(question="a")
    pipeline.retrieval.run_once()
    placement = P()
    pipeline.set_placement(placement)  # type: ignore[arg-type]
    pipeline.submit(question="b")
    pipeline.retrieval.run_once()
    info = pipeline_info(status=pipeline.status(), placement=placement)  # type: ignore[arg-type]
    assert [b.placement for b in info.batches if b.worker == "retrieval"] == [0, 1]
    assert info.placements_applied == 1 and info.placement_batch == 4
    assert info.retrieval.cap == 16
    assert describe_placement(P()) == (
        "batch 4 (up to 8); layers 2 on cpu, 1 on disk; 3 index partitions resident"
    )
