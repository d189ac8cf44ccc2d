"""One ingestion job, file by file: triage against the journal, parse in the
sandbox, chunk, embed in batches across files, swap each document in.

The child parses the next file while this thread chunks and embeds the last
one. Every document is committed on its own, so cancelling, pausing or a
kill -9 loses at most the files not yet committed, never half of one.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ParseError
from engine.ingest.discovery import IgnoreRules, discover
from engine.ingest.embedder import Embedder
from engine.ingest.fspath import from_store
from engine.ingest.indexer import (
    CHANGED_WHILE_READ,
    ChunkingParams,
    FileOutcome,
    Prepared,
    ToParse,
    commit,
    embed_into,
    prepare,
    record_error,
    triage,
)
from engine.ingest.journal import Journal
from engine.ingest.parsers import SUPPORTED_SUFFIXES
from engine.ingest.sandbox import ParseSandbox
from engine.store.lance_store import LanceStore
from engine.wire import FileError

EMBED_BATCH_CHUNKS = 64  # new chunks gathered across files before one embedding call
MAX_ATTEMPTS = 3  # a file that changes while read is tried again at the end


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
    # folder that leads out of them all is listed as an error, never read.
    inside: Callable[[Path], bool] | None = None


class JobRun:
    def __init__(self, *, job: object, ctx: JobContext) -> None:
        self.job = job  # an IngestJob: update(**fields), spec, cancel_requested
        self.ctx = ctx
        self.errors: list[FileError] = []
        self.done = self.indexed = self.skipped = self.chunks = self.embedded = 0
        self.active_s = 0.0
        self._since = time.monotonic()
        self._batch: list[Prepared] = []
        self._attempts: dict[Path, int] = {}
        self.changed_store = False

    # -- the whole job ---------------------------------------------------------

    def run(self) -> str:
        """Returns the final state: "done" or "cancelled"."""
        spec = self.job.spec  # type: ignore[attr-defined]
        paths = spec.paths
        if spec.origin != "request":  # gone again since the event: the removal covers it
            paths = [p for p in paths if os.path.lexists(p)]
        found = discover(paths=paths, suffixes=SUPPORTED_SUFFIXES, inside=self.ctx.inside)
        files = found.files
        if self.ctx.accept is not None:
            files = [f for f in files if self.ctx.accept(f)]
        self.errors = list(found.errors)
        self.job.update(files_total=len(files), errors=list(self.errors), message=None)  # type: ignore[attr-defined]
        journal = Journal(store=self.ctx.store)
        todo: deque[Path] = deque(files)
        try:
            state = self._files(todo=todo, journal=journal)
        finally:
            journal.flush()
        if state == "cancelled":
            return state
        present = set(files)
        self._forget(journal=journal, under=found.folders, present=present)
        self._forget(journal=journal, under=[Path(p) for p in spec.removed], present=present)
        if self.changed_store:
            self.ctx.store.refresh_fulltext_index()
        return "done"

    def _files(self, *, todo: deque[Path], journal: Journal) -> str:
        inflight = self._next_parse(todo=todo, journal=journal)
        while inflight is not None:
            plan = inflight
            try:
                parsed = self.ctx.sandbox.collect(on_progress=self._ocr_progress(path=plan.path))
            except ParseError as e:
                self._count(
                    plan.path,
                    record_error(
                        store=self.ctx.store, journal=journal, path=plan.path, reason=e.reason
                    ),
                )
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
            # The child parses the next file while this one is embedded.
            inflight = self._next_parse(todo=todo, journal=journal)
            self._settle(plan=plan, ready=ready, todo=todo, journal=journal)
            pending = sum(len(p.todo) for p in self._batch)
            if pending >= EMBED_BATCH_CHUNKS or (inflight is None and self._batch):
                self._flush(journal=journal)
        self._flush(journal=journal)
        return "cancelled" if self.job.cancel_requested.is_set() else "done"  # type: ignore[attr-defined]

    def _ocr_progress(self, *, path: Path) -> Callable[[int, int], None]:
        """Pages read by OCR (slow: seconds each) shown as the job's message."""

        def show(done: int, total: int) -> None:
            message = None if done >= total else f"{path.name}: OCR, page {done + 1} of {total}"
            self.job.update(message=message)  # type: ignore[attr-defined]

        return show

    def _next_parse(self, *, todo: deque[Path], journal: Journal) -> ToParse | None:
        """Triage files until one needs parsing and hand it to the child."""
        while todo:
            if self._must_stop(journal=journal):
                return None
            path = todo.popleft()
            self.job.update(current=str(path))  # type: ignore[attr-defined]
            step = triage(path=path, store=self.ctx.store, journal=journal, rules=self.ctx.rules)
            if isinstance(step, FileOutcome):
                self._count(path, step)
                continue
            self.ctx.sandbox.submit(path=step.path)
            return step
        return None

    def _must_stop(self, *, journal: Journal) -> bool:
        """Commit what is ready before waiting out a pause or stopping."""
        if self.job.cancel_requested.is_set():  # type: ignore[attr-defined]
            return True
        if not self.ctx.paused():
            return False
        self._flush(journal=journal)
        self._tick()
        paused_at = time.monotonic()
        stop = self.ctx.checkpoint()
        self._since += time.monotonic() - paused_at  # paused time is not working time
        return stop

    def _settle(
        self, *, plan: ToParse, ready: Prepared | FileOutcome, todo: deque[Path], journal: Journal
    ) -> None:
        if isinstance(ready, Prepared):
            self._batch.append(ready)
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
        self._count(
            plan.path,
            record_error(store=self.ctx.store, journal=journal, path=plan.path, reason=reason),
        )

    def _flush(self, *, journal: Journal) -> None:
        if not self._batch:
            return
        batch, self._batch = self._batch, []
        embed_into(prepared=batch, embedder=self.ctx.embedder)
        for prepared in batch:
            outcome = commit(prepared=prepared, store=self.ctx.store, journal=journal)
            self._count(prepared.plan.path, outcome)

    # -- bookkeeping -------------------------------------------------------------

    def _count(self, path: Path, outcome: FileOutcome) -> None:
        self.done += 1
        changes: dict[str, object] = {}
        if outcome.status in ("indexed", "copied"):
            self.indexed += 1
            self.chunks += outcome.chunks
            self.embedded += outcome.embedded
            self.changed_store = True
        elif outcome.status == "unchanged":
            self.skipped += 1
        else:
            self.errors.append(FileError(path=str(path), reason=outcome.reason or "unknown error"))
            changes["errors"] = list(self.errors)
        self._tick(**changes)

    def _tick(self, **changes: object) -> None:
        now = time.monotonic()
        self.active_s += now - self._since
        self._since = now
        rate = self.done / self.active_s if self.active_s > 0 else 0.0
        total = self.job.snapshot().files_total  # type: ignore[attr-defined]
        self.job.update(  # type: ignore[attr-defined]
            files_done=self.done,
            files_indexed=self.indexed,
            files_skipped=self.skipped,
            chunks_added=self.chunks,
            chunks_embedded=self.embedded,
            files_per_s=round(rate, 3),
            chunks_per_s=round(self.chunks / self.active_s, 3) if self.active_s > 0 else 0.0,
            eta_s=round(max(0, total - self.done) / rate, 1) if rate > 0 else None,
            **changes,
        )

    def _forget(self, *, journal: Journal, under: list[Path], present: set[Path]) -> None:
        """Documents under `under` whose file is gone lose their chunks (a
        deleted file, the old name of a renamed one)."""
        if not under:
            return
        for doc in journal.documents():
            path = from_store(doc.path)
            if path in present or not any(path == u or path.is_relative_to(u) for u in under):
                continue
            if not path.exists():
                self.ctx.store.remove_document(doc_id=doc.doc_id)
                journal.forget(path=doc.path)
                self.changed_store = True
