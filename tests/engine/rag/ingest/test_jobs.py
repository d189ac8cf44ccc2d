"""The ingestion queue in-process, with the real store, embedder and parsing
child: rescans, edits, renames, deletes, pause/resume/cancel, a queue that
outlives its engine, and hostile files."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine.rag.ingest.discovery import OUTSIDE, OUTSIDE_INDEXED
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.jobs import FINAL_STATES, IngestJob, IngestQueue
from engine.rag.ingest.sandbox import SandboxLimits
from engine.rag.store.lance_store import LanceStore
from engine.wire import IngestProgress

HOSTILE = "tests.support.hostile_parsers:parse"
TOPICS = ["tomatoes", "bicycles", "lighthouses", "violins", "glaciers", "beekeeping"]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture
def store(tmp_path: Path, embedder: Embedder) -> LanceStore:
    store = LanceStore(folder=tmp_path / "index")
    store.ensure_embedder(embedder_id=embedder.info.id, dimension=embedder.info.dimension)
    return store


@pytest.fixture
def make_queue(store: LanceStore, embedder: Embedder) -> Iterator:  # type: ignore[type-arg]
    queues: list[IngestQueue] = []

    def make(**kw: object) -> IngestQueue:
        queue = IngestQueue(store=store, embedder=lambda: embedder, **kw)  # type: ignore[arg-type]
        queues.append(queue)
        return queue

    yield make
    for queue in queues:
        queue.stop()


def wait(job: IngestJob, timeout_s: float = 120) -> IngestProgress:
    deadline = time.monotonic() + timeout_s
    version = -1
    while time.monotonic() < deadline:
        version, progress = job.wait_next(after=version, timeout_s=1.0)
        if progress.state in FINAL_STATES:
            return progress
    raise AssertionError(f"job did not end: {job.snapshot()}")


def corpus(folder: Path, count: int = 4) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, topic in enumerate(TOPICS[:count]):
        path = folder / f"{topic} notes.md"
        path.write_text(f"# About {topic}\n\nNote {i}: everything worth knowing about {topic}.\n")
        paths.append(path)
    return paths


def long_text(paragraphs: int) -> str:
    return "\n\n".join(
        f"Paragraph {i} explains step {i} of repairing the old greenhouse roof, "
        + "with the glass panes, the putty and the wooden frames described in detail. " * 6
        for i in range(paragraphs)
    )


def test_a_rescan_of_unchanged_files_parses_and_embeds_nothing(make_queue, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus(tmp_path / "docs")
    queue = make_queue()
    first = wait(queue.submit(paths=[str(tmp_path / "docs")]))
    assert (first.state, first.files_indexed, first.errors) == ("done", 4, [])
    assert first.chunks_embedded == first.chunks_added == 4
    assert first.files_per_s > 0 and first.chunks_per_s > 0 and first.eta_s == 0
    for path in (tmp_path / "docs").iterdir():  # touched, not changed
        path.touch()
    again = wait(queue.submit_changes(paths=[str(tmp_path / "docs")], origin="rescan"))
    assert (again.files_skipped, again.files_indexed, again.chunks_embedded) == (4, 0, 0)
    assert again.origin == "rescan"


def test_an_edit_re_embeds_only_the_chunks_whose_text_changed(
    make_queue, store: LanceStore, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    doc = tmp_path / "manual.txt"
    doc.write_text(long_text(8))
    queue = make_queue()
    first = wait(queue.submit(paths=[str(doc)]))
    assert first.chunks_added >= 4
    doc.write_text(long_text(8) + "\n\nA new closing paragraph about the watering schedule.")
    second = wait(queue.submit(paths=[str(doc)]))
    assert second.files_indexed == 1
    assert 1 <= second.chunks_embedded < second.chunks_added
    assert store.counts() == (1, second.chunks_added)


def test_rename_keeps_vectors_and_delete_removes(
    make_queue, store: LanceStore, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    old, *_ = corpus(tmp_path / "docs", count=2)
    queue = make_queue()
    wait(queue.submit(paths=[str(tmp_path / "docs")]))
    before = store.vectors_by_text_hash(doc_id=store.document_by_path(path=str(old)).doc_id)
    new = old.with_name("moved here.md")
    old.rename(new)
    moved = wait(queue.submit_changes(paths=[str(new)], removed=[str(old)]))
    assert (moved.files_indexed, moved.chunks_embedded, moved.chunks_added) == (1, 0, 1)
    assert store.document_by_path(path=str(old)) is None
    doc = store.document_by_path(path=str(new))
    assert doc is not None and doc.status == "indexed"
    after = store.vectors_by_text_hash(doc_id=doc.doc_id)
    assert before.keys() == after.keys()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])
    assert store.counts() == (2, 2)

    new.unlink()
    gone = wait(queue.submit_changes(paths=[], removed=[str(new)]))
    assert gone.state == "done"
    assert store.counts() == (1, 1)
    assert [d.path for d in store.list_documents()] == [
        str(tmp_path / "docs" / "bicycles notes.md")
    ]


def test_pause_resume_and_cancel(make_queue, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus(tmp_path / "docs")
    queue = make_queue()
    assert queue.pause().paused
    job = queue.submit(paths=[str(tmp_path / "docs")])
    time.sleep(0.5)
    held = job.snapshot()
    assert (held.state, held.paused, held.files_done) == ("queued", True, 0)
    state = queue.state()
    assert state.paused and [j.job_id for j in state.jobs] == [job.id]
    queue.resume()
    assert wait(job).files_indexed == 4

    queue.pause()
    other = queue.submit(paths=[str(tmp_path / "docs")])
    queue.cancel(job_id=other.id)
    assert wait(other).state == "cancelled"
    queue.resume()
    assert queue.state().jobs == []


def test_a_job_pending_when_the_engine_stopped_runs_at_the_next_start(
    make_queue, store: LanceStore, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    corpus(tmp_path / "docs")
    pending = tmp_path / "queue.json"
    first = make_queue(pending_file=pending)
    first.pause()
    job = first.submit(paths=[str(tmp_path / "docs")])
    first.stop()
    assert job.id in pending.read_text()
    second = make_queue(pending_file=pending)
    resumed = second.job(job_id=job.id)
    assert resumed is not None
    assert wait(resumed).files_indexed == 4
    assert store.counts()[0] == 4
    assert job.id not in pending.read_text()


def test_hostile_files_are_errors_with_reasons_and_the_rest_goes_in(
    make_queue, store: LanceStore, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    corpus(folder, count=2)
    for name in ("hang.txt", "churn-once.txt", "churn-always.txt"):
        (folder / name).write_text(f"The file {name} has a little text about ferries.")
    queue = make_queue(limits=SandboxLimits(time_s=3.0, parser=HOSTILE))
    result = wait(queue.submit(paths=[str(folder)]))
    reasons = {Path(e.path).name: e.reason for e in result.errors}
    assert set(reasons) == {"hang.txt", "churn-always.txt"}
    assert "longer than the limit" in reasons["hang.txt"]
    assert "changing while it was being read" in reasons["churn-always.txt"]
    indexed = {Path(d.path).name for d in store.list_documents() if d.status == "indexed"}
    assert indexed == {"tomatoes notes.md", "bicycles notes.md", "churn-once.txt"}
    [churned] = [d for d in store.list_documents() if d.path.endswith("churn-once.txt")]
    assert churned.size == (folder / "churn-once.txt").stat().st_size  # the final content


def test_watcher_jobs_skip_paths_outside_watched_folders(
    make_queue, store: LanceStore, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    inside = corpus(tmp_path / "watched", count=1)
    outside = corpus(tmp_path / "removed", count=2)[1:]
    queue = make_queue(accept=lambda p: p.is_relative_to(tmp_path / "watched"))
    result = wait(queue.submit_changes(paths=[str(p) for p in inside + outside]))
    assert result.files_total == 1
    assert [d.path for d in store.list_documents()] == [str(inside[0])]


def test_the_rescan_removes_documents_an_older_version_read_through_a_link_out(
    make_queue, store: LanceStore, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    watched = tmp_path / "watched"
    [kept] = corpus(watched, count=1)
    [secret] = corpus(tmp_path / "outside", count=1)
    (watched / "link-out.md").symlink_to(secret)
    # What an older version left: the link followed, its target indexed by its real
    # path (written while the outside folder was still accepted: a job writes nothing
    # outside the accepted folders, checked again before each write).
    older = {"outside too": True}
    queue = make_queue(accept=lambda p: older["outside too"] or p.resolve().is_relative_to(watched))
    wait(queue.submit(paths=[str(secret)]))
    wait(queue.submit(paths=[str(kept)]))
    assert {d.path for d in store.list_documents()} == {str(secret), str(kept)}
    older["outside too"] = False

    rescan = wait(queue.submit_changes(paths=[str(watched)], origin="rescan"))
    assert rescan.state == "done"
    reasons = {Path(e.path).name: e.reason for e in rescan.errors}
    assert reasons == {"link-out.md": OUTSIDE, secret.name: OUTSIDE_INDEXED}
    assert [d.path for d in store.list_documents() if d.status == "indexed"] == [str(kept)]
    assert store.counts()[0] == 1

    # A rescan of an index with nothing outside lists nothing more.
    again = wait(queue.submit_changes(paths=[str(watched)], origin="rescan"))
    assert [e.reason for e in again.errors] == [OUTSIDE]
