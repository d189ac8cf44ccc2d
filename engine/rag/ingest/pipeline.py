"""One ingestion job, file by file: triage against the journal, parse in the
sandbox, chunk, embed, and commit the documents in groups.

The child parses the next file while this thread chunks and embeds the last
one. New chunks are embedded a pool at a time as background work (the
embedder encodes a pool in batches sorted by length, one gate turn each), so a
question waits for one batch at most, never for a whole file; this thread runs
at a lower CPU priority than the threads that answer (engine/rag/ingest/priority.py). Documents are
committed in groups (`CommitPolicy`): four
LanceDB commits per group, not per file; a group is all or nothing for each of
its files, so cancelling, pausing or a kill -9 loses at most the files of the
group in hand (read again next time), never half of one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from engine.errors import DiskFullError, ParseError
from engine.rag.ingest.discovery import OUTSIDE_INDEXED, IgnoreRules, discover
from engine.rag.ingest.embedder import DEFAULT_BATCH, Embedder
from engine.rag.ingest.fspath import from_store, to_store
from engine.rag.ingest.indexer import (
    CHANGED_WHILE_READ,
    ChunkingParams,
    FileOutcome,
    Prepared,
    ToParse,
    by_length,
    commit_group,
    embed_rows,
    prepare,
    record_error,
    triage,
)
from engine.rag.ingest.journal import Journal
from engine.rag.ingest.pace import Pace
from engine.rag.ingest.parsers import SUPPORTED_SUFFIXES
from engine.rag.ingest.safe_open import is_plain_path
from engine.rag.ingest.sandbox import ParseSandbox
from engine.rag.store.lance_store import LanceStore
from engine.wire import FileError, FileNote

log = logging.getLogger(__name__)
# One embedding call: sorted by length into batches of DEFAULT_BATCH (one gate
# turn each, so a question waits for one batch at most); several batches to
# sort among, few enough that a cancel is heard soon.
EMBED_POOL_CHUNKS = 4 * DEFAULT_BATCH
# New chunks are first sorted by length over this many, then embedded a pool at
# a time: a batch is padded to its longest text, and of small files' chunks
# sorted over 128, batches were padded 1.12x their real word pieces, over 512
# 1.03x (`ragdoll bench ingest`); progress and a cancel still come once a pool.
EMBED_SORT_CHUNKS = 4 * EMBED_POOL_CHUNKS
HUGE_FILE_CHUNKS = 5_000  # a file with more new chunks than this is announced
MAX_ATTEMPTS = 3  # a file that changes while read is tried again at the end
PUBLISH_EVERY_S = 0.1  # progress reaches readers at most this often (errors and notes at once)


@dataclass(frozen=True, kw_only=True)
class CommitPolicy:
    """When a group of ready files is committed: once it holds `files` files or
    `chunks` chunks, or its first file was ready `after_s` ago. The journal and
    pages tables are compacted every `compact_every` groups and at the end."""

    files: int = 500
    chunks: int = 2_000
    after_s: float = 10.0
    compact_every: int = 25

    @classmethod
    def with_files(cls, files: int | None) -> CommitPolicy:
        """Groups of `files` files (RAGDOLL_INGEST_COMMIT_FILES, `EngineEnviron`:
        tests and benchmarks ask for smaller ones); None: the default."""
        return cls() if files is None else cls(files=files)


@dataclass(frozen=True, kw_only=True)
class JobContext:
    store: LanceStore
    embedder: Embedder
    sandbox: ParseSandbox
    params: ChunkingParams
    rules: IgnoreRules
    # Blocks while the queue is paused; True when the job should stop.
    checkpoint: Callable[[], bool]
    paused: Callable[[], bool]
    # Paths of watcher and rescan jobs must still lie in a watched folder.
    accept: Callable[[Path], bool] | None = None
    # Where a file's real path must lie, for every job: a symbolic link in a watched
    # folder that leads out of them all is listed as an error, never read. Asked
    # again before each write, so that a folder removed meanwhile gets nothing more.
    inside: Callable[[Path], bool] | None = None
    commits: CommitPolicy = CommitPolicy()
    # Held around each write of a file's rows, and by the removal of a folder's
    # documents (IngestQueue.forget_folder): a write checks its file is still wanted
    # and lands whole before the removal looks, or sees the folder gone.
    gate: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """What an ingestion job is asked to do."""

    paths: list[str]  # files and folders to bring up to date
    removed: list[str] = field(default_factory=list)  # gone: their documents leave
    origin: str = "request"  # "request" | "watcher" | "rescan"


class RunningJob(Protocol):
    """The job a run works for (jobs.py's IngestJob): what it was asked, the flag its
    cancel sets, and where the run's progress goes."""

    @property
    def spec(self) -> JobSpec: ...

    @property
    def cancel_requested(self) -> threading.Event: ...

    def update(self, **changes: object) -> None: ...


class JobRun:
    def __init__(self, *, job: RunningJob, ctx: JobContext) -> None:
        self.job = job
        self.ctx = ctx
        self.errors: list[FileError] = []
        self.notes: list[FileNote] = []
        self.done = self.indexed = self.skipped = self.chunks = self.embedded = 0
        self.pages = self.found = 0
        self.active_s = 0.0
        self._since = time.monotonic()
        self._group: list[Prepared] = []  # ready files not yet committed
        self._group_since = 0.0
        self._unembedded: deque[tuple[Prepared, int]] = deque()
        self._sizes: dict[Path, int] = {}
        self._credited = 0.0  # bytes of files counted done (for the bar)
        self._skipped_bytes = 0.0  # of which unchanged: no work, so not in the pace
        self._partial = 0.0  # bytes of the group's files, credited as they are embedded
        self._sizes_total = 0
        self._pace = Pace(total_bytes=0)
        self._groups = 0
        self._published = 0.0
        self._attempts: dict[Path, int] = {}
        self.changed_store = False
        # Paths a request named that no watched folder held when the job began (the
        # engine's own callers: tests, benchmarks): theirs to write, no removal to heed.
        self._free_roots: tuple[Path, ...] = ()

    # -- the whole job ---------------------------------------------------------

    def run(self) -> str:
        """Returns the final state: "done" or "cancelled"."""
        spec = self.job.spec
        paths = spec.paths
        if spec.origin != "request":  # gone again since the event: the removal covers it
            paths = [p for p in paths if os.path.lexists(p)]
        inside = self.ctx.inside
        if spec.origin == "request" and inside is not None:
            self._free_roots = tuple(
                Path(p).resolve() for p in paths if not inside(Path(p).resolve())
            )
        found = discover(paths=paths, suffixes=SUPPORTED_SUFFIXES, inside=self.ctx.inside)
        files = found.files
        if self.ctx.accept is not None:
            files = [f for f in files if self.ctx.accept(f)]
        self._sizes = {f: _size(f) for f in files}
        self._sizes_total = sum(self._sizes.values())
        self._pace = Pace(total_bytes=self._sizes_total)
        self.errors = list(found.errors)
        self.job.update(
            files_total=len(files),
            bytes_total=self._sizes_total,
            errors=list(self.errors),
            message=None,
        )
        journal = Journal(store=self.ctx.store)
        if spec.origin == "rescan":
            self._evict_outside(journal=journal)
        self._record_entries(entries=found.entries, journal=journal)
        todo: deque[Path] = deque(files)
        try:
            state = self._files(todo=todo, journal=journal)
        finally:
            journal.flush()
        if state == "cancelled":
            self._compact()
            return state
        present = set(files) | {Path(e.path) for e in found.entries}
        self._forget(journal=journal, under=found.folders, present=present)
        self._forget(journal=journal, under=[Path(p) for p in spec.removed], present=present)
        if self.changed_store:
            self._compact()
            self.ctx.store.refresh_fulltext_index()
        return "done"

    @property
    def files_in(self) -> int:
        """Files of this job whole in the index: read now, or unchanged."""
        return self.indexed + self.skipped

    def _files(self, *, todo: deque[Path], journal: Journal) -> str:
        inflight = self._next_parse(todo=todo, journal=journal)
        while inflight is not None:
            plan = inflight
            self.job.update(current=str(plan.path))
            try:
                parsed = self.ctx.sandbox.collect(on_progress=self._ocr_progress(path=plan.path))
            except ParseError as e:
                self._error(path=plan.path, reason=e.reason, journal=journal)
                inflight = self._next_parse(todo=todo, journal=journal)
                continue
            ready = prepare(
                plan=plan,
                parsed=parsed,
                store=self.ctx.store,
                tokenizer=self.ctx.embedder.tokenizer,
                dimension=self.ctx.embedder.info.dimension,
                params=self.ctx.params,
            )
            # The child parses the next file while this one is embedded; when
            # paused, this one is settled first, so that the pause (which
            # commits the group) finishes the file at hand instead of holding it
            # parsed but not embedded while the window says it is worked on.
            pausing = self.ctx.paused()
            if not pausing:
                inflight = self._next_parse(todo=todo, journal=journal)
            self._settle(plan=plan, ready=ready, todo=todo, journal=journal)
            if not self._embed(final=False):
                if pausing:
                    inflight = None
                break
            if pausing:
                inflight = self._next_parse(todo=todo, journal=journal)
            due = self._group_due() or (inflight is None and bool(self._group))
            if due and not self._commit(journal=journal):
                break
        if self.job.cancel_requested.is_set():
            if inflight is not None:
                self.ctx.sandbox.abort()  # the file in the child's hands is not wanted
            self._commit_embedded(journal=journal)
            self._tick(force=True)
            return "cancelled"
        self._commit(journal=journal)
        self._tick(force=True)
        return "done"

    def _ocr_progress(self, *, path: Path) -> Callable[[int, int], None]:
        """Pages read by OCR (slow: seconds each) shown as the job's message."""

        def show(done: int, total: int) -> None:
            message = None if done >= total else f"{path.name}: OCR, page {done + 1} of {total}"
            self.job.update(message=message)

        return show

    def _next_parse(self, *, todo: deque[Path], journal: Journal) -> ToParse | None:
        """Triage files until one needs parsing and hand it to the child."""
        while todo:
            if self._must_stop(journal=journal):
                return None
            path = todo.popleft()
            with self.ctx.gate:  # triage writes too: a copy's rows, an error's row
                if not self._wanted(path) and not self._swapped(path):
                    self._drop(path)
                    continue
                step = triage(
                    path=path, store=self.ctx.store, journal=journal, rules=self.ctx.rules
                )
            if isinstance(step, FileOutcome):
                self._count(path, step)
                continue
            self.ctx.sandbox.submit(path=step.path)
            return step
        return None

    def _must_stop(self, *, journal: Journal) -> bool:
        """Commit what is ready before waiting out a pause or stopping."""
        if self.job.cancel_requested.is_set():
            return True
        if not self.ctx.paused():
            return False
        self._commit(journal=journal)
        self._tick(force=True, current=None)  # nothing is worked on while paused
        paused_at = time.monotonic()
        stop = self.ctx.checkpoint()
        self._since += time.monotonic() - paused_at  # paused time is not working time
        return stop

    def _settle(
        self, *, plan: ToParse, ready: Prepared | FileOutcome, todo: deque[Path], journal: Journal
    ) -> None:
        if isinstance(ready, Prepared):
            self._add_to_group(ready)
            return
        if ready.status == "changed" and plan.path.exists():
            tries = self._attempts.get(plan.path, 1)
            if tries < MAX_ATTEMPTS:
                self._attempts[plan.path] = tries + 1
                todo.append(plan.path)
                return
            reason = CHANGED_WHILE_READ
        elif ready.status == "changed":
            reason = "the file disappeared while it was being read"
        else:
            reason = ready.reason or "unknown error"
        self._error(path=plan.path, reason=reason, journal=journal)

    def _wanted(self, path: Path) -> bool:
        """Whether `path` still lies in a watched folder (its folder may have been
        removed since the job listed it), or under a path the request named outside every
        watched folder. Asked under the gate, before each write."""
        if self.ctx.inside is None or self.ctx.inside(path):
            return True
        return any(path == root or path.is_relative_to(root) for root in self._free_roots)

    def _swapped(self, path: Path) -> bool:
        """Whether the listed `path` leads through a symbolic link now, from a folder
        still watched (a folder on it swapped for a link): triage lists it, reads nothing."""
        if is_plain_path(path):
            return False
        real = path.parent
        while not is_plain_path(real) and real != real.parent:
            real = real.parent
        return self._wanted(real)

    def _drop(self, path: Path) -> None:
        """A file whose folder was removed: done with, nothing written."""
        self.done += 1
        self._credited += self._sizes.get(path, 0)
        self._tick()

    def _error(self, *, path: Path, reason: str, journal: Journal) -> None:
        with self.ctx.gate:
            if not self._wanted(path):
                self._drop(path)
                return
            outcome = record_error(store=self.ctx.store, journal=journal, path=path, reason=reason)
        self._count(path, outcome)

    def _commit_wanted(self, *, group: list[Prepared], journal: Journal) -> None:
        """Commit the group's files that are still wanted, as one group."""
        with self.ctx.gate:
            wanted = [p for p in group if self._wanted(p.plan.path)]
            kept = {id(p) for p in wanted}
            for prepared in group:
                if id(prepared) not in kept:
                    self._drop(prepared.plan.path)
            self._commit_fitting(group=wanted, journal=journal)

    def _commit_fitting(self, *, group: list[Prepared], journal: Journal) -> None:
        """Commit `group`; where the disk has no room for it whole (the store checks
        before writing), as much of it as fits, by halves, then stop the job."""
        try:
            outcomes = commit_group(group=group, store=self.ctx.store, journal=journal)
        except DiskFullError:
            if len(group) <= 1:
                raise
            half = len(group) // 2
            self._commit_fitting(group=group[:half], journal=journal)
            self._commit_fitting(group=group[half:], journal=journal)
            return
        for prepared, outcome in zip(group, outcomes, strict=True):
            self._count(prepared.plan.path, outcome, embedded_already=True)

    # -- groups: embedding and committing -----------------------------------------

    def _add_to_group(self, ready: Prepared) -> None:
        if not self._group:
            self._group_since = time.monotonic()
        self._group.append(ready)
        self._unembedded.extend((ready, i) for i in ready.todo)
        self.pages += ready.doc.pages or 1
        self.found += len(ready.records)
        path = str(ready.plan.path)
        notes = [FileNote(path=path, note=n) for n in ready.notes]
        if len(ready.todo) >= HUGE_FILE_CHUNKS:
            notes.append(FileNote(path=path, note=_huge_note(len(ready.todo), self._chunk_rate())))
        if notes:
            self.notes.extend(notes)
        self._tick(**({"notes": list(self.notes)} if notes else {}))

    def _embed(self, *, final: bool) -> bool:
        """Embed whole pools of the group's new chunks (all of them when
        `final`), one call each; False when the job was cancelled meanwhile."""
        while len(self._unembedded) >= EMBED_SORT_CHUNKS or (final and self._unembedded):
            take = min(EMBED_SORT_CHUNKS, len(self._unembedded))
            window = [self._unembedded.popleft() for _ in range(take)]
            window = by_length(rows=window, embedder=self.ctx.embedder)
            for start in range(0, len(window), EMBED_POOL_CHUNKS):
                if self.job.cancel_requested.is_set():
                    # Back in the queue: their files are not whole (_commit_embedded).
                    self._unembedded.extendleft(reversed(window[start:]))
                    return False
                rows = window[start : start + EMBED_POOL_CHUNKS]
                embed_rows(rows=rows, embedder=self.ctx.embedder)
                self.embedded += len(rows)
                for p, _ in rows:
                    if p.todo:  # a file's share of its bytes, as its chunks are embedded
                        self._partial += self._sizes.get(p.plan.path, 0) / len(p.todo)
                self._tick(current=str(rows[-1][0].plan.path))
        return True

    def _group_due(self) -> bool:
        if not self._group:
            return False
        policy = self.ctx.commits
        chunks = sum(len(p.records) for p in self._group)
        return (
            len(self._group) >= policy.files
            or chunks >= policy.chunks
            or time.monotonic() - self._group_since >= policy.after_s
        )

    def _commit(self, *, journal: Journal) -> bool:
        """Embed what is left of the group and commit it; False when cancelled."""
        if not self._group:
            return True
        if not self._embed(final=True):
            return False
        group, self._group = self._group, []
        self._partial = 0.0
        self._commit_wanted(group=group, journal=journal)
        self._groups += 1
        if self._groups % self.ctx.commits.compact_every == 0:
            self._compact()
        return True

    def _commit_embedded(self, *, journal: Journal) -> None:
        """Cancelled: the group's files whose chunks are all embedded go in;
        the rest are read again next time."""
        waiting = {id(p) for p, _ in self._unembedded}
        ready = [p for p in self._group if id(p) not in waiting]
        self._group, self._partial = [], 0.0
        self._unembedded.clear()
        if ready:
            self._commit_wanted(group=ready, journal=journal)

    def _compact(self) -> None:
        self.ctx.store.compact()

    # -- bookkeeping -------------------------------------------------------------

    def _count(self, path: Path, outcome: FileOutcome, *, embedded_already: bool = False) -> None:
        self.done += 1
        self._credited += self._sizes.get(path, 0)
        changes: dict[str, object] = {}
        if outcome.status in ("indexed", "copied"):
            self.indexed += 1
            self.chunks += outcome.chunks
            if not embedded_already:
                self.embedded += outcome.embedded
            if outcome.status == "copied":
                self.pages += outcome.pages or 1
                self.found += outcome.chunks
            self.changed_store = True
        elif outcome.status == "unchanged":
            self.skipped += 1
            self._skipped_bytes += self._sizes.get(path, 0)
            self._pace.skip(size=self._sizes.get(path, 0))
        else:
            self.errors.append(FileError(path=str(path), reason=outcome.reason or "unknown error"))
            changes["errors"] = list(self.errors)
        self._tick(**changes)

    def _chunk_rate(self) -> float:
        return self.embedded / self.active_s if self.active_s > 0 else 0.0

    def _tick(self, *, force: bool = False, **changes: object) -> None:
        now = time.monotonic()
        dt = now - self._since
        self.active_s += dt
        self._since = now
        done_bytes = self._credited + self._partial
        self._pace.advance(done_bytes=done_bytes - self._skipped_bytes, dt=dt)
        # A rescan skips thousands of files a second: readers need a few
        # updates a second, not one per file (the job's end forces the last).
        if not (force or changes) and now - self._published < PUBLISH_EVERY_S:
            return
        self._published = now
        # Files read this run: unchanged ones took no work and would make a
        # resumed job look many times faster than it reads.
        rate = (self.done - self.skipped) / self.active_s if self.active_s > 0 else 0.0
        eta = self._pace.eta_s
        self.job.update(
            files_done=self.done,
            files_indexed=self.indexed,
            files_skipped=self.skipped,
            chunks_added=self.chunks,
            chunks_embedded=self.embedded,
            chunks_found=self.found,
            pages_read=self.pages,
            bytes_done=int(min(done_bytes, self._sizes_total)),
            files_per_s=round(rate, 3),
            chunks_per_s=round(max(self.chunks, self.embedded) / self.active_s, 3)
            if self.active_s > 0
            else 0.0,
            eta_s=round(eta, 1) if eta is not None else None,
            **changes,
        )

    def _record_entries(self, *, entries: list[FileError], journal: Journal) -> None:
        """Links that were not followed (leading out, broken, a loop) get an error row,
        as a file that could not be read does: /v1/documents/errors lists them until
        they are fixed or gone. A row that says so already is not written again."""
        for entry in entries:
            path = Path(entry.path)
            known = journal.get(path=to_store(path))
            if known is not None and known.status == "error" and known.error == entry.reason:
                continue
            with self.ctx.gate:
                if self._wanted(path.parent):
                    record_error(
                        store=self.ctx.store, journal=journal, path=path, reason=entry.reason
                    )
                    self.changed_store = True

    def _evict_outside(self, *, journal: Journal) -> None:
        """Documents whose real path lies in no watched folder leave the index, each
        listed with the reason: an older version followed symbolic links out of the
        watched folders, and what it read that way must not stay searchable."""
        inside = self.ctx.inside
        if inside is None:
            return
        evicted = []
        for doc in journal.documents():
            if doc.status != "indexed" or inside(from_store(doc.path)):
                continue  # an error row holds no text: a link left unread keeps its row
            self.ctx.store.remove_document(doc_id=doc.doc_id)
            journal.forget(path=doc.path)
            self.changed_store = True
            evicted.append(FileError(path=str(from_store(doc.path)), reason=OUTSIDE_INDEXED))
            log.warning("removed from the index: %s lies outside every watched folder", doc.path)
        if evicted:
            self.errors += evicted
            self.job.update(errors=list(self.errors))

    def _forget(self, *, journal: Journal, under: list[Path], present: set[Path]) -> None:
        """Documents under `under` whose file is gone lose their chunks (a
        deleted file, the old name of a renamed one). Compared as the store's
        strings: a rescan of 20,000 files must not build 20,000 Paths to find none."""
        if not under:
            return
        present_keys = {to_store(p) for p in present}
        roots = [to_store(u) for u in under]
        prefixes = tuple(r if r.endswith(os.sep) else r + os.sep for r in roots)
        for doc in journal.documents():
            key = doc.path
            if key in present_keys or not (key in roots or key.startswith(prefixes)):
                continue
            path = from_store(key)
            # A path through a symbolic link now (a folder swapped for one) is gone
            # too: documents are kept by real paths, and it leads elsewhere.
            if not path.exists() or not is_plain_path(path):
                self.ctx.store.remove_document(doc_id=doc.doc_id)
                journal.forget(path=doc.path)
                self.changed_store = True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _huge_note(chunks: int, rate: float) -> str:
    note = f"yields {chunks:,} chunks to embed"
    if rate > 0:
        minutes = chunks / rate / 60
        note += f" (about {max(1, round(minutes))} min at the current pace)"
    return note + "; questions are still answered meanwhile"
