"""Watched folders in the library: what is watched, and removing a folder."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.library.models import PATH_ROLE, FoldersModel
from app.qt_compat import emit
from engine.wire import DocumentInfo, WatchedFolder

# Asked before a folder is removed: (parent, question) -> whether to go ahead.
Confirm = Callable[[QWidget, str], bool]

ALL_COLLECTIONS = "All collections"
NEW_COLLECTION = "New collection…"


def confirm_dialog(parent: QWidget, question: str) -> bool:
    # A modal box runs its own event loop, so the window keeps painting meanwhile.
    answer = QMessageBox.question(
        parent,
        "Remove folder",
        question,
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel,
    )
    return answer == QMessageBox.StandardButton.Yes


def removal_question(*, folder: str, documents: int) -> str:
    docs = "document" if documents == 1 else "documents"
    return (
        f"Stop watching {folder}?\n\n"
        f"Its {documents} {docs} leave the library and answers will no longer cite them. "
        "The files themselves are never touched: nothing on your disk is moved or deleted."
    )


class FoldersBox(QWidget):
    """The watched folders, grouped by collection, with a filter to show one."""

    sig_remove_folder = Signal(str)  # the folder's path
    sig_collection_changed = Signal()  # the filter changed: the documents follow it
    sig_new_collection = Signal()  # the person picked "New collection…" in the list
    sig_ask_each = Signal(str)  # the selected folder, or the collection shown ("": all)

    def __init__(self, *, confirm: Confirm = confirm_dialog, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._confirm = confirm
        self._ready = False
        self._removing: set[str] = set()
        # Named here before a folder is added to them; the engine knows a
        # collection only once it has a folder.
        self._new_collections: set[str] = set()
        self._shown_name = ALL_COLLECTIONS

        self.label = QLabel("Watched folders")
        self.label.setObjectName("sectionTitle")
        self.model = FoldersModel(parent=self)
        self.view = QTableView()
        self.view.setAccessibleName("Watched folders")
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setShowGrid(False)
        self.view.verticalHeader().setVisible(False)
        self.view.setMaximumHeight(130)
        self.view.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a path's both ends matter
        self.view.setWordWrap(False)  # else a path breaks at "-" and loses its end
        # The path column takes what the narrow ones leave, never a scroll bar.
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = self.view.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update())
        self.collection_combo = QComboBox()
        self.collection_combo.setAccessibleName("Show the folders of one collection")
        self.collection_combo.setToolTip(
            "Show one collection's folders and documents; a folder you add goes into it."
        )
        # A long collection name must not widen the library: the list elides it.
        self.collection_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.collection_combo.setMinimumContentsLength(12)
        self.collection_combo.addItem(ALL_COLLECTIONS)
        self.collection_combo.currentIndexChanged.connect(self._collection_chosen)
        self.remove_button = QPushButton("Remove folder…")
        self.remove_button.setAccessibleName("Remove the selected folder from the library")
        self.remove_button.setToolTip(
            "Its documents leave the library; the files on disk are never touched."
        )
        self.remove_button.clicked.connect(self.remove_selected)

        # Each row narrow enough for the library's minimum width: the title alone,
        # the filter, the table, then the button that acts on the selected row.
        self.ask_each_button = QPushButton("Ask each document…")
        self.ask_each_button.setAccessibleName("Ask one question of every document here")
        self.ask_each_button.setToolTip(
            "One question asked of every document of the selected folder (or of the "
            "collection shown), answered as a table with the page each one cites."
        )
        self.ask_each_button.clicked.connect(
            lambda: emit(
                self.sig_ask_each, self.selected_folder() or self.current_collection() or ""
            )
        )
        remove_row = QHBoxLayout()
        remove_row.addWidget(self.ask_each_button)
        remove_row.addStretch(1)
        remove_row.addWidget(self.remove_button)
        # A row of its own, so that the library does not grow wider for it.
        self.collection_label = QLabel("Show")
        self.collection_label.setBuddy(self.collection_combo)
        filter_row = QHBoxLayout()
        filter_row.addWidget(self.collection_label)
        filter_row.addWidget(self.collection_combo, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.label)
        layout.addLayout(filter_row)
        layout.addWidget(self.view)
        layout.addLayout(remove_row)
        self._update()

    def set_ready(self, ready: bool) -> None:
        self._ready = ready
        self._update()

    def set_folders(self, folders: list[WatchedFolder]) -> None:
        selected = self.selected_folder()
        self.model.set_folders(folders)
        # The engine's list is the truth: a folder gone from it is no longer being removed.
        self._removing &= {f.path for f in folders}
        self._new_collections -= set(self.model.collections())
        self._fill_collections()
        if selected is not None:
            self.select(path=selected)
        self._update()

    def set_documents(self, documents: list[DocumentInfo]) -> None:
        selected = self.selected_folder()
        self.model.set_documents(documents)
        if selected is not None:
            self.select(path=selected)
        self._update()

    def current_collection(self) -> str | None:
        """The collection shown (and that a new folder goes into); None: all of them."""
        text = self.collection_combo.currentText()
        return None if text == ALL_COLLECTIONS else text

    def collections(self) -> list[str]:
        return sorted({*self.model.collections(), *self._new_collections}, key=str.lower)

    def add_collection(self, name: str) -> None:
        """A collection named by the person: shown and chosen until it has a folder."""
        self._new_collections.add(name)
        self._fill_collections(choose=name)
        self._update()

    def show_collection(self, name: str | None) -> None:
        index = self.collection_combo.findText(name or ALL_COLLECTIONS)
        if index >= 0:
            self.collection_combo.setCurrentIndex(index)

    def _fill_collections(self, *, choose: str | None = None) -> None:
        current = choose or self._shown_name
        names = [ALL_COLLECTIONS, *self.collections(), NEW_COLLECTION]
        combo = self.collection_combo
        combo.blockSignals(True)
        combo.clear()
        combo.addItems(names)
        combo.setCurrentIndex(names.index(current) if current in names else 0)
        combo.blockSignals(False)
        self._collection_chosen()

    def _collection_chosen(self, *_: object) -> None:
        if self.collection_combo.currentText() == NEW_COLLECTION:
            self.show_collection(self._shown_name)  # back to what was shown; ask the name
            emit(self.sig_new_collection)
            return
        self._shown_name = self.collection_combo.currentText()
        self.model.set_collection(self.current_collection())
        self._update()
        emit(self.sig_collection_changed)

    def folders_shown(self) -> list[str] | None:
        """The folders of the collection shown; None when all are shown."""
        name = self.current_collection()
        return None if name is None else self.model.folders_in(collection=name)

    def select(self, *, path: str) -> None:
        for row in range(self.model.rowCount()):
            if self.model.index(row, 0).data(PATH_ROLE) == path:
                self.view.selectRow(row)
                return

    def selected_folder(self) -> str | None:
        rows = self.view.selectionModel().selectedRows()
        return rows[0].data(PATH_ROLE) if rows else None

    def remove_selected(self) -> None:
        folder = self.selected_folder()
        if folder is None or folder in self._removing:
            return
        question = removal_question(folder=folder, documents=self.model.document_count(path=folder))
        if not self._confirm(self, question):
            return
        self._removing.add(folder)
        self._update()
        emit(self.sig_remove_folder, folder)

    def removal_failed(self, path: str) -> None:
        self._removing.discard(path)
        self._update()

    def _update(self) -> None:
        count = self.model.rowCount()
        self.label.setText(f"Watched folders ({count})" if count else "Watched folders")
        self.setVisible(bool(self.model.folders() or self._new_collections))
        # One collection, the default: nothing to choose between.
        # Nothing to choose between until there is a folder.
        shown = bool(self.collections())
        self.collection_combo.setVisible(shown)
        self.collection_label.setVisible(shown)
        # A column that says "default" on every row takes the path's room for nothing.
        self.view.setColumnHidden(1, len(self.collections()) < 2)
        selected = self.selected_folder()
        self.ask_each_button.setEnabled(self._ready and bool(self.model.folders()))
        self.remove_button.setEnabled(
            self._ready and selected is not None and selected not in self._removing
        )
