"""The library pane: watched folders, ingestion with its pace and controls,
documents (re-index one) and unreadable files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QListView,
    QMenu,
    QProgressBar,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.chat.answer_render import file_name
from app.library.folders_box import Confirm, FoldersBox, confirm_dialog
from app.library.models import PATH_ROLE, DocumentsModel, ErrorsModel, inside
from app.library.progress_text import counts_line, notes_text, pace_line, work_permille
from app.qt_compat import emit
from app.wrap_label import ElidedGroupBox, WrapLabel
from engine.wire import FINAL_STATES, DocumentInfo, FileError, IngestProgress, WatchedFolder

FolderChooser = Callable[[QWidget], str | None]
# Asks the name of a new collection: (parent) -> the name, or None.
NameAsker = Callable[[QWidget], str | None]

# A job that ended well leaves its box this long, then the box goes; a failed
# one (a full disk) stays until the next job.
FINISHED_BOX_MS = 8_000


def choose_folder_dialog(parent: QWidget) -> str | None:
    folder = QFileDialog.getExistingDirectory(parent, "Add a folder of documents", str(Path.home()))
    return folder or None


def ask_collection_dialog(parent: QWidget) -> str | None:
    name, ok = QInputDialog.getText(
        parent,
        "New collection",
        "Name of the new collection (you choose its first folder next):",
    )
    return name.strip() or None if ok else None


def sample_collection_dir() -> Path:
    """The bundled sample documents; resources/ knows where they are installed."""
    import resources

    finder = getattr(resources, "sample_collection_dir", None)
    if callable(finder):
        return Path(finder())
    return Path(resources.__file__).parent / "samples"


class LibraryPane(QWidget):
    sig_add_paths = Signal(list)  # list[str]
    sig_add_folder = Signal(str, str)  # a folder to watch, the collection it goes into
    sig_remove_folder = Signal(str)  # a watched folder's path
    sig_reindex = Signal(str)  # a document's path
    sig_pause = Signal()
    sig_resume = Signal()
    sig_cancel = Signal(str)  # the job id

    def __init__(
        self,
        *,
        choose_folder: FolderChooser = choose_folder_dialog,
        confirm: Confirm = confirm_dialog,
        ask_collection: NameAsker = ask_collection_dialog,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._choose_folder = choose_folder
        self._ask_collection = ask_collection
        self._paused = False
        self._cancelling = False
        self._focus_next: QPushButton | None = None  # takes the focus once it shows
        self._last: IngestProgress | None = None
        self._job_id: str | None = None  # the job shown
        self._jobs: dict[str, IngestProgress] = {}  # jobs whose end the bridge has not reported
        self._ended: set[str] = set()  # jobs whose end it has (late events are ignored)
        self._awaiting = False  # the window asked for a job; its first event is due
        self._ready = False
        self._job_errors: list[FileError] = []

        title = QLabel("Library")
        title.setObjectName("paneTitle")
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.setAccessibleName("Add a folder of documents")
        self.add_folder_button.clicked.connect(self.choose_and_add_folder)
        # Short words: the two buttons share a row at the library's narrowest.
        self.add_samples_button = QPushButton("Add samples")
        self.add_samples_button.setAccessibleName("Add the sample collection")
        self.add_samples_button.setToolTip("Add the sample collection: a short user guide to try")
        self.add_samples_button.clicked.connect(self.add_sample_collection)

        buttons = QHBoxLayout()
        buttons.setSpacing(6)
        buttons.addWidget(self.add_folder_button)
        buttons.addWidget(self.add_samples_button)
        buttons.addStretch(1)

        # -- watched folders
        self.folders_box = FoldersBox(confirm=confirm)
        self.folders_box.sig_remove_folder.connect(lambda path: emit(self.sig_remove_folder, path))
        self.folders_box.sig_collection_changed.connect(self._collection_changed)
        self.folders_box.sig_new_collection.connect(self.new_collection)

        # -- progress of the current ingestion job
        self.progress_box = ElidedGroupBox("Adding documents")
        self.progress_bar = QProgressBar()
        self.progress_bar.setAccessibleName("Files done")
        self.progress_bar.setFormat("%v of %m files")
        self.progress_bar.setTextVisible(True)
        self.current_label = WrapLabel("")
        self.current_label.setObjectName("quiet")
        self.current_label.setTextFormat(Qt.TextFormat.PlainText)
        self.counts_label = WrapLabel("")
        self.counts_label.setObjectName("quiet")
        self.notes_label = WrapLabel("")
        self.notes_label.setObjectName("quiet")
        self.notes_label.setTextFormat(Qt.TextFormat.PlainText)
        self.notes_label.setAccessibleName("Notes about the files read")
        self.notes_label.setVisible(False)
        self._hide_timer = QTimer(self)
        self._hide_timer.setSingleShot(True)
        self._hide_timer.timeout.connect(self._hide_finished)
        self.pace_label = WrapLabel("")
        self.pace_label.setObjectName("quiet")
        self.pace_label.setAccessibleName("Speed and time left")
        self.pause_button = QPushButton("Pause")
        self.pause_button.setAccessibleName("Pause adding documents")
        self.pause_button.clicked.connect(self._pause)
        self.resume_button = QPushButton("Resume")
        self.resume_button.setAccessibleName("Resume adding documents")
        self.resume_button.clicked.connect(self._resume)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setAccessibleName("Cancel adding documents")
        self.cancel_button.clicked.connect(self._cancel)
        controls = QHBoxLayout()
        controls.setSpacing(6)
        controls.addStretch(1)
        controls.addWidget(self.pause_button)
        controls.addWidget(self.resume_button)
        controls.addWidget(self.cancel_button)
        # Long lines (the Pause message, a long file name) wrap within the pane
        # rather than widen it (WrapLabel): the split is the person's, not the text's.
        # The buttons sit right under the bar, above the lines that come and go and
        # rewrap as a job runs: below them Pause moved down under the pointer of a
        # person about to click it (the walkthrough missed it twice).
        progress_layout = QVBoxLayout(self.progress_box)
        progress_layout.setSpacing(4)
        progress_layout.addWidget(self.progress_bar)
        progress_layout.addLayout(controls)
        progress_layout.addWidget(self.current_label)
        progress_layout.addWidget(self.counts_label)
        progress_layout.addWidget(self.notes_label)
        # A row of its own: beside the buttons a long line would wrap a word a line.
        progress_layout.addWidget(self.pace_label)
        self.progress_box.setVisible(False)

        # -- documents
        self.documents_label = WrapLabel("Documents")
        self.documents_label.setObjectName("sectionTitle")
        self.documents_model = DocumentsModel(parent=self)
        self.documents_view = QTableView()
        self.documents_view.setAccessibleName("Documents")
        self.documents_view.setModel(self.documents_model)
        self.documents_view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.documents_view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.documents_view.setShowGrid(False)
        self.documents_view.setAlternatingRowColors(True)
        self.documents_view.verticalHeader().setVisible(False)
        self.documents_view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.documents_view.customContextMenuRequested.connect(self._document_menu)
        self.reindex_button = QPushButton("Re-index")
        self.reindex_button.setAccessibleName("Re-index the selected document")
        self.reindex_button.setToolTip("Read the file again; an unchanged file is skipped.")
        self.reindex_button.clicked.connect(self.reindex_selected)
        self.documents_view.selectionModel().selectionChanged.connect(lambda *_: self._update())
        self.documents_view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.documents_view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        # Wrapped, a name broke at its hyphen and the one line a row shows was cut:
        # "apt-guide.txt" read "apt-…" at 800x600. Unwrapped, its middle goes.
        self.documents_view.setWordWrap(False)
        header = self.documents_view.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.empty_label = QLabel("No documents yet. Add a folder, or try the sample collection.")
        self.empty_label.setObjectName("quiet")
        self.empty_label.setWordWrap(True)

        # -- unreadable files
        self.errors_label = QLabel("Files that could not be read")
        self.errors_label.setObjectName("sectionTitle")
        self.errors_model = ErrorsModel(parent=self)
        self.errors_view = QListView()
        self.errors_view.setObjectName("errorsList")
        self.errors_view.setAccessibleName("Files that could not be read")
        self.errors_view.setModel(self.errors_model)
        self.errors_view.setWordWrap(True)
        self.errors_view.setMaximumHeight(150)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(title)
        layout.addLayout(buttons)
        layout.addWidget(self.progress_box)
        layout.addWidget(self.folders_box)
        docs_row = QHBoxLayout()
        # "Documents (12 · 3,900 chunks)" wraps beside Re-index rather than be cut.
        docs_row.addWidget(self.documents_label, 1)
        docs_row.addWidget(self.reindex_button)
        layout.addLayout(docs_row)
        layout.addWidget(self.empty_label)
        layout.addWidget(self.documents_view, 1)
        layout.addWidget(self.errors_label)
        layout.addWidget(self.errors_view)
        self._update()

    @property
    def ingesting(self) -> bool:
        return self._awaiting or bool(self._jobs)

    # -- actions -------------------------------------------------------------------

    def choose_and_add_folder(self) -> None:
        """A folder into the collection shown (the default one when all are shown)."""
        folder = self._choose_folder(self)
        if not folder:
            return
        collection = self.folders_box.current_collection()
        if collection is None or collection == "default":
            emit(self.sig_add_paths, [folder])
        else:
            emit(self.sig_add_folder, folder, collection)

    def new_collection(self) -> None:
        """Name a collection, then choose its first folder (the engine knows a
        collection by its folders)."""
        if not self._ready:
            return
        name = self._ask_collection(self)
        if not name:
            return
        self.folders_box.add_collection(name)
        self.choose_and_add_folder()

    def _collection_changed(self) -> None:
        self.documents_model.set_within(self.folders_box.folders_shown())
        self._update()

    def add_sample_collection(self) -> None:
        emit(self.sig_add_paths, [str(sample_collection_dir())])

    def set_ready(self, ready: bool) -> None:
        self._ready = ready
        self.folders_box.set_ready(ready)
        self._update()

    def selected_document(self) -> str | None:
        rows = self.documents_view.selectionModel().selectedRows()
        return rows[0].data(PATH_ROLE) if rows else None

    def reindex_selected(self) -> None:
        path = self.selected_document()
        if path is not None and self._ready:
            emit(self.sig_reindex, path)

    def reindex_menu(self, *, path: str) -> QMenu:
        """The documents' context menu; built apart from showing it, for tests."""
        menu = QMenu(self)
        action = menu.addAction("Re-index this file")
        action.setEnabled(self._ready)
        action.setToolTip(path)
        action.triggered.connect(lambda: emit(self.sig_reindex, path))
        return menu

    def _document_menu(self, pos: QPoint) -> None:
        index = self.documents_view.indexAt(pos)
        if not index.isValid():
            return
        self.documents_view.selectRow(index.row())
        path = index.data(PATH_ROLE)
        if path:
            # popup(), not exec(): no nested event loop held open by the menu.
            menu = self.reindex_menu(path=path)
            menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            menu.popup(self.documents_view.viewport().mapToGlobal(pos))

    def _pause(self) -> None:
        # Disabling the focused Pause hands the focus to Cancel, one Space away
        # from ending the job: Resume, once it shows in its place, takes it back.
        if self.pause_button.hasFocus():
            self._focus_next = self.resume_button
        self.pause_button.setEnabled(False)
        emit(self.sig_pause)

    def _resume(self) -> None:
        if self.resume_button.hasFocus():
            self._focus_next = self.pause_button
        self.resume_button.setEnabled(False)
        emit(self.sig_resume)

    def _cancel(self) -> None:
        if self._job_id is not None and not self._cancelling:
            self._cancelling = True
            self._update()
            emit(self.sig_cancel, self._job_id)

    def cancel_failed(self) -> None:
        self._cancelling = False
        self._update()

    # -- what the engine reports -----------------------------------------------------

    def start_job(self) -> None:
        """A new job was asked for: the next progress event of a job it asked for
        ("request") is its first."""
        self._job_id = None
        self._job_errors = []
        self._awaiting = True
        self._last = None
        self._cancelling = False
        self.pace_label.setText("")
        self.progress_box.setTitle("Adding documents")
        self.progress_bar.setRange(0, 0)  # busy until the engine has counted the files
        self.current_label.setText("Looking for documents…")
        self.counts_label.setText("")
        self.notes_label.setVisible(False)
        self._hide_timer.stop()
        self.progress_box.setVisible(True)
        self._update()

    def show_progress(self, progress: IngestProgress) -> None:
        """Any job's progress: those the window asked for, and those the engine
        started itself (a watched folder changed, the rescan at start).

        One job is shown at a time: the one the window just asked for, else the
        one shown until it ends, then the next one still running. Events of
        jobs not shown add their errors and are counted as waiting."""
        p = progress
        if p.job_id in self._ended and p.state in FINAL_STATES:
            # A late event of a job already followed to its end (the bridge's
            # queue poll can trail its stream): not the answer to a new request.
            return
        shown = self._last if self._job_id is not None else None
        if self._awaiting and p.origin == "request":
            self._awaiting = False
            self._job_id = p.job_id
            self._ended.discard(p.job_id)  # a test engine may reuse an id
        elif self._job_id is None and not self._awaiting:
            self._job_id = p.job_id
        elif (
            not self._awaiting
            and shown is not None
            and shown.state in FINAL_STATES
            and p.state not in FINAL_STATES
        ):
            self._job_id = p.job_id  # the job shown has ended: show the next one
        if p.job_id not in self._ended:
            self._jobs[p.job_id] = p
        if p.job_id == self._job_id:
            self._job_errors = list(p.errors)
            self._render_progress(p)
        self.errors_model.merge(p.errors)
        self._update()

    def finish_job(self, progress: IngestProgress) -> None:
        """The bridge has followed a job to its end and asked for the new library."""
        self.show_progress(progress)
        self._jobs.pop(progress.job_id, None)
        self._ended.add(progress.job_id)
        if progress.job_id == self._job_id and self._jobs and not self._awaiting:
            # Another job is still running (a watched folder changed meanwhile): show it.
            self._job_id, following = next(reversed(self._jobs.items()))
            self._render_progress(following)
        self._update()

    def job_not_started(self) -> None:
        """The engine refused the job the window asked for (the banner says why)."""
        if self._awaiting:
            self._awaiting = False
            if self._job_id is None:
                self.progress_box.setVisible(False)
            self._update()

    def jobs_waiting(self) -> int:
        """Jobs running or queued besides the one shown."""
        return sum(
            1 for k, v in self._jobs.items() if k != self._job_id and v.state not in FINAL_STATES
        )

    def set_documents(self, documents: list[DocumentInfo]) -> None:
        selected = self.selected_document()
        self.documents_model.set_documents(documents)
        self.folders_box.set_documents(documents)
        if selected is not None:
            self._select_document(path=selected)
        self._update()

    def set_folders(self, folders: list[WatchedFolder]) -> None:
        self.folders_box.set_folders(folders)
        self._update()

    def forget_folder(self, path: str) -> None:
        """A folder was removed: the files of it that could not be read are no
        longer the library's (a job's own errors were kept past the engine's list)."""
        self._job_errors = [e for e in self._job_errors if not inside(path=e.path, folder=path)]
        self.errors_model.forget_folder(path)
        self._update()

    def folder_removal_failed(self, path: str) -> None:
        self.folders_box.removal_failed(path)

    def set_paused(self, paused: bool) -> None:
        """The engine's queue is paused (or not): it holds for every job."""
        self._paused = paused
        if self._last is not None:
            self.pace_label.setText(pace_line(progress=replace(self._last, paused=paused)))
        self._update()

    def _select_document(self, *, path: str) -> None:
        for row in range(self.documents_model.rowCount()):
            if self.documents_model.index(row, 0).data(PATH_ROLE) == path:
                self.documents_view.selectRow(row)
                return

    def set_file_errors(self, errors: list[FileError]) -> None:
        """The engine's list is the truth, but a job's own errors stay visible
        even if the engine's list lags behind it."""
        self.errors_model.replace(errors)
        self.errors_model.merge(self._job_errors)
        self._update()

    def _render_progress(self, p: IngestProgress) -> None:
        self.progress_box.setVisible(True)
        self._last = p
        self._paused = p.paused
        self.pace_label.setText(pace_line(progress=p))
        total = max(p.files_total, 0)
        if p.state in ("queued",) or (p.state == "running" and total == 0):
            self.progress_bar.setRange(0, 0)
        else:
            # The bar fills with the work done (bytes, a big file's share as its
            # chunks are embedded); its words count files.
            self.progress_bar.setRange(0, 1000)
            self.progress_bar.setValue(work_permille(progress=p))
            self.progress_bar.setFormat(
                f"{p.chunks_embedded:,} of {p.chunks_found:,} chunks"
                if p.origin == "embedder"
                else f"{p.files_done} of {total} files"
            )
        self.progress_box.setTitle(job_title(p))
        if p.state in FINAL_STATES:
            self.current_label.setText(_final_line(p))
        elif p.message and p.state == "running" and p.current:
            self.current_label.setText(p.message)  # e.g. "scan.pdf: OCR page 12 of 500"
            self.current_label.setToolTip(p.current)
        elif p.paused and p.state == "running":
            # The engine finishes the file at hand, then names none while it waits.
            self.current_label.setText(
                f"Finishing {file_name(path=p.current)}, then pausing" if p.current else "Paused"
            )
            self.current_label.setToolTip(p.current or "")
        elif p.current:
            self.current_label.setText(f"Working on {file_name(path=p.current)}")
            self.current_label.setToolTip(p.current)
        elif p.state == "queued":
            # Not "Waiting for the engine…": the status bar says the engine is ready.
            self.current_label.setText("Queued: it starts when the work before it ends")
        else:
            self.current_label.setText("Looking for documents…")
        self.counts_label.setText(counts_line(progress=p, jobs_waiting=self.jobs_waiting()))
        notes = notes_text(notes=p.notes)
        self.notes_label.setText(notes)
        self.notes_label.setVisible(bool(notes))
        if p.state in ("done", "cancelled"):
            self._hide_timer.start(FINISHED_BOX_MS)
        else:
            self._hide_timer.stop()

    def _hide_finished(self) -> None:
        """The box of a job that ended goes, unless another job has begun since."""
        last = self._last
        if self._awaiting or last is None or last.state not in ("done", "cancelled"):
            return
        if any(v.state not in FINAL_STATES for v in self._jobs.values()):
            return
        self.progress_box.setVisible(False)

    def _update(self) -> None:
        enabled = self._ready
        self.add_folder_button.setEnabled(enabled)
        self.add_samples_button.setEnabled(enabled)
        count = self.documents_model.rowCount()
        chunks = sum(d.chunks for d in self.documents_model.documents())
        self.documents_label.setText(
            f"Documents ({count} · {chunks} chunks)" if count else "Documents"
        )
        self.empty_label.setVisible(
            count == 0 and self._ready and not self.ingesting and self.folders_box.isHidden()
        )
        errors = self.errors_model.rowCount()
        self.errors_label.setText(f"Files that could not be read ({errors})")
        self.errors_label.setVisible(errors > 0)
        self.errors_view.setVisible(errors > 0)
        running = self._awaiting or (
            self._last is not None and self._last.state not in FINAL_STATES
        )
        self.pause_button.setVisible(running and not self._paused)
        self.resume_button.setVisible(running and self._paused)
        if self._focus_next is not None and self._focus_next.isVisible():
            self._focus_next.setFocus(Qt.FocusReason.OtherFocusReason)
            self._focus_next = None
        self.cancel_button.setVisible(running)
        if running:
            self.pause_button.setEnabled(enabled)
            self.resume_button.setEnabled(enabled)
            self.cancel_button.setEnabled(
                enabled and self._job_id is not None and not self._cancelling
            )
        self.cancel_button.setText("Cancelling…" if self._cancelling else "Cancel")
        self.reindex_button.setEnabled(enabled and self.selected_document() is not None)


