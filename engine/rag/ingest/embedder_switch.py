"""Switching the embedder: the collection re-embedded as a background job.

The embedder in force is the one the index was built with (its meta); questions,
ingestion and the API's embeddings use it until the new vectors are complete.
The chosen embedder (the settings) re-embeds the stored chunk texts into a new
table in the ingestion worker's turn, shown with the ingestion jobs
(origin "embedder"), then the store swaps tables and the engine swaps
embedders under the store's write lock (engine/rag/store/reembed.py). The job is
not written down: at every start the engine compares the settings with the
index and queues it again when they differ, and it goes on from the batches done.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.environ import REEMBED_BATCH
from engine.errors import EmbedderError
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.jobs import IngestJob, IngestQueue
from engine.rag.store.lance_store import LanceStore
from engine.wire import FINAL_STATES

log = logging.getLogger(__name__)

ORIGIN = "embedder"


class EmbedderSwitch:
    def __init__(
        self,
        *,
        store: LanceStore,
        queue: IngestQueue,
        load: Callable[[str], Embedder],
        on_swap: Callable[[Embedder], None],
        batch: int = REEMBED_BATCH,
    ) -> None:
        """`batch`: chunks per store batch, each one commit to the new table and the
        most a kill -9 can lose (RAGDOLL_REEMBED_BATCH: tests ask for small ones, so a
        kill lands mid-way); the embedder splits it into its own batches (questions
        first)."""
        self._batch = batch
        self._store = store
        self._queue = queue
        self._load = load
        self._on_swap = on_swap
        self._lock = threading.Lock()
        self._job: IngestJob | None = None
        self._target: str | None = None

    def active(self) -> tuple[str, IngestJob] | None:
        """The embedder being switched to and its job, while it is queued or running."""
        with self._lock:
            job, target = self._job, self._target
        if job is None or target is None or job.snapshot().state in FINAL_STATES:
            return None
        return target, job

    def load_in_force(self, *, chosen: str) -> Embedder | None:
        """The embedder the index was built with, when `chosen` differs from it
        (and the switch queued); None when the index has no other embedder, or
        when its embedder no longer loads (then the caller re-embeds at once)."""
        meta = self._store.meta
        if meta is None or meta.embedder_id == chosen:
            return None
        try:
            old = self._load(meta.embedder_id)
        except EmbedderError as e:
            log.warning(
                "the index's embedder %s does not load (%s): re-embedding with %s before answering",
                meta.embedder_id,
                e,
                chosen,
            )
            return None
        if old.info.dimension != meta.dimension:
            return None
        self.start(target=chosen)  # queued at the engine's start; again if it ended
        return old

    def choose(self, *, name: str, embedder: Embedder | None = None) -> str:
        """The embedder the person chose, as it will be saved: back to the one in
        force cancels a switch; another is loaded now (an error if it does not
        load; `embedder`: already loaded, as an embeddings server is when it is
        checked) and its re-embedding queued."""
        name = name.strip()
        if not name:
            raise ValueError(
                "name an embedder: a model folder, a GGUF embedder file or a Hugging Face id"
            )
        if Path(name).expanduser().exists():
            name = str(Path(name).expanduser().resolve())
        meta = self._store.meta
        active = self.active()
        if meta is not None and name == meta.embedder_id:
            self.cancel()  # nothing to build
        elif active is None or active[0] != name:
            self.start(target=name, embedder=embedder or self._load(name))
        return name

    def start(self, *, target: str, embedder: Embedder | None = None) -> IngestJob:
        """Queue the re-embedding for `target` (loaded now when `embedder` is
        given, else by the job); a switch to another embedder still waiting or
        running is cancelled (its half-built table stays for a later switch)."""
        with self._lock:
            job = self._job
            if (
                job is not None
                and self._target == target
                and job.snapshot().state not in FINAL_STATES
            ):
                return job
            if job is not None:
                self._queue.cancel(job_id=job.id)
            self._target = target
            self._job = self._queue.submit_task(task=self._task(target, embedder), origin=ORIGIN)
            return self._job

    def cancel(self) -> None:
        """Stop a switch: the index in force stays."""
        with self._lock:
            job, self._job, self._target = self._job, None, None
        if job is not None:
            self._queue.cancel(job_id=job.id)

    def _task(
        self, target: str, preloaded: Embedder | None
    ) -> Callable[[IngestJob, Callable[[], bool]], str]:
        def run(job: IngestJob, stop: Callable[[], bool]) -> str:
            return self._run(job=job, stop=stop, target=target, preloaded=preloaded)

        return run

    def _run(
        self,
        *,
        job: IngestJob,
        stop: Callable[[], bool],
        target: str,
        preloaded: Embedder | None,
    ) -> str:
        try:
            return self._switch(job=job, stop=stop, target=target, preloaded=preloaded)
        except EmbedderError as e:
            # Not a bug (an embeddings server down, a model gone): the job says why,
            # and the index in force, untouched, keeps answering.
            log.warning("re-embedding with %s stopped: %s", target, e)
            job.update(message=f"Re-embedding with {target} stopped: {e}")
            return "failed"

    def _switch(
        self,
        *,
        job: IngestJob,
        stop: Callable[[], bool],
        target: str,
        preloaded: Embedder | None,
    ) -> str:
        job.update(current=target, message=f"Loading the embedder {target}…", files_total=1)
        new = preloaded or self._load(target)
        meta = self._store.meta
        if meta is not None and (meta.embedder_id, meta.dimension) == (
            new.info.id,
            new.info.dimension,
        ):
            self._on_swap(new)
            return "done"
        if meta is None:  # no index yet: nothing to re-embed
            with self._store.exclusive():  # unless the engine's start makes one meanwhile
                if not self._store.ensure_embedder(
                    embedder_id=new.info.id, dimension=new.info.dimension
                ):
                    self._on_swap(new)
                    return "done"
            meta = self._store.meta
            assert meta is not None  # made by the engine's start: re-embedded below
        log.info("re-embedding the collection with %s (was %s)", target, meta.embedder_id)
        started = time.monotonic()
        first: int | None = None
        steps = self._store.reembed(
            embedder_id=new.info.id,
            dimension=new.info.dimension,
            embed=lambda texts: new.embed(texts, background=True),
            batch=self._batch,
            on_swap=lambda: self._on_swap(new),
        )
        try:
            for done, total in steps:
                first = done if first is None else first
                rate = (done - first) / max(1e-6, time.monotonic() - started)
                job.update(
                    message=(
                        f"Re-embedding with {target}: {done:,} of {total:,} chunks "
                        "(questions use the current index until it is done)"
                    ),
                    chunks_found=total,
                    chunks_embedded=done,
                    bytes_total=max(1, total),
                    bytes_done=done,
                    chunks_per_s=round(rate, 2),
                    eta_s=(total - done) / rate if rate > 0 else None,
                )
                if done < total and stop():
                    return "cancelled"
        finally:
            steps.close()  # cut short: the old index stays in force
        job.update(files_done=1, chunks_added=job.snapshot().chunks_found)
        return "done"
