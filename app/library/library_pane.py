"""The library pane: add folders, follow ingestion, see documents and unreadable files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListView,
    QProgressBar,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.chat.answer_render import file_name
from app.library.models import DocumentsModel, ErrorsModel
from app.qt_compat import emit
from engine.wire import DocumentInfo, FileError, IngestProgress

FolderChooser = Callable[[QWidget], str | None]

_FINAL_STATES = frozenset({"done", "cancelled", "failed"})


def choose_folder_dialog(parent: QWidget) -> str | None:
    folder = QFileDialog.getExistingDirectory(parent, "Add a folder of documents", str(Path.home()))
    return folder or None


def sample_collection_dir() -> Path:
    """The bundled sample documents; resources/ knows where they are installed."""
    import resources

    finder = getattr(resources, "sample_collection_dir", None)
    if callable(finder):
        return Path(finder())
    return Path(resources.__file__).parent / "samples"


class LibraryPane(QWidget):
    sig_add_paths = Signal(list)  # list[str]

    def __init__(
        self,
        *,
        choose_folder: FolderChooser = choose_folder_dialog,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._choose_folder = choose_folder
        self._job_id: str | None = None
        self._ready = False
        self._busy = False
        self._job_errors: list[FileError] = []

        title = QLabel("Library")
        title.setObjectName("paneTitle")
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.setAccessibleName("Add a folder of documents")
        self.add_folder_button.clicked.connect(self.choose_and_add_folder)
        self.add_samples_button = QPushButton("Add the sample collection")
        self.add_samples_button.setAccessibleName("Add the sample collection")
        self.add_samples_button.clicked.connect(self.add_sample_collection)

        buttons = QHBoxLayout()
        buttons.setSpacing(6)
        buttons.addWidget(self.add_folder_button)
        buttons.addWidget(self.add_samples_button)
        buttons.addStretch(1)

        # -- progress of the current ingestion job
        self.progress_box = QGroupBox("Adding documents")
        self.progress_bar = QProgressBar()
        self.progress_bar.setAccessibleName("Files done")
        self.progress_bar.setFormat("%v of %m files")
        self.progress_bar.setTextVisible(True)
        self.current_label = QLabel("")
        self.current_label.setObjectName("quiet")
        self.current_label.setTextFormat(Qt.TextFormat.PlainText)
        self.counts_label = QLabel("")
        self.counts_label.setObjectName("quiet")
        progress_layout = QVBoxLayout(self.progress_box)
        progress_layout.setSpacing(4)
        progress_layout.addWidget(self.progress_bar)
        progress_layout.addWidget(self.current_label)
        progress_layout.addWidget(self.counts_label)
        self.progress_box.setVisible(False)

        # -- documents
        self.documents_label = QLabel("Documents")
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
        layout.addWidget(self.documents_label)
        layout.addWidget(self.empty_label)
        layout.addWidget(self.documents_view, 1)
        layout.addWidget(self.errors_label)
        layout.addWidget(self.errors_view)
        self._update()

    @property
    def ingesting(self) -> bool:
        return self._busy

    # -- actions -------------------------------------------------------------------

    def choose_and_add_folder(self) -> None:
        folder = self._choose_folder(self)
        if folder:
            emit(self.sig_add_paths, [folder])

    def add_sample_collection(self) -> None:
        emit(self.sig_add_paths, [str(sample_collection_dir())])

    def set_ready(self, ready: bool) -> None:
        self._ready = ready
        self._update()

    # -- what the engine reports -----------------------------------------------------

    def start_job(self) -> None:
        """A new job was asked for: the next progress event is its first."""
        self._job_id = None
        self._job_errors = []
        self._busy = True
        self.progress_box.setTitle("Adding documents")
        self.progress_bar.setRange(0, 0)  # busy until the engine has counted the files
        self.current_label.setText("Looking for documents…")
        self.counts_label.setText("")
        self.progress_box.setVisible(True)
        self._update()

    def show_progress(self, progress: IngestProgress) -> None:
        # The newest job owns the display; late events of an older job only add errors.
        if self._job_id is None:
            self._job_id = progress.job_id
        if progress.job_id == self._job_id:
            self._job_errors = list(progress.errors)
            self._render_progress(progress)
        self.errors_model.merge(progress.errors)
        self._update()

    def finish_job(self, progress: IngestProgress) -> None:
        self.show_progress(progress)
        if progress.job_id == self._job_id:
            self._busy = False
        self._update()

    def set_documents(self, documents: list[DocumentInfo]) -> None:
        self.documents_model.set_documents(documents)
        self._update()

    def set_file_errors(self, errors: list[FileError]) -> None:
        """The engine's list is the truth, but a job's own errors stay visible
        even if the engine's list lags behind it."""
        self.errors_model.replace(errors)
        self.errors_model.merge(self._job_errors)
        self._update()

    def _render_progress(self, p: IngestProgress) -> None:
        self.progress_box.setVisible(True)
        total = max(p.files_total, 0)
        if p.state in ("queued",) or (p.state == "running" and total == 0):
            self.progress_bar.setRange(0, 0)
        else:
            self.progress_bar.setRange(0, max(total, 1))
            self.progress_bar.setValue(min(p.files_done, max(total, 1)) if total else 1)
        self.progress_box.setTitle(_job_title(p))
        if p.state in _FINAL_STATES:
            self.current_label.setText(_final_line(p))
        elif p.current:
            self.current_label.setText(f"Reading {file_name(path=p.current)}")
            self.current_label.setToolTip(p.current)
        else:
            self.current_label.setText("Waiting for the engine…")
        counts = [f"{p.chunks_added} chunks added"]
        if p.files_skipped:
            counts.append(f"{p.files_skipped} unchanged")
        if p.errors:
            counts.append(f"{len(p.errors)} could not be read")
        self.counts_label.setText(" · ".join(counts))

    def _update(self) -> None:
        enabled = self._ready
        self.add_folder_button.setEnabled(enabled)
        self.add_samples_button.setEnabled(enabled)
        count = self.documents_model.rowCount()
        chunks = sum(d.chunks for d in self.documents_model.documents())
        self.documents_label.setText(
            f"Documents ({count} · {chunks} chunks)" if count else "Documents"
        )
        self.empty_label.setVisible(count == 0 and self._ready and not self._busy)
        errors = self.errors_model.rowCount()
        self.errors_label.setText(f"Files that could not be read ({errors})")
        self.errors_label.setVisible(errors > 0)
        self.errors_view.setVisible(errors > 0)


def _job_title(p: IngestProgress) -> str:
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
