"""An ingestion job's pipeline with the real store, parsing child and chunker,
and a fake embedder (the real gate, batching and tokenizer; vectors from a hash,
each embedding call taking `batch_s`): questions go first, progress counts pages and chunks,
files commit in groups, and a crash or a full disk mid-group loses nothing."""

from __future__ import annotations

import errno
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from bench.ingest_many import StandInEmbedder as FakeEmbedder
from engine.environ import BACKGROUND_NICE
from engine.rag.ingest import pipeline, priority
from engine.rag.ingest.jobs import FINAL_STATES, IngestJob, IngestQueue
from engine.rag.ingest.journal import remove_orphans
from engine.rag.ingest.pipeline import CommitPolicy
from engine.rag.ingest.sandbox import SandboxLimits
from engine.rag.store import doc_writes
from engine.rag.store.lance_store import LanceStore
from engine.wire import IngestProgress
from tests.fixtures.pdf_factory import PdfPage, write_pdf
from tests.support.stalls import Stopwatch

NOTED = "tests.support.hostile_parsers:parse"


def wait(job: IngestJob, timeout_s: float = 240) -> IngestProgress:
    deadline = time.monotonic() + timeout_s
    version = -1
    while time.monotonic() < deadline:
        version, progress = job.wait_next(after=version, timeout_s=1.0)
        if progress.state in FINAL_STATES:
            return progress
    raise AssertionError(f"job did not end: {job.snapshot()}")


def wait_for(job: IngestJob, ready: object, timeout_s: float = 120) -> IngestProgress:
    deadline = time.monotonic() + timeout_s
    version = -1
    while time.monotonic() < deadline:
        version, progress = job.wait_next(after=version, timeout_s=1.0)
        if ready(progress):  # type: ignore[operator]
            return progress
        assert progress.state not in FINAL_STATES, f"the job ended first: {progress}"
    raise AssertionError(f"never reached: {job.snapshot()}")


def small_files(folder: Path, count: int) -> dict[str, str]:
    folder.mkdir(parents=True)
    texts = {}
    for i in range(count):
        sub = folder / f"box {i % 9}"
        sub.mkdir(exist_ok=True)
        path = sub / f"note {i:05d}.txt"
        text = f"Note {i} of the logbook: the ferry left pier {i % 17} at {i % 24} o'clock."
        path.write_text(text)
        texts[str(path)] = text
    return texts


def long_text(paragraphs: int) -> str:
    return "\n\n".join(
        f"Paragraph {i} explains step {i} of repairing the old greenhouse roof, "
        + "with the glass panes, the putty and the wooden frames described in detail. " * 6
        for i in range(paragraphs)
    )


def whole(store: LanceStore, texts: dict[str, str]) -> None:
    """Every file exactly once: one journal row, its one chunk, its one page."""
    docs = store.list_documents()
    assert sorted(d.path for d in docs) == sorted(texts)
    assert all(d.status == "indexed" and d.chunks == 1 for d in docs)
    rows = store.chunks.to_arrow().select(["chunk_id", "path", "text"]).to_pylist()
    assert len(rows) == len(texts)
    assert max(Counter(r["chunk_id"] for r in rows).values()) == 1
    assert {r["path"]: r["text"] for r in rows} == texts
    assert store.pages.count_rows() == len(texts)


def test_a_question_is_embedded_while_a_long_file_is(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path
) -> None:
    slow = FakeEmbedder(real=real, batch_s=0.25)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "greenhouse manual.md").write_text(long_text(400))
    (folder / "short note.md").write_text("# Bees\n\nThe hive is checked every Sunday.\n")
    queue = IngestQueue(store=store, embedder=lambda: slow)
    try:
        job = queue.submit(paths=[str(folder)])
        during = wait_for(job, lambda p: p.chunks_embedded >= 64 and p.chunks_found > 200)
        assert during.current is not None and during.current.endswith("greenhouse manual.md")
        with Stopwatch() as question:
            vector = slow.embed(["how are the glass panes fixed?"])[0]
            hits = store.hybrid_search(vector=vector, text="glass panes", k=3)
        after = job.snapshot()
        assert question.took.own_s < 2 * 0.25 + 0.5, f"the question waited {question.took}"
        assert after.state == "running" and after.chunks_embedded < after.chunks_found
        assert isinstance(hits, list)
        done = wait(job)
    finally:
        queue.stop()
    assert done.state == "done" and done.files_indexed == 2
    assert done.chunks_embedded == done.chunks_found == done.chunks_added
    assert done.bytes_done == done.bytes_total > 0


