"""The library pane's requests carried out through the engine bridge, and the
bridge's library news shown in the pane: adding files or a folder, removing a
folder, pausing, resuming and cancelling jobs, and a job's progress as it runs,
the library refreshed as its files land. Nothing here calls the engine client, so
nothing here can freeze the window."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from app.bridge_plumbing import EngineOp, describe_error
from app.engine_bridge import EngineBridge
from app.error_banner import ErrorBanner
from app.library.library_pane import LibraryPane
from engine.wire import IngestProgress, WatchedFolder

# While a job runs, its documents show as they land, but the engine is asked at
# most this often however many files finish in between.
REFRESH_MS = 1500


class LibraryActions(QObject):
    def __init__(
        self,
        *,
        library: LibraryPane,
        bridge: EngineBridge,
        banner: ErrorBanner,
        say: Callable[[str], None],
        parent: QObject | None = None,
    ) -> None:
        """`say`: a line in the window's status bar."""
        super().__init__(parent)
        self._library = library
        self._bridge = bridge
        self._banner = banner
        self._say = say
        self._files_done: dict[str, int] = {}  # per job: refresh the library as files land
        self._refresh = QTimer(self)
        self._refresh.setSingleShot(True)
        self._refresh.setInterval(REFRESH_MS)
        self._refresh.timeout.connect(bridge.refresh_library)

        bridge.sig_documents.connect(library.set_documents)
        bridge.sig_file_errors.connect(library.set_file_errors)
        bridge.sig_ingest_progress.connect(self.show_progress)
        bridge.sig_ingest_finished.connect(self._finished)
        bridge.sig_ingest_paused.connect(library.set_paused)
        bridge.sig_ingest_not_started.connect(library.job_not_started)
        bridge.sig_folders.connect(library.set_folders)
        library.sig_add_paths.connect(self.add_paths)
        library.sig_add_folder.connect(self._add_folder)
        library.sig_reindex.connect(lambda path: self.add_paths([path]))
        library.sig_remove_folder.connect(self._remove_folder)
        library.sig_pause.connect(bridge.pause_ingest)
        library.sig_resume.connect(bridge.resume_ingest)
        library.sig_cancel.connect(self._cancel)

    def add_paths(self, paths: list[str]) -> None:
        self._library.start_job()
        self._bridge.ingest(paths=paths)

    def _add_folder(self, path: str, collection: str) -> None:
        self._library.start_job()
        self._bridge.add_folder(path=path, collection=collection)

    def _remove_folder(self, path: str) -> None:
        """Stop watching a folder: its chunks leave the index; its files are untouched."""

        def removed(folder: WatchedFolder) -> None:
            self._say(f"Stopped watching {folder.path}; its files were not touched")
            self._library.forget_folder(folder.path)
            self._bridge.refresh_library()
            self._bridge.refresh_status()

        def failed(error: BaseException) -> None:
            self._library.folder_removal_failed(path)
            self._banner.show_error(
                f"Could not remove the folder {path}: {describe_error(error=error)}"
            )

        self._bridge.run(
            EngineOp(
                what="Removing the folder",
                call=lambda c: c.remove_folder(path=path),
                success=removed,
                failure=failed,
            )
        )

    def _cancel(self, job_id: str) -> None:
        """Ask the engine to stop a job; the job's own stream reports the end."""

        def failed(error: BaseException) -> None:
            self._library.cancel_failed()
            self._banner.show_error(
                f"Could not cancel adding documents: {describe_error(error=error)}"
            )

        self._bridge.run(
            EngineOp(
                what="Cancelling",
                call=lambda c: c.cancel_ingest(job_id=job_id),
                success=self.show_progress,
                failure=failed,
            )
        )

    def show_progress(self, progress: IngestProgress) -> None:
        self._library.show_progress(progress)
        if progress.files_done > self._files_done.get(progress.job_id, 0) and (
            progress.state == "running"
        ):
            self._files_done[progress.job_id] = progress.files_done
            if not self._refresh.isActive():
                self._refresh.start()

    def _finished(self, progress: IngestProgress) -> None:
        self._refresh.stop()  # the bridge refreshes once the job has ended
        self._library.finish_job(progress)
        if progress.state == "failed":
            self._banner.show_error(
                f"Adding documents failed: {progress.message or 'the engine gave no reason'}"
            )
