"""The main window: library on the left, chat on the right, status and model below.

The window owns no engine logic: it wires the panes' `sig_*` signals to the
EngineBridge and the bridge's signals back to the panes. Nothing here calls the
engine client, so nothing here can freeze the window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QMainWindow,
    QProgressBar,
    QScrollArea,
    QSplitter,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.batch.batch_dialog import BatchDialog
from app.bridge_plumbing import EngineOp, describe_error
from app.chat.answer_stream import AnswerStream
from app.chat.chat_pane import ChatPane
from app.each.each_dialog import EachDialog
from app.engine_bridge import ClientFactory, EngineBridge, connect_default
from app.error_banner import ErrorBanner
from app.hardware.hardware_panel import HardwarePanel
from app.hardware.profiling_banner import ProfilingBanner
from app.library.folders_box import Confirm, confirm_dialog
from app.library.library_pane import (
    FolderChooser,
    LibraryPane,
    NameAsker,
    ask_collection_dialog,
    choose_folder_dialog,
)
from app.models_pane.model_chooser import (
    ModelChooser,
    attach_multilingual_offer,
    attach_ranking,
    choose_embedder_dialog,
    choose_embedder_gguf_dialog,
    choose_gguf_dialog,
    choose_model_dialog,
    mode_text,
)
from app.models_pane.models_dialog import attach_models_dialog
from app.models_pane.server_dialog import ServerFallbackBar, attach_server_dialog
from app.ui_state import (
    last_conversation,
    mark_welcome_seen,
    remember_conversation,
    restore_window,
    save_window,
    welcome_seen,
)
from app.viewer.source_viewer import SourceViewer
from app.welcome.welcome_dialog import WelcomeDialog
from engine.paths import resolve_paths
from engine.wire import EngineSettings, EngineStatus, IngestProgress, SourceView, WatchedFolder

if TYPE_CHECKING:
    from app.hardware.activity_panel import ActivityPanel


# The answer column's floor at any window size: below it a sentence breaks every few words.
ANSWER_MIN_WIDTH = 340
# The library's floor; its content wraps or elides, never deciding the split (dragging does).
LIBRARY_MIN_WIDTH = 240
# At first start the library takes this share of the width (then the person's own).
LIBRARY_SHARE = 0.3


class MainWindow(QMainWindow):
    def __init__(
        self,
        *,
        client_factory: ClientFactory = connect_default,
        choose_folder: FolderChooser = choose_folder_dialog,
        confirm_remove: Confirm = confirm_dialog,
        ask_collection: NameAsker = ask_collection_dialog,
        choose_model_folder: FolderChooser = choose_model_dialog,
        choose_model_file: FolderChooser = choose_gguf_dialog,
        choose_embedder_folder: FolderChooser = choose_embedder_dialog,
        choose_embedder_file: FolderChooser = choose_embedder_gguf_dialog,
        connect: bool = True,
        show_welcome: bool = True,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._show_welcome = show_welcome
        self._choose_model_folder = choose_model_folder
        self._choose_model_file = choose_model_file
        self.welcome: WelcomeDialog | None = None
        # What `ragdoll open` adds once connected: the welcome then offers no samples.
        self.opening: list[str] = []
        self.adding_on_start = False
        self.batch_dialog: BatchDialog | None = None
        self.each_dialog: EachDialog | None = None
        self.setWindowTitle("RAGDoll")
        self.resize(1200, 800)
        self._files_done: dict[str, int] = {}  # per job: refresh the library as files land
        # While a job runs, show its documents as they land, but ask the engine
        # at most every 1.5 s however many files finish in between.
        self._library_refresh = QTimer(self)
        self._library_refresh.setSingleShot(True)
        self._library_refresh.setInterval(1500)

        self.bridge = EngineBridge(client_factory=client_factory, parent=self)
        self.library = LibraryPane(
            choose_folder=choose_folder, confirm=confirm_remove, ask_collection=ask_collection
        )
        self.chat = ChatPane()
        self.viewer = SourceViewer(parent=self)
        self.hardware_panel = HardwarePanel(parent=self)
        self.banner = ErrorBanner()
        self.server_fallback = ServerFallbackBar()  # an answer from the model server failed
        # Built on first use: QtCharts takes a few hundred ms to load.
        self.activity_panel: ActivityPanel | None = None
        self.profiling_banner = ProfilingBanner()
        # One status poll, off the GUI thread: every 2 s while the engine times the
        # machine (the banner's progress), every second while Activity is open.
        self._profiling_poll = QTimer(self)
        self._profiling_poll.setSingleShot(True)
        self._profiling_poll.setInterval(2000)
        self.model_chooser = ModelChooser(
            choose_folder=choose_model_folder,
            choose_file=choose_model_file,
            choose_embedder=choose_embedder_folder,
            choose_embedder_file=choose_embedder_file,
        )

        self._build_layout()
        self._build_status_bar()
        self._build_menus()
        self._wire()
        self.models_dialog = attach_models_dialog(
            chooser=self.model_chooser,
            bridge=self.bridge,
            choose_folder=choose_model_folder,
            parent=self,
        )
        attach_ranking(chooser=self.model_chooser, bridge=self.bridge)
        self.server_dialog = attach_server_dialog(
            bridge=self.bridge,
            open_signal=self.model_chooser.sig_server_requested,
            answer_failed=self.chat.sig_answer_failed,
            bar=self.server_fallback,
            parent=self,
        )
        attach_multilingual_offer(chooser=self.model_chooser, bridge=self.bridge)
        self._set_ready(False)
        if not restore_window(window=self, splitters=self._splitters()):
            self._fit_to_screen()
        self.chat.reopen_when_loaded(last_conversation())
        if connect:
            # After the first paint: the window must appear before the engine does.
            QTimer.singleShot(0, self.bridge.connect_engine)

    def _build_layout(self) -> None:
        library_box = QWidget()
        library_box.setObjectName("libraryPane")
        lib_layout = QVBoxLayout(library_box)
        lib_layout.setContentsMargins(10, 12, 8, 12)
        lib_layout.addWidget(self.library)
        # On a short screen the library scrolls rather than push the window past
        # it. Explicit minimum widths: QSplitter then ignores the panes' size
        # hints, which grow with a long message or path and would move the split.
        library_scroll = QScrollArea()
        library_scroll.setObjectName("libraryScroll")
        library_scroll.setWidget(library_box)
        library_scroll.setWidgetResizable(True)
        library_scroll.setFrameShape(QFrame.Shape.NoFrame)
        library_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # The floor is the library's own; its scroll bar comes on top of it.
        bar = library_scroll.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        library_scroll.setMinimumWidth(LIBRARY_MIN_WIDTH + bar)

        self.chat.split.setMinimumWidth(ANSWER_MIN_WIDTH)
        chat_box = QWidget()
        chat_box.setObjectName("chatPane")
        chat_layout = QVBoxLayout(chat_box)
        chat_layout.setContentsMargins(8, 12, 10, 12)
        chat_layout.addWidget(self.chat)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(library_scroll)
        self.splitter.addWidget(chat_box)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        share = round(self.width() * LIBRARY_SHARE)
        self.splitter.setSizes([share, self.width() - share])

        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.banner)
        layout.addWidget(self.server_fallback)
        layout.addWidget(self.profiling_banner)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.engine_label = QLabel("")
        self.engine_label.setAccessibleName("Engine state")
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(90)
        self.busy.setMaximumHeight(12)
        self.busy.setTextVisible(False)
        self.busy.setAccessibleName("Working")
        self.busy.hide()
        self.mode_label = QLabel("")
        self.mode_label.setAccessibleName("Answer mode")
        bar.addWidget(self.busy)
        bar.addWidget(self.engine_label, 1)
        bar.addPermanentWidget(self.mode_label)
        bar.addPermanentWidget(self.model_chooser)

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.add_folder_action = QAction("Add &folder…", self)
        self.add_folder_action.setShortcut(QKeySequence.StandardKey.Open)
        self.add_folder_action.triggered.connect(self.library.choose_and_add_folder)
        self.add_samples_action = QAction("Add the &sample collection", self)
        self.add_samples_action.triggered.connect(self.library.add_sample_collection)
        self.new_collection_action = QAction("New &collection…", self)
        self.new_collection_action.setToolTip("Name a collection, then choose its first folder")
        self.new_collection_action.triggered.connect(self.library.new_collection)
        self.keep_running_action = QAction("&Keep the engine running after quitting", self)
        self.keep_running_action.setCheckable(True)
        self.keep_running_action.setToolTip(
            "Leave the engine running when this window closes, so that it keeps "
            "watching your folders and serving other programs"
        )
        self.keep_running_action.triggered.connect(
            lambda checked: self.bridge.set_keep_running(keep=checked)
        )
        self.batch_action = QAction("&Batch questions…", self)
        self.batch_action.setShortcut(QKeySequence("Ctrl+Shift+B"))
        self.batch_action.setToolTip("Answer a list of questions together, as a table with sources")
        self.batch_action.triggered.connect(self.show_batch)
        self.each_action = QAction("Ask &each document…", self)
        self.each_action.setShortcut(QKeySequence("Ctrl+Shift+E"))
        self.each_action.setToolTip(
            "One question of every document of a collection or folder, as a table"
        )
        self.each_action.triggered.connect(lambda: self.show_each())
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(self.add_folder_action)
        file_menu.addAction(self.add_samples_action)
        file_menu.addAction(self.batch_action)
        file_menu.addAction(self.each_action)
        file_menu.addAction(self.new_collection_action)
        file_menu.addSeparator()
        file_menu.addAction(self.keep_running_action)
        file_menu.addSeparator()
        file_menu.addAction(quit_action)

        model_menu = self.menuBar().addMenu("&Model")
        model_menu.addAction(self.model_chooser.models_action)
        model_menu.addAction(self.model_chooser.choose_action)
        model_menu.addAction(self.model_chooser.choose_gguf_action)
        model_menu.addAction(self.model_chooser.server_action)
        model_menu.addAction(self.model_chooser.extractive_action)
        for action in self.model_chooser.ranking_actions():
            model_menu.addAction(action)

        hardware_menu = self.menuBar().addMenu("&Hardware")
        self.hardware_action = QAction("Show &hardware and placement…", self)
        self.hardware_action.triggered.connect(self.show_hardware)
        hardware_menu.addAction(self.hardware_action)
        self.activity_action = QAction("Show &activity: queues, batches, latency…", self)
        self.activity_action.triggered.connect(self.show_activity)
        hardware_menu.addAction(self.activity_action)

    def _wire(self) -> None:
        b = self.bridge
        b.sig_connecting.connect(self._on_connecting)
        b.sig_connected.connect(self._on_connected)
        b.sig_connect_failed.connect(self._on_connect_failed)
        b.sig_status.connect(self._on_status)
        self._profiling_poll.timeout.connect(b.refresh_status)
        self.profiling_banner.sig_skip.connect(b.skip_profiling)
        self.library.folders_box.sig_ask_each.connect(lambda scope: self.show_each(scope or None))
        b.sig_documents.connect(self.library.set_documents)
        b.sig_file_errors.connect(self.library.set_file_errors)
        b.sig_ingest_progress.connect(self._on_ingest_progress)
        b.sig_ingest_finished.connect(self._on_ingest_finished)
        b.sig_ingest_paused.connect(self.library.set_paused)
        b.sig_ingest_not_started.connect(self.library.job_not_started)
        b.sig_folders.connect(self.library.set_folders)
        b.sig_model_busy.connect(self._on_model_busy)
        b.sig_model_changed.connect(self._on_model_changed)
        b.sig_model_failed.connect(self._on_model_failed)
        b.sig_error.connect(self._on_error)
        b.sig_engine_lost.connect(self._on_engine_lost)
        b.sig_engine_restarted.connect(self._on_engine_restarted)
        b.sig_keep_running.connect(self.keep_running_action.setChecked)
        self.hardware_panel.sig_refresh.connect(self.show_hardware)

        self.library.sig_add_paths.connect(self._add_paths)
        self.library.sig_add_folder.connect(self._add_folder)
        self.library.sig_reindex.connect(lambda path: self._add_paths([path]))
        self.library.sig_remove_folder.connect(self._remove_folder)
        self.library.sig_pause.connect(self.bridge.pause_ingest)
        self.library.sig_resume.connect(self.bridge.resume_ingest)
        self.library.sig_cancel.connect(self._cancel_ingest)
        self.chat.sig_ask.connect(self._ask)
        self.chat.sig_open_source.connect(self._open_source)
        self.chat.sig_error.connect(self.banner.show_error)
        self.model_chooser.sig_model_requested.connect(self._set_model)
        self.model_chooser.sig_embedder_requested.connect(self._set_embedder)
        self.banner.sig_retry.connect(self.bridge.connect_engine)
        # "… failed" stays in the status bar while its banner does, then the state returns.
        self.banner.sig_dismissed.connect(self.bridge.refresh_status)
        self._library_refresh.timeout.connect(self.bridge.refresh_library)

    def _set_ready(self, ready: bool) -> None:
        self.library.set_ready(ready)
        self.chat.set_ready(ready)
        self.model_chooser.setEnabled(ready)
        for action in (
            self.add_folder_action,
            self.add_samples_action,
            self.new_collection_action,
            self.keep_running_action,
        ):
            action.setEnabled(ready)

    def _add_paths(self, paths: list[str]) -> None:
        self.library.start_job()
        self.bridge.ingest(paths=paths)

    def _add_folder(self, path: str, collection: str) -> None:
        self.library.start_job()
        self.bridge.add_folder(path=path, collection=collection)

    def _ask(self, stream: AnswerStream) -> None:
        """The chat pane made the stream (and stops it); the bridge feeds it."""
        stream.sig_failed.connect(
            lambda message: self.statusBar().showMessage(f"The answer failed: {message}", 10_000)
        )
        self.bridge.ask(stream=stream)

    def _remove_folder(self, path: str) -> None:
        """Stop watching a folder: its chunks leave the index; its files are untouched."""

        def removed(folder: WatchedFolder) -> None:
            self.engine_label.setText(f"Stopped watching {folder.path}; its files were not touched")
            self.library.forget_folder(folder.path)
            self.bridge.refresh_library()
            self.bridge.refresh_status()

        def failed(error: BaseException) -> None:
            self.library.folder_removal_failed(path)
            self.banner.show_error(
                f"Could not remove the folder {path}: {describe_error(error=error)}"
            )

        self.bridge.run(
            EngineOp(
                what="Removing the folder",
                call=lambda c: c.remove_folder(path=path),
                success=removed,
                failure=failed,
            )
        )

    def _cancel_ingest(self, job_id: str) -> None:
        """Ask the engine to stop a job; the job's own stream reports the end."""

        def failed(error: BaseException) -> None:
            self.library.cancel_failed()
            self.banner.show_error(
                f"Could not cancel adding documents: {describe_error(error=error)}"
            )

        self.bridge.run(
            EngineOp(
                what="Cancelling",
                call=lambda c: c.cancel_ingest(job_id=job_id),
                success=self._on_ingest_progress,
                failure=failed,
            )
        )

    def show_hardware(self) -> None:
        self.hardware_panel.show_loading()
        self.hardware_panel.show()
        self.hardware_panel.raise_()
        if not self.bridge.connected:
            self.hardware_panel.show_error("the engine is not connected yet")
            return
        # Profile, placement and fit; the engine's first answer measures the disk (seconds).
        self.bridge.run(
            EngineOp(
                what="Reading the hardware profile",
                call=lambda c: c.hardware(),
                success=self.hardware_panel.show_info,
                failure=lambda e: self.hardware_panel.show_error(describe_error(error=e)),
            )
        )

    def show_batch(self) -> BatchDialog:
        """The batch questions dialog; one per window, so a run survives closing it."""
        if self.batch_dialog is None:
            self.batch_dialog = BatchDialog(asker=self.bridge, parent=self)
            self.batch_dialog.sig_open_source.connect(self._open_source)
        self.batch_dialog.show()
        self.batch_dialog.raise_()
        self.batch_dialog.activateWindow()
        return self.batch_dialog

    def show_each(self, scope: str | None = None) -> EachDialog:
        """The ask-each-document dialog over the library's collections and folders
        (`scope` chosen: a collection's name or a folder's path); one per window."""
        if self.each_dialog is None:
            self.each_dialog = EachDialog(asker=self.bridge, parent=self)
            self.each_dialog.sig_open_source.connect(self._open_source)
        box = self.library.folders_box
        folders = box.model.folders()
        self.each_dialog.set_scopes(
            collections=sorted({f.collection for f in folders}, key=str.lower),
            folders=[f.path for f in folders],
            current=scope or box.selected_folder() or box.current_collection(),
        )
        self.each_dialog.show()
        self.each_dialog.raise_()
        self.each_dialog.activateWindow()
        return self.each_dialog

    def show_activity(self) -> ActivityPanel:
        if self.activity_panel is None:
            from app.hardware.activity_panel import ActivityPanel

            self.activity_panel = ActivityPanel(parent=self)
            self.activity_panel.sig_visible.connect(self._on_activity_visible)
        self.activity_panel.show()
        self.activity_panel.raise_()
        return self.activity_panel

    def _on_activity_visible(self, visible: bool) -> None:
        if visible and self.bridge.connected:
            self.bridge.refresh_status()  # the next status restarts the poll
        elif not visible and not self.profiling_banner.isVisible():
            self._profiling_poll.stop()

    def _open_source(self, chunk_id: str) -> None:
        self.engine_label.setText("Opening the source…")

        def opened(source: SourceView) -> None:
            self.viewer.show_source(source)
            # The status line said "Opening the source…": put the engine's state back.
            self.bridge.refresh_status()

        self.bridge.run(
            EngineOp(
                what="Opening the source",
                call=lambda c: c.source(chunk_id=chunk_id),
                success=opened,
            )
        )

    def _set_model(self, model: str | None) -> None:
        self.bridge.set_model(model=model)

    def _set_embedder(self, embedder: str) -> None:
        self.bridge.set_embedder(embedder=embedder)

    def _on_connecting(self) -> None:
        self.engine_label.setText("Starting engine…")
        self.busy.show()

    def _on_connected(self, status: EngineStatus) -> None:
        self.busy.hide()
        self.banner.hide()
        self.engine_label.setText("Engine ready")
        self._set_ready(True)
        self.chat.question.setFocus()
        if self._show_welcome and not welcome_seen():
            self.show_welcome()

    def _on_connect_failed(self, message: str) -> None:
        self.busy.hide()
        self.engine_label.setText("Engine not running")
        log = resolve_paths().engine_log
        self.banner.show_error(
            f"Could not start the engine: {message}\nThe engine's log is at {log}",
            can_retry=True,
        )

    def _on_status(self, status: EngineStatus) -> None:
        self.model_chooser.show_status(status)
        self.profiling_banner.show_status(status.profiling)
        self.hardware_panel.show_profiling(status.profiling)
        activity = self.activity_panel is not None and self.activity_panel.isVisible()
        if activity and self.activity_panel is not None:
            self.activity_panel.show_status(status)
        profiling = status.profiling is not None and status.profiling.state == "running"
        if activity or profiling:
            self._profiling_poll.start(1000 if activity else 2000)
        self.mode_label.setText(
            mode_text(
                mode=status.answer_mode,
                model=status.model,
                model_error=status.model_error,
                server=status.server.url if status.server is not None else None,
            )
        )
        self.mode_label.setToolTip(self.model_chooser.toolTip())
        if not self.busy.isVisible():
            docs = "document" if status.documents == 1 else "documents"
            self.engine_label.setText(
                f"Engine ready · {status.documents} {docs}, {status.chunks} chunks"
            )

    def _on_ingest_progress(self, progress: IngestProgress) -> None:
        self.library.show_progress(progress)
        if progress.files_done > self._files_done.get(progress.job_id, 0) and (
            progress.state == "running"
        ):
            self._files_done[progress.job_id] = progress.files_done
            if not self._library_refresh.isActive():
                self._library_refresh.start()

    def _on_ingest_finished(self, progress: IngestProgress) -> None:
        self._library_refresh.stop()  # the bridge refreshes once the job has ended
        self.library.finish_job(progress)
        if progress.state == "failed":
            self.banner.show_error(
                f"Adding documents failed: {progress.message or 'the engine gave no reason'}"
            )

    def _on_model_busy(self, busy: bool) -> None:
        self.model_chooser.set_busy(busy)
        self.busy.setVisible(busy)
        if busy:
            self.engine_label.setText("Loading the model…")
            self.chat.set_ready(False)
        else:
            self.chat.set_ready(self.bridge.connected)

    def _on_model_changed(self, settings: EngineSettings) -> None:
        self.banner.hide()
        # "auto" holds the weights as stored; a chosen format (int8, int4, bf16, f32) is
        # worth seeing, since it changes memory use and answers.
        weights = "" if settings.model_weights == "auto" else f" ({settings.model_weights})"
        if settings.server_url:
            self.engine_label.setText(
                f"Answers from {settings.server_model} on {settings.server_url} "
                "(passages are sent there)"
            )
            return
        self.engine_label.setText(
            f"Model loaded: {settings.model}{weights}" if settings.model else "Extractive answers"
        )

    def _on_model_failed(self, message: str) -> None:
        self.engine_label.setText("The model could not be loaded")
        self.banner.show_error(f"Could not load the model: {message}")

    def _on_engine_lost(self, message: str) -> None:
        self._set_ready(False)
        self.busy.show()
        self.engine_label.setText("Engine stopped · restarting…")
        self.banner.show_error(message)

    def _on_engine_restarted(self, status: EngineStatus) -> None:
        docs = "document" if status.documents == 1 else "documents"
        self.banner.show_error(
            "The engine stopped unexpectedly and was restarted. Your library is intact "
            f"({status.documents} {docs}); an answer that was being written was lost: "
            "ask again."
        )

    def _on_error(self, what: str, message: str) -> None:
        self.engine_label.setText(f"{what} failed")
        self.banner.show_error(f"{what} failed: {message}")

    def show_welcome(self) -> WelcomeDialog:
        """The welcome, window-modal and not blocking: its choices apply when it closes."""
        self.welcome = WelcomeDialog(
            choose_model_folder=self._choose_model_folder,
            choose_model_file=self._choose_model_file,
            add_samples=not self.adding_on_start,
            opening=self.opening,
            parent=self,
        )
        self.welcome.finished.connect(self._on_welcome_finished)
        self.welcome.open()
        return self.welcome

    def _on_welcome_finished(self, result: int) -> None:
        mark_welcome_seen()
        dialog, self.welcome = self.welcome, None
        if dialog is None or result != WelcomeDialog.DialogCode.Accepted:
            return
        choice = dialog.choice()
        if choice.add_samples:
            self.library.add_sample_collection()
        if choice.model:
            self._set_model(choice.model)
        elif choice.open_models:
            self.model_chooser.models_action.trigger()

    def _fit_to_screen(self) -> None:
        """First start: 1200 × 800, or maximized where the screen is smaller (an
        800 × 600 screen gets the whole of it, not a window hanging off it)."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return
        free = screen.availableGeometry()
        width, height = min(1200, free.width()), min(800, free.height())
        self.resize(width, height)
        share = round(width * LIBRARY_SHARE)
        self.splitter.setSizes([share, width - share])
        if (width, height) != (1200, 800):
            # The frame must fit too: the window manager knows its size, we do not.
            self.setWindowState(Qt.WindowState.WindowMaximized)

    def _splitters(self) -> dict[str, QSplitter]:
        return {
            "main": self.splitter,
            "conversations": self.chat.outer_split,
            "chat": self.chat.split,
        }

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.isVisible():
            save_window(window=self, splitters=self._splitters())
            current = self.chat.current
            remember_conversation(current.id if current.exchanges else "")
        # Hide first so that quitting feels instant while the engine is told to stop.
        self.viewer.close()
        self.hardware_panel.close()
        if self.activity_panel is not None:
            self.activity_panel.close()
        self.hide()
        self.bridge.close()
        event.accept()
