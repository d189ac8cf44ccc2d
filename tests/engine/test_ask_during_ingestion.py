"""A whole answer (extractive, through the engine's answering pipeline) while a long
file is being embedded: it comes at once and the ingestion goes on. The embedder's
vectors come from a hash and each ingestion batch takes `BATCH_S` (the real gate,
batching and tokenizer), so the test does not depend on the machine's speed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.ingest_many import StandInEmbedder
from engine.paths import resolve_paths
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.jobs import IngestJob
from engine.service.core import Engine
from engine.wire import FINAL_STATES, DoneEvent, IngestProgress
from tests.support.stalls import Stopwatch

BATCH_S = 1.0


def _long_manual(paragraphs: int) -> str:
    return "\n\n".join(
        f"Paragraph {i} explains step {i} of repairing the old greenhouse roof, "
        + "with the glass panes, the putty and the wooden frames described in detail. " * 6
        for i in range(paragraphs)
    )


def _until(job: IngestJob, ready: object, timeout_s: float = 180) -> IngestProgress:
    deadline = time.monotonic() + timeout_s
    version = -1
    while time.monotonic() < deadline:
        version, progress = job.wait_next(after=version, timeout_s=1.0)
        if ready(progress):  # type: ignore[operator]
            return progress
        assert progress.state not in FINAL_STATES, f"the job ended first: {progress}"
    raise AssertionError(f"never reached: {job.snapshot()}")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine(
        paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}),
        warm_up=False,
        watch=False,
    )
    slow = StandInEmbedder(real=Embedder(), batch_s=BATCH_S)
    engine.store.ensure_embedder(embedder_id=slow.info.id, dimension=slow.info.dimension)
    engine.in_force.swap(slow)  # what engine.embedder() hands the queue and the answers
    try:
        yield engine
    finally:
        engine.close()


def test_a_whole_answer_comes_while_a_long_file_is_embedded(engine: Engine, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text("# Bees\n\nThe hive is checked every Sunday morning.\n")
    _until(engine.ingest.submit(paths=[str(notes)]), lambda p: p.state == "done")
    big = tmp_path / "big"
    big.mkdir()
    (big / "greenhouse manual.md").write_text(_long_manual(600))
    job = engine.ingest.submit(paths=[str(big)])
    _until(job, lambda p: p.chunks_found > 200)  # chunked: its embedding has begun

    with Stopwatch() as answer:
        events = list(engine.ask_stream(question="When is the hive checked?"))

    after = job.snapshot()
    done = [e for e in events if isinstance(e, DoneEvent)]
    # Hash vectors make no sense to the relevance gate: what counts is that a
    # whole answer came, from the retrieval of the notes already in.
    assert done and "bees.md" in done[0].done.answer
    # At most the one batch running when it came (questions are encoded beside it).
    assert answer.took.own_s < BATCH_S + 2.0, f"the answer took {answer.took}"
    assert after.state == "running" and after.chunks_embedded < after.chunks_found
