"""kill -9 the engine while it ingests a few hundred files, start it again:
the interrupted job resumes by itself, and every file is in the collection
exactly once with exactly its chunks.

Files are committed in groups (engine/rag/ingest/pipeline.py); the engines here
commit every 25 files, so that a kill lands while a group is being gathered,
embedded or written, with groups already in before it."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from engine.environ import COMMIT_FILES_ENV
from engine.rag.store.lance_store import LanceStore
from tests.support.engine import process_alive, running_engine

GROUP_FILES = 25


@pytest.fixture(autouse=True)
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_FILES_ENV, str(GROUP_FILES))  # the engine child inherits it


WORDS = ("amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo")


def _corpus(folder: Path, count: int) -> dict[str, str]:
    folder.mkdir(parents=True)
    rng = random.Random(5)
    texts = {}
    for i in range(count):
        sub = folder / f"box {i % 7}"  # subfolders, and names with spaces
        sub.mkdir(exist_ok=True)
        words = " ".join(rng.choice(WORDS) for _ in range(8))
        text = f"Record {i} of the archive mentions {words}."
        path = sub / f"record {i:04d}.txt"
        path.write_text(text)
        texts[str(path)] = text
    return texts


def _kill_mid_ingest(*, home: Path, folder: Path | None, after_documents: int) -> int:
    """Start the engine (and an ingestion of `folder`, when given), kill -9 it
    once `after_documents` are in; returns how many were in."""
    with running_engine(home=home) as engine:
        if folder is not None:
            engine.client.add_paths(paths=[str(folder)])
        deadline = time.monotonic() + 180
        done = 0
        while time.monotonic() < deadline:
            done = engine.client.status().documents
            if done >= after_documents or not engine.client.ingest_queue().jobs:
                break
            time.sleep(0.02)
        os.kill(engine.pid, signal.SIGKILL)
        while process_alive(engine.pid):
            time.sleep(0.05)
        return done


def _check_whole(*, home: Path, texts: dict[str, str]) -> None:
    with running_engine(home=home) as engine:
        # The interrupted job is back by itself; pause and resume it over HTTP.
        held = engine.client.pause_ingest()
        assert held.paused and "request" in {j.origin for j in held.jobs}
        assert engine.client.ingest_queue().jobs[0].paused
        assert not engine.client.resume_ingest().paused
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if not engine.client.ingest_queue().jobs:
                break
            time.sleep(0.3)
        assert engine.client.ingest_queue().jobs == []
        docs = engine.client.documents()
        assert sorted(d.path for d in docs) == sorted(texts)
        assert all(d.status == "indexed" and d.chunks == 1 for d in docs)
        assert engine.client.status().chunks == len(texts)
    store = LanceStore(folder=home / "data" / "index")
    rows = store.chunks.to_arrow().select(["chunk_id", "doc_id", "path", "text"]).to_pylist()
    assert len(rows) == len(texts)
    assert max(Counter(r["chunk_id"] for r in rows).values()) == 1
    assert {r["path"]: r["text"] for r in rows} == texts
    pages = store.pages.to_arrow().column("doc_id").to_pylist()
    assert sorted(pages) == sorted(r["doc_id"] for r in rows)


def test_kill_9_mid_ingest_then_restart_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    texts = _corpus(tmp_path / "archive", 200)
    home = tmp_path / "home"
    done = _kill_mid_ingest(home=home, folder=tmp_path / "archive", after_documents=40)
    assert 0 < done < len(texts), "the kill must land mid-job"
    assert done % GROUP_FILES == 0, "whole groups are in, the next one was under way"
    _check_whole(home=home, texts=texts)


@pytest.mark.slow
def test_repeated_kills_at_random_moments(tmp_path: Path) -> None:
    texts = _corpus(tmp_path / "archive", 600)
    home = tmp_path / "home"
    rng = random.Random(11)
    # Each start resumes the interrupted job by itself, and is killed again later on.
    folder: Path | None = tmp_path / "archive"
    for threshold in sorted(rng.sample(range(20, 580), 4)):
        done = _kill_mid_ingest(home=home, folder=folder, after_documents=threshold)
        assert done < len(texts), "each kill must land mid-job"
        folder = None
    _check_whole(home=home, texts=texts)
