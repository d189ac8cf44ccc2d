"""Ingestion jobs: a durable queue served by one background worker.

A job's progress is an immutable IngestProgress replaced as work advances;
readers wait on a condition for the next version (the server streams them).
Jobs people asked for are written to a small file until they end, so that an
engine killed mid-job picks them up again at its next start; jobs from the
folder watcher need no such file, since the start-up rescan finds the same work.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import queue
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from engine.errors import LoadStopped
from engine.rag.ingest.discovery import IgnoreRules
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.fspath import from_store, to_store
from engine.rag.ingest.indexer import ChunkingParams
from engine.rag.ingest.pipeline import CommitPolicy, JobContext, JobRun, JobSpec
from engine.rag.ingest.priority import lower_this_thread
from engine.rag.ingest.sandbox import ParseSandbox, SandboxLimits
from engine.rag.store.doc_writes import disk_full_error, is_disk_full
from engine.rag.store.lance_store import LanceStore
from engine.runtime.heap import give_back_freed_memory
from engine.wire import FINAL_STATES, DiskFull, FileError, IngestProgress, IngestQueueState

log = logging.getLogger(__name__)

KEEP_FINISHED_JOBS = 200  # the watcher makes many small jobs; old ones are forgotten


# Work other than files that the ingestion worker runs in its turn (re-embedding
# the collection under a new embedder): it gets the job and a checkpoint that
# says whether to stop, and returns the job's final state.
JobTask = Callable[["IngestJob", Callable[[], bool]], str]


class IngestJob:
    def __init__(
        self, *, spec: JobSpec, job_id: str | None = None, task: JobTask | None = None
    ) -> None:
        self.id = job_id or uuid.uuid4().hex[:12]
        self.spec = spec
        self.task = task
        self.paths = spec.paths
        self.cancel_requested = threading.Event()
        self._cond = threading.Condition()
        self._version = 0
        self._progress = IngestProgress(job_id=self.id, state="queued", origin=spec.origin)

    def snapshot(self) -> IngestProgress:
        with self._cond:
            return self._progress

    def update(self, **changes: object) -> None:
        changes = _displayable(changes)
        with self._cond:
            self._progress = dataclasses.replace(self._progress, **changes)  # type: ignore[arg-type]
            self._version += 1
            self._cond.notify_all()

    def wait_next(self, *, after: int, timeout_s: float) -> tuple[int, IngestProgress]:
        """The next version after `after`, or the current one on timeout."""
        with self._cond:
            self._cond.wait_for(lambda: self._version > after, timeout=timeout_s)
            return self._version, self._progress


def _displayable(changes: dict[str, object]) -> dict[str, object]:
    """File names that are not UTF-8 as the store keeps them (engine/rag/ingest/fspath.py):
    progress goes out as JSON, which cannot carry the bytes Python keeps as surrogates."""
    out = dict(changes)
    for key in ("current", "message"):
        if isinstance(out.get(key), str):
            out[key] = to_store(out[key])  # type: ignore[arg-type]
    errors = out.get("errors")
    if isinstance(errors, list):
        out["errors"] = [
            FileError(path=to_store(e.path), reason=to_store(e.reason)) for e in errors
        ]
    return out


class PendingJobs:
    """The jobs people asked for and that have not ended, as JSON on disk."""

    def __init__(self, *, file: Path | None) -> None:
        self._file = file
        self._lock = threading.Lock()

    def load(self) -> list[tuple[str, JobSpec]]:
        if self._file is None:
            return []
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
            return [(j["id"], JobSpec(paths=list(j["paths"]))) for j in data["jobs"]]
        except FileNotFoundError:
            return []
        except (ValueError, KeyError, TypeError) as e:
            log.warning("the pending ingestion jobs file was unreadable (%s); ignored", e)
            return []

    def add(self, job: IngestJob) -> None:
        self._change(lambda jobs: [*jobs, {"id": job.id, "paths": job.spec.paths}])

    def remove(self, job: IngestJob) -> None:
        self._change(lambda jobs: [j for j in jobs if j.get("id") != job.id])

    def _change(self, edit: Callable[[list[dict]], list[dict]]) -> None:
        if self._file is None:
            return
        with self._lock:
            try:
                jobs = json.loads(self._file.read_text(encoding="utf-8"))["jobs"]
            except (FileNotFoundError, ValueError, KeyError, TypeError):
                jobs = []
            # surrogateescape: a path is bytes on disk, and must come back the same.
            text = json.dumps({"jobs": edit(jobs)}, ensure_ascii=True)
            tmp = self._file.with_suffix(".tmp")
            try:
                self._file.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(text, encoding="utf-8", errors="surrogateescape")
                os.replace(tmp, self._file)
            except OSError as e:  # a full disk: the job runs, it is just not resumed
                log.warning("could not write the pending ingestion jobs file: %s", e)


class IngestQueue:
    def __init__(
        self,
        *,
        store: LanceStore,
        embedder: Callable[[], Embedder],
        params: ChunkingParams | None = None,
        limits: SandboxLimits | None = None,
        rules: IgnoreRules | None = None,
        pending_file: Path | None = None,
        accept: Callable[[Path], bool] | None = None,
        commits: CommitPolicy | None = None,
        nice: int = 0,
    ) -> None:
        """`nice`: how far below the engine's CPU priority the worker thread runs
        (the engine passes `EngineEnviron.ingest_nice`; 0 in tools and benches
        that ingest in-process, where nothing is answered meanwhile)."""
        self._nice = nice
        self._store = store
        self._commits = commits or CommitPolicy()
        self._embedder = embedder
        self._params = params or ChunkingParams()
        self._limits = limits or SandboxLimits()
        self._rules = rules or IgnoreRules()
        self._accept = accept
        self._pending = PendingJobs(file=pending_file)
        self._jobs: dict[str, IngestJob] = {}
        self._gate = threading.Lock()  # JobContext.gate
        self._queue: queue.Queue[IngestJob | None] = queue.Queue()
        self._resumed = threading.Event()
        self._resumed.set()
        self._wake = threading.Condition()
        for job_id, spec in self._pending.load():  # an engine killed mid-job
            self._enqueue(IngestJob(spec=spec, job_id=job_id))
        self._worker = threading.Thread(target=self._serve, name="ingest-worker", daemon=True)
        self._worker.start()

    # -- submitting --------------------------------------------------------------

    def submit(self, *, paths: list[str]) -> IngestJob:
        job = IngestJob(spec=JobSpec(paths=paths))
        self._pending.add(job)
        return self._enqueue(job)

    def submit_changes(
        self, *, paths: list[str], removed: list[str] | None = None, origin: str = "watcher"
    ) -> IngestJob:
        """Work the folder watcher found (or the start-up rescan): not written
        down, since the next start's rescan would find it again."""
        return self._enqueue(
            IngestJob(spec=JobSpec(paths=paths, removed=removed or [], origin=origin))
        )

    def submit_task(self, *, task: JobTask, origin: str) -> IngestJob:
        """Run `task` in the worker's turn, between file jobs, shown with the jobs
        (its progress in the same fields). Not written down: its owner knows at
        the next start whether it is still to do."""
        return self._enqueue(IngestJob(spec=JobSpec(paths=[], origin=origin), task=task))

    def _enqueue(self, job: IngestJob) -> IngestJob:
        finished = [j for j in self._jobs.values() if j.snapshot().state in FINAL_STATES]
        for old in finished[: max(0, len(finished) - KEEP_FINISHED_JOBS)]:
            del self._jobs[old.id]
        self._jobs[job.id] = job
        if not self._resumed.is_set():
            job.update(paused=True)
        self._queue.put(job)
        return job

    # -- controlling ---------------------------------------------------------------

    def job(self, *, job_id: str) -> IngestJob | None:
        return self._jobs.get(job_id)

    def jobs(self) -> list[IngestJob]:
        """Queued, running and recently finished jobs, oldest first."""
        return list(self._jobs.values())

    def cancel(self, *, job_id: str) -> IngestJob | None:
        job = self._jobs.get(job_id)
        if job is not None:
            job.cancel_requested.set()
            with self._wake:
                self._wake.notify_all()
            if job.snapshot().state == "queued":
                job.update(state="cancelled")
                self._pending.remove(job)
        return job

    def forget_folder(self, *, root: Path, watched: Callable[[str], bool]) -> int:
        """A folder was removed from the watched ones: cancel the jobs that read only
        in it, and remove its documents now (`watched(stored path)`: whether a
        document still lies in another watched folder, a folder inside it that is
        watched too). Under the write gate, so that a job's write lands before or
        finds the folder gone, never after the removal looked. Returns how many
        documents went."""
        for job in list(self._jobs.values()):
            state = job.snapshot().state
            if state in FINAL_STATES or not job.spec.paths:
                continue
            if all(_under(p, root) for p in job.spec.paths):
                job.update(message="its folder was removed from the watched folders")
                self.cancel(job_id=job.id)
        with self._gate:
            gone = [
                d.doc_id
                for d in self._store.list_documents()
                if _under(d.path, root, stored=True) and not watched(d.path)
            ]
            self._store.remove_documents(doc_ids=gone)
        return len(gone)

    def pause(self) -> IngestQueueState:
        """The running job stops after the file at hand; queued jobs wait."""
        self._resumed.clear()
        for job in self._active():
            job.update(paused=True)
        return self.state()

    def resume(self) -> IngestQueueState:
        self._resumed.set()
        with self._wake:
            self._wake.notify_all()
        for job in self._active():
            job.update(paused=False)
        return self.state()

    @property
    def paused(self) -> bool:
        return not self._resumed.is_set()

    def state(self) -> IngestQueueState:
        return IngestQueueState(paused=self.paused, jobs=[job.snapshot() for job in self._active()])

    def _active(self) -> list[IngestJob]:
        return [j for j in list(self._jobs.values()) if j.snapshot().state not in FINAL_STATES]

    def stop(self, *, timeout_s: float = 10.0) -> None:
        """Stop serving; jobs people asked for stay pending for the next start."""
        for job in list(self._jobs.values()):
            job.cancel_requested.set()
        self._stopping = True
        self._resumed.set()
        with self._wake:
            self._wake.notify_all()
        self._queue.put(None)
        self._worker.join(timeout=timeout_s)

    # -- the worker -----------------------------------------------------------------

    _stopping = False

    def _checkpoint(self, job: IngestJob) -> bool:
        """Wait while paused; True when the job must stop (cancelled, shutdown)."""
        with self._wake:
            self._wake.wait_for(lambda: self._resumed.is_set() or job.cancel_requested.is_set())
        return job.cancel_requested.is_set()

    def _serve(self) -> None:
        # Before this thread's first encode call, so that torch's pool for it
        # is started at the lower priority too (engine/rag/ingest/priority.py).
        lower_this_thread(nice=self._nice)
        sandbox = ParseSandbox(limits=self._limits)
        try:
            while True:
                job = self._queue.get()
                if job is None:
                    return
                if job.snapshot().state == "cancelled":
                    continue
                if self._checkpoint(job):
                    self._finish(job, state="cancelled")
                    continue
                self._run(job, sandbox)
                if self._queue.empty():
                    give_back_freed_memory()
        finally:
            sandbox.close()

    def _run(self, job: IngestJob, sandbox: ParseSandbox) -> None:
        if job.task is not None:
            self._run_task(job)
            return
        job.update(state="running", message="Looking for documents…")
        run: JobRun | None = None
        try:
            ctx = JobContext(
                store=self._store,
                embedder=self._embedder(),
                sandbox=sandbox,
                params=self._params,
                rules=self._rules,
                checkpoint=lambda: self._checkpoint(job),
                paused=lambda: self.paused,
                accept=self._accept if job.spec.origin != "request" else None,
                inside=self._accept,
                commits=self._commits,
                gate=self._gate,
            )
            run = JobRun(job=job, ctx=ctx)
            state = run.run()
        except LoadStopped as e:  # the engine closed before its embedder loaded
            sandbox.abort()
            self._finish(job, state="cancelled", message=str(e), keep_pending=True)
            return
        except Exception as e:  # a bug must not kill the worker: the job says so
            sandbox.abort()
            if is_disk_full(e):
                self._disk_full(job, run=run)
                return
            log.exception("ingestion job %s failed", job.id)
            self._finish(job, state="failed", message=f"{type(e).__name__}: {e}")
            return
        self._finish(job, state=state)

    def _run_task(self, job: IngestJob) -> None:
        assert job.task is not None
        job.update(state="running")
        try:
            state = job.task(job, lambda: self._checkpoint(job))
        except Exception as e:  # a bug must not kill the worker: the job says so
            log.exception("ingestion task %s failed", job.id)
            self._finish(job, state="failed", message=f"{type(e).__name__}: {e}")
            return
        self._finish(job, state=state)

    def _disk_full(self, job: IngestJob, *, run: JobRun | None) -> None:
        """Say which disk is full, what is in and what is not, and that nothing
        was lost: every write is all or nothing, and the rest waits for room."""
        error = disk_full_error(self._store.folder)
        total = job.snapshot().files_total
        files_in = run.files_in if run is not None else 0
        unread = max(0, total - (run.done if run is not None else 0))
        report = DiskFull(
            mount=error.mount,
            folder=error.folder,
            files_in=files_in,
            files_not_read=unread,
            free_bytes=error.free_bytes,
        )
        log.warning("ingestion job %s stopped: %s", job.id, error)
        self._finish(job, state="failed", message=disk_full_text(report), disk_full=report)

    def _finish(
        self,
        job: IngestJob,
        *,
        state: str,
        message: str | None = None,
        disk_full: DiskFull | None = None,
        keep_pending: bool = False,
    ) -> None:
        changes: dict[str, object] = {"state": state, "current": None, "paused": False}
        if message is not None:
            changes["message"] = message
        if disk_full is not None:
            changes["disk_full"] = disk_full
        if state == "done":
            changes["eta_s"] = 0.0
        # A job cut short by shutdown stays pending; one the person cancelled does not.
        if not keep_pending and not (self._stopping and state == "cancelled"):
            self._pending.remove(job)
        job.update(**changes)


def _under(path: str, root: Path, *, stored: bool = False) -> bool:
    """Whether `path` (a job's path, or as the store keeps it) lies in `root`."""
    real = from_store(path) if stored else Path(path)
    return real == root or real.is_relative_to(root)


def disk_full_text(report: DiskFull) -> str:
    """The sentence the CLI and the window show for a job stopped on a full disk."""
    return (
        f"The disk at {report.mount} is full (it holds the index, {report.folder}). "
        f"{_files(report.files_in)} in the index; {_not_read(report.files_not_read)}. "
        "Nothing was lost: what is in stays whole, "
        "and the rest is read when there is room (free some space, then add the folder "
        "again or restart RAGDoll)."
    )


def _files(n: int) -> str:
    return f"{n} file{'' if n == 1 else 's'} {'is' if n == 1 else 'are'}"


def _not_read(n: int) -> str:
    return f"{n} {'was' if n == 1 else 'were'} not read"
