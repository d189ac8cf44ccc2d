"""Real parts through both workers: LanceStore on disk, the MiniLM embedder, and
either the extractive answerer or a random-weight model on the layer-streaming
executor; concurrent questions, and a placement change in the middle of the run."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from engine.rag.ingest.embedder import Embedder
from engine.rag.pipeline.adapters import (
    executor_generate_batch,
    extractive_generate_batch,
    passages_of,
    store_retrieve_batch,
)
from engine.rag.pipeline.policies import Placing
from engine.rag.pipeline.requests import RequestHandle
from engine.rag.pipeline.stages import Stages
from engine.rag.pipeline.workers import Pipeline
from engine.rag.store.lance_store import LanceStore

FACTS = {
    "boiler.txt": "The boiler pressure must stay between 1.2 and 1.5 bar during heating.",
    "lease.txt": "The office lease ends on 31 March 2027 and renews for five years.",
    "payroll.txt": "Salaries are paid on the twenty-fifth day of every month by transfer.",
    "garden.txt": "Tomatoes need watering every morning in July and August.",
    "car.txt": "The car's tyres should be inflated to 2.3 bar at the front.",
    "library.txt": "The town library opens at nine and closes at six on Saturdays.",
}
QUESTIONS = {
    "What pressure should the boiler have?": "boiler.txt",
    "When does the office lease end?": "lease.txt",
    "When are salaries paid?": "payroll.txt",
    "How often should tomatoes be watered?": "garden.txt",
    "What tyre pressure does the car need?": "car.txt",
    "When does the library close on Saturday?": "library.txt",
}


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> Iterator[LanceStore]:
    store = LanceStore(folder=tmp_path / "index", background=False)
    store.ensure_embedder(embedder_id=embedder.info.id, dimension=embedder.info.dimension)
    names = list(FACTS)
    vectors = embedder.embed([FACTS[n] for n in names])
    store.chunks.add(
        pa.Table.from_pylist(
            [
                {
                    "chunk_id": f"c{i}",
                    "doc_id": f"d{i}",
                    "path": f"/docs/{name}",
                    "ordinal": 0,
                    "page": None,
                    "char_start": 0,
                    "char_end": len(FACTS[name]),
                    "text": FACTS[name],
                    "text_hash": f"h{i}",
                    "vector": v.tolist(),
                    "ext": ".txt",
                }
                for i, (name, v) in enumerate(zip(names, vectors, strict=True))
            ]
        )
    )
    yield store
    store.close()


def wait_for(condition: Callable[[], bool], *, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def ask_concurrently(pipe: Pipeline, questions: list[str], **kw: object) -> list[RequestHandle]:
    handles: list[RequestHandle | None] = [None] * len(questions)

    def ask(i: int) -> None:
        handles[i] = pipe.submit(question=questions[i], k=3, **kw)  # type: ignore[arg-type]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [h for h in handles if h is not None]


def test_extractive_answers_through_both_workers(store: LanceStore, embedder: Embedder) -> None:
    pipe = Pipeline(
        stages=Stages(
            retrieve=store_retrieve_batch(store=store, embed=embedder.embed),
            generate=extractive_generate_batch(embed=embedder.embed),
        ),
    )
    try:
        questions = list(QUESTIONS)
        handles = ask_concurrently(pipe, questions)
        for h in handles:
            assert h.wait(timeout=60), h.question.text
            text = h.text(timeout=1)
            expected = QUESTIONS[h.question.text]
            assert h.hits.hits[0].chunk.path == f"/docs/{expected}"
            assert FACTS[expected].rstrip(".") in text
        status = pipe.status()
        assert status.finished == len(questions)
        assert status.retrieval.batches <= len(questions)
    finally:
        pipe.close()


def test_tiny_model_batches_match_single_answers_and_survive_a_placement_change(
    store: LanceStore, embedder: Embedder, tmp_path: Path
) -> None:
    from engine.rag.answer.in_use import open_model
    from engine.runtime.models.synthetic import write_random_model

    folder = write_random_model(folder=tmp_path / "tiny", hidden_size=32, num_layers=2)
    in_use = open_model(model_path=folder, device="cpu", index=store)
    answerer, owner = in_use.answerer, in_use.owner
    placement = owner.placement
    retrieve = store_retrieve_batch(store=store, embed=embedder.embed)
    gate = threading.Event()
    entered = threading.Event()
    generate = executor_generate_batch(answerer=answerer)

    def gated(jobs):  # type: ignore[no-untyped-def]
        entered.set()
        gate.wait(30)  # hold the first generation batch while the rest queue up
        yield from generate(jobs)

    pipe = Pipeline(
        stages=Stages(
            retrieve=retrieve,
            generate=gated,
        ),
        placing=Placing(
            placement=placement,
            apply_to_store=owner.apply_to_store,
            apply_to_executor=owner.apply_to_executor,
        ),
    )
    try:
        questions = list(QUESTIONS)[:4]
        handles = [pipe.submit(question=questions[0], k=3, max_new_tokens=6)]
        assert entered.wait(30)
        handles += ask_concurrently(pipe, questions[1:], max_new_tokens=6)
        assert wait_for(lambda: pipe.status().generation.queue_length == 3)
        # A new placement while requests are queued and a batch is in flight: smaller
        # batches, a different resident budget, the last layer streamed from disk.
        tiers = (*placement.layer_tiers[:-1], "disk")
        changed = dataclasses.replace(
            placement,
            max_batch=2,
            resident_partition_bytes=placement.resident_partition_bytes // 2 + 1,
            layer_tiers=tiers,
        )
        mover = threading.Thread(target=pipe.set_placement, args=(changed,))
        mover.start()
        # The mover is waiting for the generation worker's batch to end.
        assert wait_for(lambda: pipe.generation.placements_waiting == 1)
        gate.set()
        mover.join(60)
        assert not mover.is_alive()
        for h in handles:
            assert h.wait(timeout=120), h.question.text
        texts = {h.question.text: h.text(timeout=1) for h in handles}
        assert owner.placement is changed
        assert answerer.executor.placement.layer_tiers == tiers
        # A handle hears Finished just before its batch is recorded.
        assert wait_for(lambda: sum(b.size for b in pipe.status().generation.recent) == 4)
        status = pipe.status()
        assert status.finished == 4
        assert status.generation.cap == 2
        assert status.generation.placements_applied == 1
        # The held batch ran under the old cap; the three queued behind it under the new.
        first, *later = status.generation.recent
        assert (first.size, first.cap) == (1, placement.max_batch)
        assert [b.cap for b in later] == [2, 2] and sum(b.size for b in later) == 3
        # Each batched answer is the one the model gives the question alone (greedy).
        for h in handles:
            alone = "".join(
                answerer.stream(
                    question=h.question.text, passages=passages_of(h.hits.hits), max_new_tokens=6
                )
            )
            assert texts[h.question.text] == alone
    finally:
        pipe.close()
        answerer.close()