class _NiceRecorder(FakeEmbedder):
    """Notes the nice value of the thread each encode call runs in."""

    def _encode(self, texts: list[str], *, batch_size: int):  # type: ignore[no-untyped-def]
        self.nice_seen.append(priority.thread_nice())
        return super()._encode(texts, batch_size=batch_size)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice")
def test_ingestion_embeds_below_the_priority_of_questions(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the engine makes its queue (engine/service/core.py)."""
    recorder = _NiceRecorder(real=real)
    recorder.nice_seen = []
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "greenhouse manual.md").write_text(long_text(20))
    queue = IngestQueue(store=store, embedder=lambda: recorder, nice=BACKGROUND_NICE)
    try:
        assert wait(queue.submit(paths=[str(folder)])).state == "done"
    finally:
        queue.stop()
    mine = priority.thread_nice()
    assert mine is not None and recorder.nice_seen
    assert set(recorder.nice_seen) == {min(19, mine + BACKGROUND_NICE)}
    recorder.nice_seen.clear()
    recorder.embed(["a question"])  # asked from this thread: its own priority
    assert recorder.nice_seen == [mine]


def test_progress_counts_pages_and_chunks_and_carries_notes(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "HUGE_FILE_CHUNKS", 50)
    folder = tmp_path / "docs"
    folder.mkdir()
    pages = [
        PdfPage(heading=f"Chapter {n}", paragraphs=[f"Page {n} tells how to prime pump {n}."])
        for n in range(1, 8)
    ]
    write_pdf(path=folder / "pump manual.pdf", pages=pages)
    (folder / "sheet noted.md").write_text("# Rows\n\nRow 1: valve A; Row 2: valve B.\n")
    (folder / "greenhouse.md").write_text(long_text(120))
    queue = IngestQueue(
        store=store,
        embedder=lambda: FakeEmbedder(real=real),
        limits=SandboxLimits(parser=NOTED),
    )
    try:
        done = wait(queue.submit(paths=[str(folder)]))
    finally:
        queue.stop()
    assert done.state == "done", done.message
    docs = {Path(d.path).name: d for d in store.list_documents()}
    assert docs["pump manual.pdf"].pages == 7
    assert done.pages_read == 7 + 1 + 1  # a file without pages counts as one
    assert done.chunks_found == done.chunks_added == sum(d.chunks for d in docs.values())
    notes = {Path(n.path).name: n.note for n in done.notes}
    assert notes["sheet noted.md"] == "only the first 100,000 rows were read"
    assert "chunks to embed" in notes["greenhouse.md"]
    # The library shows the note with the document.
    assert docs["sheet noted.md"].error == "only the first 100,000 rows were read"
    assert docs["pump manual.pdf"].error is None


def test_thousands_of_small_files_commit_in_groups_and_compact(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path
) -> None:
    texts = small_files(tmp_path / "logbook", 1_500)
    store.keep_journal_versions_s = 0.001  # versions older than 1 ms go
    before = {name: getattr(store, name).version for name in ("documents", "pages")}
    queue = IngestQueue(
        store=store,
        embedder=lambda: FakeEmbedder(real=real),
        commits=CommitPolicy(files=400, after_s=600.0, compact_every=2),
    )
    try:
        done = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
    finally:
        queue.stop()
    assert done.state == "done" and done.files_indexed == 1_500
    for name in ("documents", "pages"):
        table = getattr(store, name)
        # 4 groups: a commit each, and compactions; not one commit per file.
        assert table.version - before[name] < 20, name
        assert len(table.list_versions()) <= 2, name
        assert table.stats()["fragment_stats"]["num_fragments"] <= 2, name
    whole(store, texts)


def test_a_crash_between_a_groups_rows_and_its_journal_loses_nothing(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = small_files(tmp_path / "logbook", 300)
    calls = {"n": 0}
    upsert = doc_writes.upsert_documents

    def dies_on_the_second_group(*, table, rows):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:  # the second group's pages and chunks are written
            raise RuntimeError("the engine was killed here")
        upsert(table=table, rows=rows)

    monkeypatch.setattr(doc_writes, "upsert_documents", dies_on_the_second_group)
    monkeypatch.setattr(doc_writes, "_undo", lambda **kw: None)  # a kill undoes nothing
    queue = IngestQueue(
        store=store,
        embedder=lambda: FakeEmbedder(real=real),
        commits=CommitPolicy(files=100, after_s=600.0),
    )
    try:
        crashed = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
    finally:
        queue.stop()
    assert crashed.state == "failed" and crashed.files_indexed == 100
    assert store.chunks.count_rows() == 200  # the second group's rows, without journal rows
    monkeypatch.setattr(doc_writes, "upsert_documents", upsert)

    # The next start: rows without a journal row go, the job runs again.
    restarted = LanceStore(folder=store.folder, background=False)
    assert remove_orphans(store=restarted) == 100
    queue = IngestQueue(store=restarted, embedder=lambda: FakeEmbedder(real=real))
    try:
        done = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
    finally:
        queue.stop()
        restarted.close()
    assert done.files_skipped == 100 and done.files_indexed == 200
    whole(restarted, texts)


def test_a_full_disk_says_which_what_is_in_and_that_nothing_was_lost(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = small_files(tmp_path / "logbook", 200)
    replace_rows = doc_writes.replace_rows
    calls = {"n": 0}

    def full_after_the_first_group(table, **kw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] > 2:  # the first group's pages and chunks went in
            raise OSError(
                "LanceError(IO): Generic LocalFileSystem error: Unable to copy file: "
                "No space left on device (os error 28), /build/lance-io/src/local.rs:312:31"
            )
        replace_rows(table, **kw)

    monkeypatch.setattr(doc_writes, "replace_rows", full_after_the_first_group)
    queue = IngestQueue(
        store=store,
        embedder=lambda: FakeEmbedder(real=real),
        commits=CommitPolicy(files=50, after_s=600.0),
    )
    try:
        full = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
        assert full.state == "failed" and full.disk_full is not None
        assert full.disk_full.files_in == 50
        assert full.disk_full.files_not_read == 150
        assert full.disk_full.folder == str(store.folder)
        assert full.message is not None
        assert f"The disk at {full.disk_full.mount} is full" in full.message
        assert "Nothing was lost" in full.message and ".rs" not in full.message
        assert len(store.list_documents()) == 50

        monkeypatch.setattr(doc_writes, "replace_rows", replace_rows)  # room again
        done = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
    finally:
        queue.stop()
    assert done.state == "done" and (done.files_skipped, done.files_indexed) == (50, 150)
    whole(store, texts)


def test_a_group_whose_journal_rows_fail_leaves_no_chunk_behind(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills between a group's chunks and its journal rows (another program
    wrote meanwhile): the group's chunks and pages go again at once, not at the next
    start, and a changed file's old row too; no chunk is served without its row."""
    small_files(tmp_path / "logbook", 200)
    calls = {"n": 0}
    upsert = doc_writes.upsert_documents

    def full_at_the_second_groups_rows(*, table, rows):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] >= 2:  # the second group's pages and chunks are written (its halves' too)
            raise OSError(errno.ENOSPC, "No space left on device")
        upsert(table=table, rows=rows)

    monkeypatch.setattr(doc_writes, "upsert_documents", full_at_the_second_groups_rows)
    queue = IngestQueue(
        store=store,
        embedder=lambda: FakeEmbedder(real=real),
        commits=CommitPolicy(files=100, after_s=600.0),
    )
    try:
        full = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
        assert full.state == "failed" and full.disk_full is not None
        docs = store.list_documents()
        assert len(docs) == 100 and all(d.status == "indexed" for d in docs)
        assert store.chunks.count_rows() == sum(d.chunks for d in docs)
        assert store.pages.count_rows() == 100
        monkeypatch.setattr(doc_writes, "upsert_documents", upsert)  # room again
        done = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
    finally:
        queue.stop()
    assert done.state == "done" and (done.files_skipped, done.files_indexed) == (100, 100)