def job_title(p: IngestProgress) -> str:
    if p.origin == "embedder":  # a new embedder re-embeds the collection
        return {
            "queued": "Re-embedding with the new embedder (queued)",
            "running": "Re-embedding with the new embedder",
            "done": "Re-embedded: the new embedder is in use",
        }.get(p.state, "Re-embedding " + p.state)
    if p.origin == "watcher":
        return {
            "queued": "A watched folder changed (queued)",
            "running": "Updating from a watched folder",
            "done": "Watched folder updated",
        }.get(p.state, "Updating from a watched folder " + p.state)
    if p.origin == "rescan":
        return {
            "queued": "Checking watched folders for changes (queued)",
            "running": "Checking watched folders for changes",
            "done": "Watched folders checked",
        }.get(p.state, "Checking watched folders " + p.state)
    if p.state == "queued":
        return "Adding documents (queued)"
    if p.state == "running":
        return "Adding documents"  # the bar under the title carries the count
    if p.state == "done":
        return "Documents added"
    if p.state == "cancelled":
        return "Adding documents was cancelled"
    return "Adding documents failed"


def _final_line(p: IngestProgress) -> str:
    if p.state == "failed":
        return f"The engine stopped this job: {p.message or 'no reason given'}"
    done = f"{p.files_done} of {p.files_total} files read"
    return done if p.state == "done" else f"Stopped after {done}"
