"""What the engine bridge stands on: the client calls it makes (a Protocol, so tests can
hand in a fake), the default connection, error wording, and the one door from worker
threads into Qt."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Protocol

from PySide6.QtCore import QObject, Signal, Slot

from app.qt_compat import emit
from engine.client import EngineClient
from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import resolve_paths
from engine.wire import (
    AnswerEvent,
    DocumentInfo,
    EngineSettings,
    EngineStatus,
    FileError,
    FolderAdded,
    HardwareInfo,
    IngestProgress,
    IngestQueueState,
    ModelDownload,
    Priority,
    ProfilingStatus,
    RecommendedModels,
    ServerSettings,
    SourceView,
    WatchedFolder,
)


class EngineClientLike(Protocol):
    """What the GUI needs of EngineClient; tests pass a fake with these methods."""

    def status(self) -> EngineStatus: ...
    def settings(self) -> EngineSettings: ...
    def set_model(self, *, model: str | None) -> EngineSettings: ...
    def documents(self) -> list[DocumentInfo]: ...
    def errors(self) -> list[FileError]: ...
    def source(self, *, chunk_id: str) -> SourceView: ...
    def hardware(self) -> HardwareInfo: ...
    def ingest(self, *, paths: list[str]) -> IngestProgress: ...
    def ingest_progress(self, *, job_id: str) -> IngestProgress: ...
    def ingest_events(self, *, job_id: str) -> Iterator[IngestProgress]: ...
    def ingest_queue(self) -> IngestQueueState: ...
    def cancel_ingest(self, *, job_id: str) -> IngestProgress: ...
    def pause_ingest(self) -> IngestQueueState: ...
    def resume_ingest(self) -> IngestQueueState: ...
    def ask_stream(
        self, *, question: str, k: int = 5, priority: Priority = "interactive"
    ) -> Iterator[AnswerEvent]: ...
    def shutdown(self) -> None: ...
    def alive(self, *, timeout_s: float = 5.0) -> bool: ...
    def skip_profiling(self) -> ProfilingStatus: ...
    def folders(self) -> list[WatchedFolder]: ...
    def add_folder(
        self, *, path: str, collection: str = "default", ingest: bool = True
    ) -> FolderAdded: ...
    def remove_folder(self, *, path: str) -> WatchedFolder: ...
    def server_settings(self) -> ServerSettings: ...
    def set_server_settings(
        self, *, allowed_origins: list[str] | None = None, keep_engine_running: bool | None = None
    ) -> ServerSettings: ...
    def recommended_models(self) -> RecommendedModels: ...
    def download_model(self, *, repo_id: str) -> ModelDownload: ...
    def download_progress(self, *, download_id: str) -> ModelDownload: ...
    def cancel_download(self, *, download_id: str) -> ModelDownload: ...


ClientFactory = Callable[[], EngineClientLike]


def connect_default() -> EngineClient:
    """Attach to the person's engine, starting one if none runs."""
    return EngineClient.connect(paths=resolve_paths(), start=True)


def describe_error(*, error: BaseException) -> str:
    """One line for a person: what failed, without a traceback."""
    text = str(error).strip() or type(error).__name__
    if isinstance(error, EngineRequestError):
        return text
    if isinstance(error, EngineUnavailableError):
        return f"The engine is not running: {text}"
    return f"{type(error).__name__}: {text}"


class MainThreadInvoker(QObject):
    """Runs closures on the thread this object lives in (the GUI thread).

    A signal emitted from a worker thread to a receiver in the GUI thread is
    queued by Qt, which is the whole trick: workers never touch widgets."""

    sig_call = Signal(object)

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.sig_call.connect(self._run)

    @Slot(object)
    def _run(self, fn: Callable[[], None]) -> None:
        fn()


class Gate:
    """The one door from worker threads into Qt, shut for good on close.

    Without the lock a worker could pass the "still open?" check, the window
    could close and delete the invoker, and the worker would then emit on a
    dead object (a crash, not an exception). Emitting a queued signal only
    posts an event, so holding the lock across it costs nothing."""

    def __init__(self, *, invoker: MainThreadInvoker) -> None:
        self._invoker = invoker
        self._lock = threading.Lock()
        self._closed = threading.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def post(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if not self._closed.is_set():
                emit(self._invoker.sig_call, fn)

    def close(self, *_: object) -> None:
        with self._lock:
            self._closed.set()
