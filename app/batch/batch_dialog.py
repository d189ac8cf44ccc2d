"""Batch questions in the window: paste or load a list, run it, watch the table
fill in, open a cited page, export the table as CSV or Markdown.

The dialog never calls the engine: the bridge runs the batch off the GUI thread
and calls back on it. Closing the dialog does not stop a run; it goes on in the
background and the dialog shows where it stands when opened again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListView,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.batch.export import Format, write_results
from app.batch.questions import QuestionsError, has_questions, parse_questions, read_questions
from app.batch.results_model import RESULT_ROLE, BatchResultsModel
from app.batch.runner import BatchResult, BatchRun, summary
from app.chat.sources_model import CHUNK_ID_ROLE, SourceDelegate, SourcesModel
from app.qt_compat import emit
from app.screen_fit import resize_within_screen

PathChooser = Callable[[QWidget], str | None]
ExportChooser = Callable[[QWidget, Format], str | None]


class BatchAsker(Protocol):
    """What the dialog needs of the EngineBridge."""

    def ask_batch(
        self,
        *,
        questions: Sequence[str],
        k: int = 5,
        on_result: Callable[[BatchResult, int], None],
        on_finished: Callable[[list[BatchResult]], None],
    ) -> BatchRun | None: ...


def choose_questions_dialog(parent: QWidget) -> str | None:
    path, _ = QFileDialog.getOpenFileName(
        parent, "Load questions", "", "Text files (*.txt);;All files (*)"
    )
    return path or None


def save_table_dialog(parent: QWidget, fmt: Format, *, title: str, stem: str) -> str | None:
    """Where to export a table as `fmt`, its suffix added when the name lacks it."""
    suffix, label = (".csv", "CSV (*.csv)") if fmt == "csv" else (".md", "Markdown (*.md)")
    path, _ = QFileDialog.getSaveFileName(parent, title, f"{stem}{suffix}", label)
    if not path:
        return None
    return path if Path(path).suffix.lower() == suffix else path + suffix


def choose_export_dialog(parent: QWidget, fmt: Format) -> str | None:
    return save_table_dialog(parent, fmt, title="Export the answers", stem="answers")


class BatchDialog(QDialog):
    sig_open_source = Signal(str)  # chunk id; the window opens it as it does the chat's

    def __init__(
        self,
        *,
        asker: BatchAsker,
        choose_questions: PathChooser = choose_questions_dialog,
        choose_export: ExportChooser = choose_export_dialog,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("batchDialog")
        self.setWindowTitle("Batch questions")
        resize_within_screen(widget=self, width=1000, height=760)
        self._asker = asker
        self.choose_questions = choose_questions
        self.choose_export = choose_export
        self._run: BatchRun | None = None
        # Which run the bridge's callbacks belong to: a late answer of a cancelled
        # run must not land in the next run's table.
        self._generation = 0
        self._started = 0.0
        self._tick = QTimer(self)  # the elapsed time moves even while no answer lands
        self._tick.setInterval(500)
        self._tick.timeout.connect(self._show_progress)

        self.model = BatchResultsModel(parent=self)
        self.sources_model = SourcesModel(parent=self)
        self._build()

    # -- construction ---------------------------------------------------------------

    def _build(self) -> None:
        hint = QLabel("One question per line; blank lines and lines starting with # are skipped.")
        hint.setWordWrap(True)
        self.questions = QPlainTextEdit()
        self.questions.setObjectName("batchQuestions")
        self.questions.setAccessibleName("Questions, one per line")
        self.questions.setPlaceholderText(
            "What does the warranty cover?\nHow do I descale the machine?"
        )
        self.questions.setMaximumHeight(110)
        self.questions.textChanged.connect(self._update_run)
        hint.setBuddy(self.questions)

        self.load_button = self._button("&Load from file…", "Load questions from a text file")
        self.load_button.clicked.connect(self.load_file)
        self.run_button = self._button("&Run", "Answer all the questions")
        self.run_button.setDefault(True)
        self.run_button.setToolTip("Answer all the questions (Ctrl+Return)")
        self.run_button.clicked.connect(self.start)
        self.cancel_button = self._button("&Cancel", "Stop answering; keep the answers so far")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.start)
        top = QHBoxLayout()
        top.addWidget(self.load_button)
        top.addStretch(1)
        top.addWidget(self.run_button)
        top.addWidget(self.cancel_button)

        self.progress = QProgressBar()
        self.progress.setAccessibleName("Questions answered")
        self.progress.setFormat("%v of %m")
        self.progress.setValue(0)
        self.progress.setRange(0, 1)
        self.progress.hide()  # until a run has questions to count: no "0 of 1"
        self.status = QLabel("")
        self.status.setObjectName("batchStatus")
        self.status.setAccessibleName("Batch status")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.table = QTableView()
        self.table.setObjectName("batchTable")
        self.table.setAccessibleName("Answers")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(True)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(1, 260)
        header.resizeSection(3, 300)
        self.table.selectionModel().currentRowChanged.connect(self._on_row)
        self.table.activated.connect(self._open_first_source)
        # Rows as tall as their wrapped text: when answers land, and also when a run
        # begins (a long question's second line was cut until its answer came) and
        # when a column's width changes.
        self.model.dataChanged.connect(lambda *_: self._fit_rows())
        self.model.modelReset.connect(self._fit_rows)
        header.sectionResized.connect(lambda *_: self._fit_rows())

        self.sources = QListView()
        self.sources.setObjectName("batchSources")
        self.sources.setAccessibleName("Sources of the selected answer")
        self.sources.setModel(self.sources_model)
        self.sources.setItemDelegate(SourceDelegate(self.sources))
        self.sources.activated.connect(self._open_source)
        sources_box = QWidget()
        sources_layout = QVBoxLayout(sources_box)
        sources_layout.setContentsMargins(0, 4, 0, 0)
        sources_label = QLabel("Sources of the selected answer (double-click to open the page)")
        sources_label.setBuddy(self.sources)
        sources_layout.addWidget(sources_label)
        sources_layout.addWidget(self.sources)

        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.setChildrenCollapsible(False)
        self.split.addWidget(self.table)
        self.split.addWidget(sources_box)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([330, 190])

        self.export_csv_button = self._button("Export &CSV…", "Export the table as CSV")
        self.export_csv_button.clicked.connect(lambda: self.export(fmt="csv"))
        self.export_md_button = self._button("Export &Markdown…", "Export the table as Markdown")
        self.export_md_button.clicked.connect(lambda: self.export(fmt="md"))
        close_button = self._button("Close", "Close the batch questions")
        close_button.clicked.connect(self.close)
        bottom = QHBoxLayout()
        bottom.addWidget(self.export_csv_button)
        bottom.addWidget(self.export_md_button)
        bottom.addStretch(1)
        bottom.addWidget(close_button)

        layout = QVBoxLayout(self)
        layout.addWidget(hint)
        layout.addWidget(self.questions)
        layout.addLayout(top)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.split, 1)
        layout.addLayout(bottom)
        self._set_running(False)

    def _button(self, text: str, accessible: str) -> QPushButton:
        button = QPushButton(text)
        button.setAccessibleName(accessible)
        button.setAutoDefault(False)
        return button

    # -- state ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._run is not None

    def _set_running(self, running: bool) -> None:
        self._update_run()
        self.load_button.setEnabled(not running)
        self.questions.setReadOnly(running)
        self.cancel_button.setEnabled(running)
        has_rows = self.model.rowCount() > 0
        self.export_csv_button.setEnabled(has_rows and not running)
        self.export_md_button.setEnabled(has_rows and not running)

    def _update_run(self) -> None:
        """Run only with questions to run: an empty list made it look ready."""
        has = has_questions(text=self.questions.toPlainText())
        self.run_button.setEnabled(has and not self.running)

    # -- actions ---------------------------------------------------------------------

    def load_file(self) -> None:
        chosen = self.choose_questions(self)
        if not chosen:
            return
        try:
            questions = read_questions(path=Path(chosen))
        except QuestionsError as e:
            self.status.setText(str(e))
            return
        self.questions.setPlainText("\n".join(q.text for q in questions))
        self.status.setText(f"Loaded {len(questions)} questions from {Path(chosen).name}.")

    def start(self) -> None:
        if self.running:
            return
        try:
            questions = parse_questions(text=self.questions.toPlainText(), source="The list")
        except QuestionsError as e:
            self.status.setText(str(e))
            return
        texts = [q.text for q in questions]
        self.model.set_questions(texts)
        self.sources_model.set_citations([])
        self.progress.setRange(0, len(texts))
        self.progress.setValue(0)
        self.progress.show()
        self._generation += 1
        generation = self._generation
        run = self._asker.ask_batch(
            questions=texts,
            on_result=lambda result, n: self._on_result(result, n, generation=generation),
            on_finished=lambda results: self._on_finished(results, generation=generation),
        )
        if run is None:
            self.model.finish([])
            self.status.setText("The engine is not connected yet; try again in a moment.")
            return
        self._run = run
        self._started = time.monotonic()
        self._tick.start()
        self._set_running(True)
        self._show_progress()

    def cancel(self) -> None:
        if self._run is not None:
            self._run.cancel()  # the bridge then reports the results so far
            self.cancel_button.setEnabled(False)
            self.status.setText("Cancelling…")

    def export(self, *, fmt: Format) -> Path | None:
        chosen = self.choose_export(self, fmt)
        if not chosen:
            return None
        path = Path(chosen)
        try:
            write_results(path=path, results=self.model.results(), fmt=fmt)
        except OSError as e:
            self.status.setText(f"Could not save {path}: {e.strerror or e}")
            return None
        self.status.setText(f"Saved {path}")
        return path

    # -- what the bridge reports -------------------------------------------------------

    def _on_result(self, result: BatchResult, finished: int, *, generation: int) -> None:
        if self._run is None or generation != self._generation:
            return
        self.model.set_result(result)
        self.progress.setValue(finished)
        self._show_progress()
        current = self.table.currentIndex()
        if current.isValid() and current.row() == result.number - 1:
            self._on_row(current)

    def _on_finished(self, results: list[BatchResult], *, generation: int) -> None:
        if generation != self._generation:
            return
        self._run = None
        self._tick.stop()
        self.model.finish(results)
        self.progress.setValue(sum(r.status != "cancelled" for r in results))
        elapsed = time.monotonic() - self._started
        self.status.setText(f"{summary(results=results)} in {elapsed:.1f} s.")
        self._set_running(False)
        if not self.table.currentIndex().isValid() and results:
            self.table.selectRow(0)

    def _show_progress(self) -> None:
        if self._run is None:
            return
        elapsed = time.monotonic() - self._started
        self.status.setText(
            f"Answering {self._run.total} questions together… "
            f"{self._run.finished} done · {elapsed:.0f} s"
        )

    def _fit_rows(self) -> None:
        self.table.resizeRowsToContents()

    # -- sources -----------------------------------------------------------------------

    def _on_row(self, current: QModelIndex, _previous: QModelIndex | None = None) -> None:
        result = current.data(RESULT_ROLE) if current.isValid() else None
        citations = list(result.citations) if isinstance(result, BatchResult) else []
        self.sources_model.set_citations(citations)

    def _open_first_source(self, index: QModelIndex) -> None:
        result = index.data(RESULT_ROLE)
        if isinstance(result, BatchResult) and result.citations:
            first = min(result.citations, key=lambda c: c.index)
            emit(self.sig_open_source, first.chunk_id)

    def _open_source(self, index: QModelIndex) -> None:
        chunk_id = index.data(CHUNK_ID_ROLE)
        if isinstance(chunk_id, str):
            emit(self.sig_open_source, chunk_id)
