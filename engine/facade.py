"""The engine's named sub-APIs: what the HTTP server (engine/server.py, engine/api/)
may call besides `Engine`'s own methods, so that it never reaches into the engine's
parts (the store, the ingestion queue, the folder registry, the profiler).

The split follows vLLM v1's engine core and its client: the core owns the parts and
their threads; the layer in front of it calls a small set of named operations and gets
wire values back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.ingest.jobs import IngestJob, IngestQueue
from engine.wire import (
    FINAL_STATES,
    HardwareInfo,
    IngestProgress,
    IngestQueueState,
    ProfilingStatus,
    WatchedFolder,
)

if TYPE_CHECKING:
    from engine.core import Engine
    from engine.folders import FolderRegistry


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

    def cancel(self, *, job_id: str) -> IngestJob | None:
        return self._queue.cancel(job_id=job_id)

    def cancel_all(self) -> None:
        """Each job stops after the file in hand (the engine is shutting down)."""
        for job in self.jobs():
            self._queue.cancel(job_id=job.id)


class LibraryAPI:
    """The folders a person added: the grant for everything the API may read."""

    def __init__(self, *, folders: FolderRegistry) -> None:
        self._folders = folders

    def folders(self) -> list[WatchedFolder]:
        return self._folders.list()

    def folder_of(self, *, path: str) -> WatchedFolder | None:
        """The watched folder `path` lies in (`..` and symlinks resolved), if any."""
        return self._folders.containing(path=path)


class SystemAPI:
    """The machine, the placement in force and active profiling."""

    def __init__(self, *, engine: Engine) -> None:
        self._engine = engine

    def hardware(self) -> HardwareInfo:
        """GET /v1/hardware: the profile, the placement in force of the model in use
        (else the plan for the chosen one), the stored fit. The first call on a machine
        measures disk bandwidth (seconds)."""
        from engine.planner.report import hardware_info

        engine = self._engine
        _, chunks = engine.store.counts()
        meta = engine.store.meta
        return hardware_info(
            paths=engine.paths,
            model=engine.settings.model,
            chunks=chunks,
            vector_dim=meta.dimension if meta else None,
            in_force=engine.placement(),
        )

    def skip_profiling(self) -> ProfilingStatus:
        return self._engine.profiler.skip()