def test_a_group_too_big_for_the_room_left_goes_in_as_far_as_it_fits(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store refuses a group the disk has no room for before writing any of it;
    the job then commits halves of it while they fit, and stops on the first that
    does not: a disk with room for 70 files takes 70, not none of a group of 100."""
    small_files(tmp_path / "logbook", 200)
    room = {"files": 70}

    def ensure_room(*, folder: Path, need: int) -> None:
        if need > room["files"]:
            raise doc_writes.disk_full_error(folder)
        room["files"] -= need

    monkeypatch.setattr(doc_writes, "_bytes_needed", lambda *, items, pages: len(items))
    monkeypatch.setattr(doc_writes, "_ensure_room", ensure_room)
    queue = IngestQueue(
        store=store,
        embedder=lambda: FakeEmbedder(real=real),
        commits=CommitPolicy(files=100, after_s=600.0),
    )
    try:
        full = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
        assert full.state == "failed" and full.disk_full is not None
        assert full.disk_full.files_in == 70 and len(store.list_documents()) == 70
        room["files"] = 10_000
        done = wait(queue.submit(paths=[str(tmp_path / "logbook")]))
    finally:
        queue.stop()
    assert done.state == "done" and (done.files_skipped, done.files_indexed) == (70, 130)


def test_a_disk_full_error_is_known_however_it_comes() -> None:
    assert doc_writes.is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    lance = RuntimeError("LanceError(IO): No space left on device (os error 28), src/io.rs:9")
    assert doc_writes.is_disk_full(lance)
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as e:
            raise RuntimeError("commit failed") from e
    except RuntimeError as wrapped:
        assert doc_writes.is_disk_full(wrapped)
    assert not doc_writes.is_disk_full(OSError(errno.EACCES, "Permission denied"))


class _PerChunk(FakeEmbedder):
    """Each chunk takes `per_chunk_s` to embed: the work is the new chunks."""

    def _encode(self, texts: list[str], *, batch_size: int):  # type: ignore[no-untyped-def]
        time.sleep(self.per_chunk_s * len(texts))
        return super()._encode(texts, batch_size=batch_size)


def test_a_resumed_jobs_eta_comes_from_the_files_it_reads(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path
) -> None:
    """Files indexed before are skipped in no time: they were counted as work
    done, so the first ETA of a resumed job was several times too short."""
    folder = tmp_path / "manuals"
    folder.mkdir()
    for i in range(40):
        (folder / f"part 1, {i:02d}.md").write_text(f"Manual {i}.\n\n" + long_text(12))
    queue = IngestQueue(store=store, embedder=lambda: FakeEmbedder(real=real))
    try:
        assert wait(queue.submit(paths=[str(folder)])).files_indexed == 40
    finally:
        queue.stop()
    for i in range(8):  # the rest of the folder, as if the first run was stopped
        text = long_text(12).replace("Paragraph", f"In manual {i + 40}, paragraph")
        (folder / f"part 2, {i:02d}.md").write_text(text)
    slow = _PerChunk(real=real)
    slow.per_chunk_s = 0.08
    queue = IngestQueue(
        store=store, embedder=lambda: slow, commits=CommitPolicy(files=1, after_s=600.0)
    )
    try:
        job = queue.submit(paths=[str(folder)])
        first = wait_for(job, lambda p: p.eta_s is not None and p.eta_s > 0, timeout_s=240)
        with Stopwatch() as rest:
            done = wait(job)
    finally:
        queue.stop()
    assert (done.files_skipped, done.files_indexed) == (40, 8)
    assert first.eta_s is not None
    # Skipped bytes in the rate made it 5x+ too short. The rest is taken less what a
    # busy machine added to it after the estimate (tests/support/stalls.py).
    assert first.eta_s > 0.5 * rest.took.own_s, f"ETA {first.eta_s:.1f} s, the rest {rest.took}"
    assert first.files_per_s < 2, f"{first.files_per_s} files/s counts the skipped files"


def test_a_pause_finishes_the_file_at_hand_and_names_none_while_it_waits(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path
) -> None:
    """The parsed file at hand waited, not embedded, while the window said it was
    worked on: a pause now commits it and clears `current`. The second file is held
    in the parser until the pause is in (tests/support/hostile_parsers.py): however
    slow the machine, the job cannot finish first."""
    folder = tmp_path / "manuals"
    folder.mkdir()
    names = ["manual 0.md", "manual 1 held.md", "manual 2.md", "manual 3.md"]
    for i, name in enumerate(names):
        text = long_text(12).replace("Paragraph", f"In manual {i}, paragraph")
        (folder / name).write_text(text)
    slow = _PerChunk(real=real)
    slow.per_chunk_s = 0.05
    queue = IngestQueue(store=store, embedder=lambda: slow, limits=SandboxLimits(parser=NOTED))
    try:
        job = queue.submit(paths=[str(folder)])
        at_hand = wait_for(job, lambda p: (p.current or "").endswith("held.md"))
        assert at_hand.files_done == 0
        queue.pause()
        (folder / "manual 1 held.md.release").write_text("")
        held = wait_for(job, lambda p: p.paused and p.current is None, timeout_s=30)
        time.sleep(1.0)  # it stays held
        still = job.snapshot()
        assert still.current is None and still.files_done == held.files_done
        assert 1 <= held.files_done < 4
        assert held.chunks_embedded == held.chunks_found == held.chunks_added
        assert len(store.list_documents()) == held.files_done
        queue.resume()
        done = wait(job)
    finally:
        queue.stop()
    assert (done.state, done.files_indexed) == ("done", 4)


class _Calls(FakeEmbedder):
    """Records each ingestion call's texts; `on_call` runs after each one."""

    def embed(self, texts, *, batch_size=32, background=False):  # type: ignore[no-untyped-def]
        out = super().embed(texts, batch_size=batch_size, background=background)
        if background:
            self.calls.append(list(texts))
            self.on_call()
        return out


def test_new_chunks_are_sorted_by_length_over_a_window_and_embedded_a_pool_at_a_time(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    count = pipeline.EMBED_SORT_CHUNKS + 40
    for i in range(count):  # one chunk each, of 1 to 9 sentences in a mixed order
        sentence = f"Note {i}: the ferry left pier {i % 17} with the morning mail. "
        (folder / f"note {i:04d}.txt").write_text(sentence * (1 + (i * 7) % 9))
    recorder = _Calls(real=real)
    recorder.calls, recorder.on_call = [], lambda: None
    queue = IngestQueue(
        store=store,
        embedder=lambda: recorder,
        commits=CommitPolicy(files=10 * count, chunks=10 * count, after_s=600.0),
    )
    try:
        done = wait(queue.submit(paths=[str(folder)]))
    finally:
        queue.stop()
    assert done.state == "done" and done.files_indexed == count
    sizes = [len(c) for c in recorder.calls]
    assert max(sizes) == pipeline.EMBED_POOL_CHUNKS and sum(sizes) == count
    window = pipeline.EMBED_SORT_CHUNKS // pipeline.EMBED_POOL_CHUNKS
    first = [t for call in recorder.calls[:window] for t in call]
    assert len(first) == pipeline.EMBED_SORT_CHUNKS
    pieces = real.piece_counts(first)
    assert pieces == sorted(pieces) and pieces[0] < pieces[-1]  # across the calls, not within


def test_a_cancel_between_pools_of_a_window_commits_only_whole_files(  # type: ignore[no-untyped-def]
    store: LanceStore, real, tmp_path: Path
) -> None:
    count = pipeline.EMBED_SORT_CHUNKS + 40
    texts = small_files(tmp_path / "notes", count)
    recorder = _Calls(real=real)
    recorder.calls = []
    queue = IngestQueue(
        store=store,
        embedder=lambda: recorder,
        commits=CommitPolicy(files=10 * count, chunks=10 * count, after_s=600.0),
    )
    try:
        job = queue.submit(paths=[str(tmp_path / "notes")])
        recorder.on_call = lambda: queue.cancel(job_id=job.id)  # after the window's first pool
        cancelled = wait(job)
    finally:
        queue.stop()
    assert cancelled.state == "cancelled" and len(recorder.calls) == 1
    committed = store.list_documents()
    assert len(committed) == pipeline.EMBED_POOL_CHUNKS  # the embedded ones, whole
    embedded = {t for t in recorder.calls[0]}
    assert {texts[d.path] for d in committed} == embedded
    recorder.on_call = lambda: None
    queue = IngestQueue(store=store, embedder=lambda: recorder)
    try:
        assert wait(queue.submit(paths=[str(tmp_path / "notes")])).state == "done"
    finally:
        queue.stop()
    whole(store, texts)
