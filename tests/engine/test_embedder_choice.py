"""Choosing another embedder: the collection is re-embedded as a background job while
the old index answers, questions use the embedder of the index in force, and a switch
cut short by kill -9 leaves the old index answering and goes on at the next start.

The new embedder is a real sentence-transformers architecture (a small BERT, mean
pooling, normalisation) with random weights, written locally and loaded through the
same code users run; the old one is the bundled MiniLM."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from engine.environ import REEMBED_BATCH_ENV
from engine.errors import EmbedderError
from engine.paths import resolve_paths
from engine.rag.ingest.embedder import DEFAULT_EMBEDDER, Embedder
from engine.rag.store.lance_store import LanceStore
from engine.service.core import Engine
from engine.wire_events import DoneEvent
from tests.support.engine import process_alive, running_engine
from tests.support.tiny_embedder import write_random_embedder
from tests.support.waiting import wait_until

TOPICS = ("owls hunt at night", "ferns grow in shade", "canals have locks for boats")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_embedder(tmp_path_factory.mktemp("models") / "tiny-e5", hidden=32)


def _docs(folder: Path, count: int = 3) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        (folder / f"note {i:03d}.md").write_text(f"# Note {i}\n\nRecord {i}: {topic}.\n")


def test_switch_re_embeds_in_the_background_while_the_old_index_answers(
    tmp_path: Path, tiny_model: Path
) -> None:
    folder = tmp_path / "docs"
    _docs(folder)
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    engine = Engine(paths=paths, warm_up=False, watch=False)
    try:
        _, job = engine.add_folder(path=str(folder))
        wait_until(lambda: job.snapshot().state == "done", timeout_s=180)
        before = engine.store.counts()
        with pytest.raises(EmbedderError):
            engine.set_embedder(embedder=str(tmp_path / "no such model"))
        assert engine.settings.embedder == DEFAULT_EMBEDDER  # a model that fails is not saved

        engine.ingest.pause()  # the job waits: the old index must keep answering
        settings = engine.set_embedder(embedder=str(tiny_model))
        assert settings.embedder == str(tiny_model)
        status = engine.status()
        assert status.embedder_in_force == DEFAULT_EMBEDDER and status.embedder_job
        hits = engine.retrieve(question="which birds hunt at night", k=1)
        assert hits and "owls" in hits[0].chunk.text
        assert engine.embedder().info.dimension == 384
        assert engine.in_force.embed_sentences(["owls hunt"]).shape == (1, 384)

        engine.ingest.resume()
        switch = engine.ingest.job(job_id=status.embedder_job)
        assert switch is not None and switch.snapshot().origin == "embedder"
        wait_until(lambda: switch.snapshot().state == "done", timeout_s=180)
        progress = switch.snapshot()
        assert progress.chunks_embedded == progress.chunks_found == before[1]
        status = engine.status()
        assert status.embedder_in_force == str(tiny_model) and status.embedder_job is None
        assert engine.store.meta is not None and engine.store.meta.dimension == 32
        assert engine.embedder().info.dimension == 32  # questions now use the new model
        # An answer's sentences are still scored by the bundled MiniLM, on whose
        # similarities the sentence choice and the gate were fitted.
        assert engine.in_force.embed_sentences(["owls hunt"]).shape == (1, 384)
        assert engine.store.counts() == before
        assert len(engine.retrieve(question="owls", k=3)) == 3
        # Answers still come from the new index (the sentences scored as above).
        events = list(engine.ask_stream(question="which birds hunt at night?", k=3))
        done = [e for e in events if isinstance(e, DoneEvent)]
        assert done and "owls hunt at night" in done[0].done.answer
        # A document added now is embedded by the new embedder into the new table.
        (folder / "extra.md").write_text("# Extra\n\nHarbor water and garnet.\n")
        job = engine.ingest.submit(paths=[str(folder)])
        wait_until(lambda: job.snapshot().state == "done", timeout_s=180)
        assert engine.store.counts()[1] == before[1] + 1
    finally:
        engine.close()
    # Chosen and built: the next start uses it with no job.
    engine = Engine(paths=paths, warm_up=False, watch=False)
    try:
        assert engine.status().embedder_job is None
        assert engine.embedder().info.id == str(tiny_model)
    finally:
        engine.close()


def test_kill_9_mid_switch_keeps_the_old_index_and_the_switch_goes_on(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One chunk per commit (the engine child inherits it): the pause below lands
    # long before the last of 120 commits.
    monkeypatch.setenv(REEMBED_BATCH_ENV, "1")
    folder = tmp_path / "archive"
    _docs(folder, count=120)
    home = tmp_path / "home"
    with running_engine(home=home) as engine:
        engine.ingest(folder)
        chunks = engine.client.status().chunks
        assert chunks == 120
        engine.client.pause_ingest()
        # Over HTTP, as the window and `ragdoll embedder` do.
        engine.client.set_embedder(embedder=str(tiny_model))
        status = engine.client.status()
        assert status.embedder_in_force == DEFAULT_EMBEDDER and status.embedder_job
        engine.client.resume_ingest()
        wait_until(
            lambda: engine.client.ingest_progress(job_id=status.embedder_job).chunks_embedded >= 5,
            timeout_s=180,
        )
        engine.client.pause_ingest()  # between two batches
        progress = engine.client.ingest_progress(job_id=status.embedder_job)
        assert 0 < progress.chunks_embedded < chunks, "the kill must land mid-way"
        os.kill(engine.pid, signal.SIGKILL)
        while process_alive(engine.pid):
            time.sleep(0.05)
    store = LanceStore(folder=home / "data" / "index", background=False)
    try:  # the old index is whole and in force
        assert store.meta is not None and store.meta.embedder_id == DEFAULT_EMBEDDER
        assert store.counts() == (120, 120)
    finally:
        store.close()
    with running_engine(home=home) as engine:
        shown = engine.ragdoll("embedder")
        assert shown.returncode == 0, shown.stderr
        assert "embedder: " in shown.stdout
        wait_until(
            lambda: engine.client.status().embedder_in_force == str(tiny_model), timeout_s=180
        )
        assert engine.client.status().chunks == 120
        answer = engine.ragdoll("ask", "where do ferns grow")
        assert answer.returncode == 0, answer.stderr
        shown = engine.ragdoll("embedder")
        assert shown.stdout.strip() == f"embedder: {tiny_model}"
    store = LanceStore(folder=home / "data" / "index", background=False)
    try:
        ids = store.chunks.to_arrow().column("chunk_id").to_pylist()
        assert len(ids) == 120 and max(Counter(ids).values()) == 1
        assert store.meta is not None and store.meta.dimension == 32
    finally:
        store.close()


def test_a_switch_chosen_while_the_first_embedder_loads_decides_the_new_index(
    tmp_path: Path, tiny_model: Path
) -> None:
    # A new user chooses another embedder while the engine's start still loads the
    # bundled one for an empty collection: the index must be the chosen embedder's,
    # and questions asked with it (they were refused as stale vectors).
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    engine = Engine(paths=paths, warm_up=False, watch=False)
    released = threading.Event()
    load = engine.in_force.load

    def slow_load(model: str) -> Embedder:
        if model == DEFAULT_EMBEDDER:
            assert released.wait(timeout=120)
        return load(model)

    engine.in_force.load = slow_load  # type: ignore[method-assign]
    try:
        starting = threading.Thread(target=engine.embedder)
        starting.start()
        engine.set_embedder(embedder=str(tiny_model))

        def switched() -> bool:  # an empty collection's switch may be done already
            meta = engine.store.meta
            return (
                engine.embedders.active() is None
                and meta is not None
                and (meta.embedder_id == str(tiny_model))
            )

        wait_until(switched, timeout_s=180)
        released.set()
        starting.join(timeout=120)
        assert not starting.is_alive()
        assert engine.store.meta is not None
        assert engine.store.meta.embedder_id == str(tiny_model)
        assert engine.embedder().info.id == str(tiny_model)
        folder = tmp_path / "docs"
        _docs(folder)
        _, added = engine.add_folder(path=str(folder))
        wait_until(lambda: added.snapshot().state == "done", timeout_s=180)
        assert engine.retrieve(question="which birds hunt at night", k=1)
    finally:
        released.set()
        engine.close()
