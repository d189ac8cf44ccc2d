"""Ingestion jobs: a queue served by one background worker.

A job's progress is an immutable IngestProgress replaced as work advances;
readers wait on a condition for the next version (the server streams them).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from engine.ingest.discovery import discover
from engine.ingest.embedder import Embedder
from engine.ingest.indexer import ChunkingParams, index_file
from engine.ingest.parsers import SUPPORTED_SUFFIXES
from engine.store.lance_store import LanceStore
from engine.wire import FileError, IngestProgress

log = logging.getLogger(__name__)
FINAL_STATES = frozenset({"done", "cancelled", "failed"})


class IngestJob:
    def __init__(self, *, paths: list[str]) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.paths = paths
        self.cancel_requested = threading.Event()
        self._cond = threading.Condition()
        self._version = 0
        self._progress = IngestProgress(job_id=self.id, state="queued")

    def snapshot(self) -> IngestProgress:
        with self._cond:
            return self._progress

    def update(self, **changes: object) -> None:
        with self._cond:
            self._progress = dataclasses.replace(self._progress, **changes)  # type: ignore[arg-type]
            self._version += 1
            self._cond.notify_all()

    def wait_next(self, *, after: int, timeout_s: float) -> tuple[int, IngestProgress]:
        """The next version after `after`, or the current one on timeout."""
        with self._cond:
            self._cond.wait_for(lambda: self._version > after, timeout=timeout_s)
            return self._version, self._progress


class IngestQueue:
    def __init__(
        self,
        *,
        store: LanceStore,
        embedder: Callable[[], Embedder],
        params: ChunkingParams | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._params = params or ChunkingParams()
        self._jobs: dict[str, IngestJob] = {}
        self._queue: queue.Queue[IngestJob | None] = queue.Queue()
        self._worker = threading.Thread(target=self._serve, name="ingest-worker", daemon=True)
        self._worker.start()

    def submit(self, *, paths: list[str]) -> IngestJob:
        job = IngestJob(paths=paths)
        self._jobs[job.id] = job
        self._queue.put(job)
        return job

    def job(self, *, job_id: str) -> IngestJob | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[IngestJob]:
        return list(self._jobs.values())

    def cancel(self, *, job_id: str) -> IngestJob | None:
        job = self._jobs.get(job_id)
        if job is not None:
            job.cancel_requested.set()
            if job.snapshot().state == "queued":
                job.update(state="cancelled")
        return job

    def stop(self, *, timeout_s: float = 10.0) -> None:
        for job in list(self._jobs.values()):
            job.cancel_requested.set()
        self._queue.put(None)
        self._worker.join(timeout=timeout_s)

    def _serve(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            if job.snapshot().state == "cancelled":
                continue
            try:
                self._run(job)
            except Exception as e:  # a bug must not kill the worker: the job says so
                log.exception("ingestion job %s failed", job.id)
                job.update(state="failed", current=None, message=f"{type(e).__name__}: {e}")

    def _run(self, job: IngestJob) -> None:
        job.update(state="running", message="Looking for documents…")
        found = discover(paths=job.paths, suffixes=SUPPORTED_SUFFIXES)
        errors: list[FileError] = list(found.errors)
        job.update(files_total=len(found.files), errors=list(errors), message=None)
        embedder = self._embedder()
        chunks_added = skipped = indexed = 0
        for done, path in enumerate(found.files):
            if job.cancel_requested.is_set():
                job.update(state="cancelled", current=None)
                return
            job.update(current=str(path))
            outcome = index_file(
                path=path, store=self._store, embedder=embedder, params=self._params
            )
            if outcome.status == "indexed":
                indexed += 1
                chunks_added += outcome.chunks
            elif outcome.status == "unchanged":
                skipped += 1
            else:
                errors.append(FileError(path=str(path), reason=outcome.reason or "unknown error"))
            job.update(
                files_done=done + 1,
                chunks_added=chunks_added,
                files_skipped=skipped,
                files_indexed=indexed,
                errors=list(errors),
            )
        self._forget_vanished(folders=found.folders, present=set(found.files))
        self._store.refresh_fulltext_index()
        job.update(state="done", current=None)

    def _forget_vanished(self, *, folders: list[Path], present: set[Path]) -> None:
        """A file that was in a re-ingested folder and is gone loses its chunks."""
        if not folders:
            return
        for doc in self._store.list_documents():
            path = Path(doc.path)
            in_folder = any(path.is_relative_to(f) for f in folders)
            if path not in present and in_folder and not path.exists():
                self._store.remove_document(doc_id=doc.doc_id)
