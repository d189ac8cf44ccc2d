"""Ask each document in the window: one question of every document of a collection or
folder; the table fills in as documents finish, sorts by any column, opens the page a
row cites, exports as CSV or Markdown; Cancel keeps the rows done.

The dialog never calls the engine: the bridge reads the run on a worker and calls
back on the GUI thread. Closing the dialog does not stop a run; it goes on, and the
dialog shows where it stands when opened again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListView,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.batch.batch_dialog import save_table_dialog
from app.batch.export import Format
from app.chat.sources_model import CHUNK_ID_ROLE, SourceDelegate, SourcesModel
from app.each.export import write_rows
from app.each.results_model import ROW_ROLE, EachResultsModel, sorting_proxy
from app.each.runner import EachRun, progress_text, summary_text
from app.qt_compat import emit
from app.screen_fit import resize_within_screen
from engine.wire_each import DocumentAnswer, EachPlan, EachRequest

ExportChooser = Callable[[QWidget, Format], str | None]


class EachAsker(Protocol):
    """What the dialog needs of the EngineBridge."""

    def ask_each(
        self,
        *,
        request: EachRequest,
        on_plan: Callable[[EachPlan], None],
        on_row: Callable[[DocumentAnswer], None],
        on_finished: Callable[[EachRun], None],
    ) -> EachRun | None: ...


def choose_export_dialog(parent: QWidget, fmt: Format) -> str | None:
    return save_table_dialog(parent, fmt, title="Export the table", stem="each")


class EachDialog(QDialog):
    sig_open_source = Signal(str)  # chunk id; the window opens it as it does the chat's

    def __init__(
        self,
        *,
        asker: EachAsker,
        choose_export: ExportChooser = choose_export_dialog,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("eachDialog")
        self.setWindowTitle("Ask each document")
        resize_within_screen(widget=self, width=1000, height=760)
        self._asker = asker
        self.choose_export = choose_export
        self._run: EachRun | None = None
        self._question = ""
        # Which run the bridge's callbacks belong to: a late row of a cancelled run
        # must not land in the next run's table.
        self._generation = 0
        self._tick = QTimer(self)  # the elapsed time and the estimate move between rows
        self._tick.setInterval(500)
        self._tick.timeout.connect(self._show_progress)
        self.model = EachResultsModel(parent=self)
        self.proxy = sorting_proxy(model=self.model, parent=self)
        self.sources_model = SourcesModel(parent=self)
        self._build()

    # -- construction ---------------------------------------------------------------

    def _build(self) -> None:
        self.scope = QComboBox()
        self.scope.setObjectName("eachScope")
        self.scope.setAccessibleName("The documents to ask: a collection or a folder")
        scope_label = QLabel("&Documents:")
        scope_label.setBuddy(self.scope)
        self.question = QLineEdit()
        self.question.setObjectName("eachQuestion")
        self.question.setAccessibleName("The question asked of each document")
        self.question.setPlaceholderText("What licence is this distributed under?")
        self.question.textChanged.connect(lambda *_: self._update())
        self.question.returnPressed.connect(self.start)
        question_label = QLabel("&Question:")
        question_label.setBuddy(self.question)
        self.reuse = QCheckBox("&Reuse answers of documents unchanged since the last run")
        self.reuse.setChecked(True)
        self.whole = QCheckBox("Give the model each &whole document where it fits")
        self.whole.setToolTip(
            "With a language model: every passage of a document instead of its best few. "
            "A document too long for the model's context gets a row that says so."
        )
        self.run_button = self._button("&Ask", "Ask the question of every document")
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.start)
        self.cancel_button = self._button("&Cancel", "Stop; keep the rows answered so far")
        self.cancel_button.clicked.connect(self.cancel)

        form = QHBoxLayout()
        form.addWidget(scope_label)
        form.addWidget(self.scope, 1)
        ask_row = QHBoxLayout()
        ask_row.addWidget(question_label)
        ask_row.addWidget(self.question, 1)
        ask_row.addWidget(self.run_button)
        ask_row.addWidget(self.cancel_button)

        self.progress = QProgressBar()
        self.progress.setAccessibleName("Documents answered")
        self.progress.setFormat("%v of %m")
        self.progress.hide()  # until a run has documents to count
        self.status = QLabel("")
        self.status.setObjectName("eachStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.table = QTableView()
        self.table.setObjectName("eachTable")
        self.table.setAccessibleName("One answer per document")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
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
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        header.resizeSection(1, 240)
        self.table.selectionModel().currentRowChanged.connect(self._on_row)
        self.table.activated.connect(self._open_first_source)
        self.model.dataChanged.connect(lambda *_: self.table.resizeRowsToContents())
        self.model.modelReset.connect(self.table.resizeRowsToContents)

        self.sources = QListView()
        self.sources.setObjectName("eachSources")
        self.sources.setAccessibleName("Passages the selected row cites")
        self.sources.setModel(self.sources_model)
        self.sources.setItemDelegate(SourceDelegate(self.sources))
        self.sources.activated.connect(self._open_source)
        sources_box = QWidget()
        sources_layout = QVBoxLayout(sources_box)
        sources_layout.setContentsMargins(0, 4, 0, 0)
        sources_label = QLabel("Passages of the selected row (double-click to open the page)")
        sources_label.setBuddy(self.sources)
        sources_layout.addWidget(sources_label)
        sources_layout.addWidget(self.sources)
        split = QSplitter(Qt.Orientation.Vertical)
        split.setChildrenCollapsible(False)
        split.addWidget(self.table)
        split.addWidget(sources_box)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)

        self.export_csv_button = self._button("Export &CSV…", "Export the table as CSV")
        self.export_csv_button.clicked.connect(lambda: self.export(fmt="csv"))
        self.export_md_button = self._button("Export &Markdown…", "Export the table as Markdown")
        self.export_md_button.clicked.connect(lambda: self.export(fmt="md"))
        close_button = self._button("Close", "Close; a run goes on")
        close_button.clicked.connect(self.close)
        bottom = QHBoxLayout()
        bottom.addWidget(self.export_csv_button)
        bottom.addWidget(self.export_md_button)
        bottom.addStretch(1)
        bottom.addWidget(close_button)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(ask_row)
        layout.addWidget(self.reuse)
        layout.addWidget(self.whole)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(split, 1)
        layout.addLayout(bottom)
        self._update()

    def _button(self, text: str, accessible: str) -> QPushButton:
        button = QPushButton(text)
        button.setAccessibleName(accessible)
        button.setAutoDefault(False)
        return button

    # -- scopes -------------------------------------------------------------------------

    def set_scopes(
        self, *, collections: Sequence[str], folders: Sequence[str], current: str | None = None
    ) -> None:
        """What can be asked: each collection, then each watched folder; `current` (a
        collection's name or a folder's path) chosen when it is one of them."""
        chosen = current if current is not None else self.scope.currentData()
        self.scope.clear()
        for name in collections:
            self.scope.addItem(f"Collection: {name}", name)
        for folder in folders:
            self.scope.addItem(f"Folder: {folder}", folder)
        at = self.scope.findData(chosen) if chosen is not None else -1
        self.scope.setCurrentIndex(max(at, 0))
        self._update()

    # -- state ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._run is not None

    def _update(self) -> None:
        ready = bool(self.question.text().strip()) and self.scope.currentData() is not None
        self.run_button.setEnabled(ready and not self.running)
        self.cancel_button.setEnabled(self.running and not self._run.cancelled)  # type: ignore[union-attr]
        self.scope.setEnabled(not self.running)
        self.question.setReadOnly(self.running)
        has_rows = self.model.rowCount() > 0
        self.export_csv_button.setEnabled(has_rows and not self.running)
        self.export_md_button.setEnabled(has_rows and not self.running)

    # -- actions ---------------------------------------------------------------------

    def start(self) -> None:
        scope = self.scope.currentData()
        question = " ".join(self.question.text().split())
        if self.running or not question or scope is None:
            return
        request = EachRequest(
            question=question,
            scope=scope,
            reuse=self.reuse.isChecked(),
            whole_document=self.whole.isChecked(),
        )
        self._generation += 1
        generation = self._generation
        self.model.clear()
        self.sources_model.set_citations([])
        self.status.setText("Finding the documents…")
        run = self._asker.ask_each(
            request=request,
            on_plan=lambda plan: self._on_plan(plan, generation=generation),
            on_row=lambda row: self._on_row_done(row, generation=generation),
            on_finished=lambda run: self._on_finished(run, generation=generation),
        )
        if run is None:
            self.status.setText("The engine is not connected yet; try again in a moment.")
            return
        self._question = question
        self._run = run
        self._tick.start()
        self._update()

    def cancel(self) -> None:
        if self._run is not None:
            self._run.cancel()  # the bridge then reports the rows so far
            self.status.setText("Cancelling…")
            self._update()

    def export(self, *, fmt: Format) -> Path | None:
        chosen = self.choose_export(self, fmt)
        if not chosen:
            return None
        path = Path(chosen)
        try:
            write_rows(path=path, question=self._question, rows=self.model.rows(), fmt=fmt)
        except OSError as e:
            self.status.setText(f"Could not save {path}: {e.strerror or e}")
            return None
        self.status.setText(f"Saved {path}")
        return path

    # -- what the bridge reports -------------------------------------------------------

    def _on_plan(self, plan: EachPlan, *, generation: int) -> None:
        if generation != self._generation:
            return
        self.model.set_plan(plan.paths)
        self.progress.setRange(0, len(plan.paths))
        self.progress.setValue(0)
        self.progress.show()
        self._show_progress()

    def _on_row_done(self, row: DocumentAnswer, *, generation: int) -> None:
        if generation != self._generation or self._run is None:
            return
        self.model.set_row(row)
        self.progress.setValue(self._run.finished())
        self._show_progress()
        current = self.table.currentIndex()
        if current.isValid() and current.data(ROW_ROLE) == row:
            self._on_row(current)

    def _on_finished(self, run: EachRun, *, generation: int) -> None:
        if generation != self._generation:
            return
        self._run = None
        self._tick.stop()
        self.model.finish()
        if run.error:
            self.status.setText(run.error)
        elif run.summary is not None:
            self.status.setText(f"{summary_text(summary=run.summary)} in {run.elapsed_s():.1f} s.")
        else:
            done = [r for r in run.rows() if r.status != "cancelled"]
            self.status.setText(f"Cancelled: {len(done)} of {run.total} documents answered.")
        self._update()

    def _show_progress(self) -> None:
        if self._run is not None and self._run.plan is not None:
            self.status.setText(progress_text(run=self._run))

    # -- sources -----------------------------------------------------------------------

    def _on_row(self, current: QModelIndex, _previous: QModelIndex | None = None) -> None:
        row = current.data(ROW_ROLE) if current.isValid() else None
        citations = list(row.citations) if isinstance(row, DocumentAnswer) else []
        self.sources_model.set_citations(citations)

    def _open_first_source(self, index: QModelIndex) -> None:
        row = index.data(ROW_ROLE)
        if isinstance(row, DocumentAnswer) and row.citations:
            first = min(row.citations, key=lambda c: c.index)
            emit(self.sig_open_source, first.chunk_id)

    def _open_source(self, index: QModelIndex) -> None:
        chunk_id = index.data(CHUNK_ID_ROLE)
        if isinstance(chunk_id, str):
            emit(self.sig_open_source, chunk_id)
