"""The engine's named sub-APIs: what the HTTP server (engine/service/server.py, engine/service/api/)
may call besides `Engine`'s own methods, so that it never reaches into the engine's
parts (the store, the ingestion queue, the folder registry, the profiler).

The split follows vLLM v1's engine core and its client: the core owns the parts and
their threads; the layer in front of it calls a small set of named operations and gets
wire values back.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.rag.answer.semantic_scale import SemanticScale
from engine.rag.each.run import Submitter
from engine.rag.each.session import ask_each
from engine.rag.each.whole import fit_for
from engine.rag.ingest.jobs import IngestJob, IngestQueue
from engine.wire import (
    FINAL_STATES,
    EngineSettings,
    IngestProgress,
    IngestQueueState,
    ModelServerInfo,
    ProfilingStatus,
    WatchedFolder,
)
from engine.wire_each import EachEvent, EachRequest
from engine.wire_hardware import HardwareInfo, IndexUsage

if TYPE_CHECKING:
    from engine.paths import Paths
    from engine.rag.answer.in_use import ModelInUse
    from engine.rag.each.memo import EachMemo
    from engine.rag.store.lance_store import LanceStore
    from engine.runtime.planner.placement import Placement
    from engine.service.folders import FolderRegistry
    from engine.service.profiling.auto_profile import AutoProfiler


class IngestionAPI:
    """Ingestion jobs: follow, cancel, pause and resume them."""

    def __init__(self, *, queue: IngestQueue) -> None:
        self._queue = queue

    def state(self) -> IngestQueueState:
        return self._queue.state()

    def job(self, *, job_id: str) -> IngestJob | None:
        return self._queue.job(job_id=job_id)

    def jobs(self) -> list[IngestJob]:
        return self._queue.jobs()

    def unfinished(self) -> list[IngestProgress]:
        """Jobs queued or running, as the wire shows them."""
        return [p for p in (job.snapshot() for job in self.jobs()) if p.state not in FINAL_STATES]

    def cancel(self, *, job_id: str, reason: str | None = None) -> IngestJob | None:
        """`reason` becomes the job's message, so that whoever follows it says why."""
        job = self._queue.job(job_id=job_id)
        if job is not None and reason and job.snapshot().state not in FINAL_STATES:
            job.update(message=reason)
        return self._queue.cancel(job_id=job_id)

    def cancel_all(self) -> None:
        """Each job stops after the file in hand (the engine is shutting down)."""
        for job in self.jobs():
            self.cancel(
                job_id=job.id, reason="the engine is stopping; the job resumes at its next start"
            )


class LibraryAPI:
    """The folders a person added: the grant for everything the API may read."""

    def __init__(self, *, folders: FolderRegistry) -> None:
        self._folders = folders

    def folders(self) -> list[WatchedFolder]:
        return self._folders.list()

    def folder_of(self, *, path: str | Path) -> WatchedFolder | None:
        """The watched folder `path` lies in (`..` and symlinks resolved), if any: a
        `str` as the store keeps paths, a `Path` as the file system names it."""
        return self._folders.containing(path=path)


def server_note(server: ModelServerInfo) -> str:
    """The hardware view's words for generation on a model server."""
    latency = (
        f"; first token in {server.first_token_ms:.0f} ms (median, measured here)"
        if server.first_token_ms is not None
        else "; no answer measured yet"
    )
    return (
        f"Answers are written by {server.model} on the model server {server.url}{latency}. "
        "Nothing of the model is placed on this machine: the plan holds the index alone."
    )


class SystemAPI:
    """The machine, the placement in force and active profiling."""

    def __init__(
        self,
        *,
        paths: Paths,
        store: LanceStore,
        profiler: AutoProfiler,
        chosen_model: Callable[[], str | None],
        placement: Callable[[], Placement | None],
        server: Callable[[], ModelServerInfo | None] = lambda: None,
    ) -> None:
        """`chosen_model()`: the model in the settings; `placement()`: the placement in
        force of the model in use (its owner's); `server()`: the model server that
        generates instead, if one does (nothing of its model is placed here)."""
        self._paths = paths
        self._store = store
        self._profiler = profiler
        self._chosen_model = chosen_model
        self._placement = placement
        self._server = server

    def hardware(self) -> HardwareInfo:
        """GET /v1/hardware: the profile, the placement in force of the model in use
        (else the plan for the chosen one), the stored fit. The first call on a machine
        measures disk bandwidth (seconds)."""
        from engine.runtime.planner.report import folder_bytes, hardware_info

        _, chunks = self._store.counts()
        meta = self._store.meta
        index = IndexUsage(
            chunks=chunks,
            disk_bytes=folder_bytes(self._store.folder),
            resident_bytes=self._store.resident_bytes(),
        )
        server = self._server()
        info = hardware_info(
            paths=self._paths,
            model=None if server is not None else self._chosen_model(),
            chunks=chunks,
            vector_dim=meta.dimension if meta else None,
            in_force=None if server is not None else self._placement(),
            index=index,
        )
        if server is None:
            return info
        return dataclasses.replace(info, note=server_note(server))

    def skip_profiling(self) -> ProfilingStatus:
        return self._profiler.skip()


class EachAPI:
    """One question of every document of a collection, folder or file (engine/rag/each/),
    asked through the engine's pipelines beside everyone else's questions."""

    def __init__(
        self,
        *,
        store: LanceStore,
        folders: FolderRegistry,
        memo: EachMemo,
        model: Callable[[], ModelInUse | None],
        settings: Callable[[], EngineSettings],
        pipeline: Callable[[], Submitter],
        unfinished: Callable[[], list[IngestProgress]],
        embed: Callable[[list[str]], np.ndarray],
        sentence_scale: Callable[[], SemanticScale],
    ) -> None:
        """`model()`: the language model in use; `settings()`: the settings in force;
        `pipeline()`: the pipelines to submit to (built on first use); `unfinished()`:
        ingestion jobs still running (a row says its document may change); `embed`: an
        answer's sentences, as the chat's answers embed them, and `sentence_scale()` the
        scale of their cosines now."""
        self._store = store
        self._folders = folders
        self._memo = memo  # re-runs reuse rows
        self._model = model
        self._settings = settings
        self._pipeline = pipeline
        self._unfinished = unfinished
        self._embed = embed
        self._sentence_scale = sentence_scale

    def stream(
        self, *, request: EachRequest, cancel: threading.Event | None = None
    ) -> Iterator[EachEvent]:
        """A row per document as it finishes (engine/rag/each/run.py). Raises ScopeError
        before the stream begins."""
        model = self._model()
        whole = None
        if model is not None and request.whole_document:
            whole = fit_for(
                chunks=self._store.chunks,
                tokenizer=model.answerer.tokenizer,
                context_tokens=model.answerer.context_length,
                answer_tokens=request.max_new_tokens,
            )
        settings = self._settings()
        return ask_each(
            request=request,
            folders=self._folders.list(),
            documents=self._store.list_documents(),
            pipeline=self._pipeline,
            model=settings.model if model is not None else None,
            embedder=settings.embedder,
            reranker=settings.reranker,
            memo=self._memo,
            whole=whole,
            cancel=cancel,
            unfinished=self._unfinished,
            embed=self._embed,
            scale=self._sentence_scale(),
        )
