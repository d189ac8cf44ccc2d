"""Watched folders in the library: what is watched, and removing a folder."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
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
    sig_remove_folder = Signal(str)  # the folder's path

    def __init__(self, *, confirm: Confirm = confirm_dialog, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._confirm = confirm
        self._ready = False
        self._removing: set[str] = set()

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
        header = self.view.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.view.selectionModel().selectionChanged.connect(lambda *_: self._update())
        self.remove_button = QPushButton("Remove folder…")
        self.remove_button.setAccessibleName("Remove the selected folder from the library")
        self.remove_button.setToolTip(
            "Its documents leave the library; the files on disk are never touched."
        )
        self.remove_button.clicked.connect(self.remove_selected)

        row = QHBoxLayout()
        row.addWidget(self.label)
        row.addStretch(1)
        row.addWidget(self.remove_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(row)
        layout.addWidget(self.view)
        self._update()

    def set_ready(self, ready: bool) -> None:
        self._ready = ready
        self._update()

    def set_folders(self, folders: list[WatchedFolder]) -> None:
        selected = self.selected_folder()
        self.model.set_folders(folders)
        # The engine's list is the truth: a folder gone from it is no longer being removed.
        self._removing &= {f.path for f in folders}
        if selected is not None:
            self.select(path=selected)
        self._update()

    def set_documents(self, documents: list[DocumentInfo]) -> None:
        selected = self.selected_folder()
        self.model.set_documents(documents)
        if selected is not None:
            self.select(path=selected)
        self._update()

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
        self.setVisible(count > 0)
        selected = self.selected_folder()
        self.remove_button.setEnabled(
            self._ready and selected is not None and selected not in self._removing
        )
