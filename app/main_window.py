"""The main window: library on the left, chat on the right, status and model below.

The window owns no engine logic: it wires the panes' `sig_*` signals to the
EngineBridge and the bridge's signals back to the panes. Nothing here calls the
engine client, so nothing here can freeze the window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent, QGuiApplication
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
from app.library.library_actions import LibraryActions
from app.library.library_pane import (
    FolderChooser,
    LibraryPane,
    NameAsker,
    ask_collection_dialog,
    choose_folder_dialog,
)
from app.models_pane.embed_server_dialog import attach_embed_server_dialog
from app.models_pane.model_actions import ModelActions
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
from app.models_pane.model_server import ServerFallbackBar, attach_server_dialog
from app.models_pane.models_dialog import attach_models_dialog
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
from app.window_menus import WindowActions, build_menus
from engine.paths import resolve_paths
from engine.wire import EngineStatus, SourceView

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
        self.library_actions = LibraryActions(
            library=self.library,
            bridge=self.bridge,
            banner=self.banner,
            say=self.engine_label.setText,
            parent=self,
        )
        self.model_actions = ModelActions(
            chooser=self.model_chooser,
            bridge=self.bridge,
            chat=self.chat,
            banner=self.banner,
            busy=self.busy,
            say=self.engine_label.setText,
            parent=self,
        )
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
        self.embed_server_dialog = attach_embed_server_dialog(
            bridge=self.bridge,
            open_signal=self.model_chooser.sig_embed_server_requested,
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
        actions = build_menus(
            window=self,
            library=self.library,
            model_chooser=self.model_chooser,
            set_keep_running=lambda checked: self.bridge.set_keep_running(keep=checked),
            show_batch=self.show_batch,
            show_each=self.show_each,
            show_hardware=self.show_hardware,
            show_activity=self.show_activity,
        )
        self.menu_actions: WindowActions = actions
        self.add_folder_action = actions.add_folder
        self.add_samples_action = actions.add_samples
        self.new_collection_action = actions.new_collection
        self.keep_running_action = actions.keep_running
        self.batch_action = actions.batch
        self.each_action = actions.each
        self.hardware_action = actions.hardware
        self.activity_action = actions.activity

    def _wire(self) -> None:
        b = self.bridge
        b.sig_connecting.connect(self._on_connecting)
        b.sig_connected.connect(self._on_connected)
        b.sig_connect_failed.connect(self._on_connect_failed)
        b.sig_status.connect(self._on_status)
        self._profiling_poll.timeout.connect(b.refresh_status)
        self.profiling_banner.sig_skip.connect(b.skip_profiling)
        self.library.folders_box.sig_ask_each.connect(lambda scope: self.show_each(scope or None))
        b.sig_error.connect(self._on_error)
        b.sig_engine_lost.connect(self._on_engine_lost)
        b.sig_engine_restarted.connect(self._on_engine_restarted)
        b.sig_keep_running.connect(self.keep_running_action.setChecked)
        self.hardware_panel.sig_refresh.connect(self.show_hardware)

        self.chat.sig_ask.connect(self._ask)
        self.chat.sig_open_source.connect(self._open_source)
        self.chat.sig_error.connect(self.banner.show_error)
        self.banner.sig_retry.connect(self.bridge.connect_engine)
        # "… failed" stays in the status bar while its banner does, then the state returns.
        self.banner.sig_dismissed.connect(self.bridge.refresh_status)

    def _set_ready(self, ready: bool) -> None:
        self.library.set_ready(ready)
        self.chat.set_ready(ready)
        self.model_chooser.setEnabled(ready)
        for action in self.menu_actions.needing_the_engine():
            action.setEnabled(ready)

    def _ask(self, stream: AnswerStream) -> None:
        """The chat pane made the stream (and stops it); the bridge feeds it."""
        stream.sig_failed.connect(
            lambda message: self.statusBar().showMessage(f"The answer failed: {message}", 10_000)
        )
        self.bridge.ask(stream=stream)

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
            self.show_welcome(in_use=status.model)

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
        # A chosen model still loading: asked again until it answers (or fails).
        loading = status.answer_mode == "extractive" and bool(status.model)
        if activity or profiling or (loading and not status.model_error):
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

    def show_welcome(self, *, in_use: str | None = None) -> WelcomeDialog:
        """The welcome, window-modal and not blocking: its choices apply when it closes.
        `in_use`: the model the engine already answers with."""
        self.welcome = WelcomeDialog(
            choose_model_folder=self._choose_model_folder,
            choose_model_file=self._choose_model_file,
            add_samples=not self.adding_on_start,
            opening=self.opening,
            in_use=in_use,
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
            self.model_actions.set_model(choice.model)
        elif choice.model_off:
            self.model_actions.set_model(None)
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
