"""Qt models for the library pane: watched folders, indexed documents, unreadable files."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QModelIndex,
    QObject,
    Qt,
)

from app.chat.answer_render import file_name
from app.table_model import HeaderedTable, Index
from engine.wire import DocumentInfo, FileError, WatchedFolder

PATH_ROLE = Qt.ItemDataRole.UserRole + 1


class DocumentsModel(HeaderedTable):
    """One row per indexed document, sorted by file name. Files the engine
    could not read are left to the errors list, which says why."""

    HEADERS = ("Document", "Pages", "Chunks")

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._all: list[DocumentInfo] = []
        self._docs: list[DocumentInfo] = []
        self._within: list[str] | None = None  # only documents in these folders

    def set_documents(self, documents: list[DocumentInfo]) -> None:
        readable = [d for d in documents if d.status != "error"]
        self._all = sorted(readable, key=lambda d: (file_name(path=d.path).lower(), d.path))
        self._filter()

    def set_within(self, folders: list[str] | None) -> None:
        """Show only the documents in `folders` (one collection's); None: all."""
        self._within = folders
        self._filter()

    def _filter(self) -> None:
        self.beginResetModel()
        within = self._within
        self._docs = [
            d
            for d in self._all
            if within is None or any(inside(path=d.path, folder=f) for f in within)
        ]
        self.endResetModel()

    def documents(self) -> list[DocumentInfo]:
        return list(self._docs)

    def _rows(self) -> Sequence[object]:
        return self._docs

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._docs):
            return None
        doc = self._docs[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if column == 0:
                return file_name(path=doc.path)
            if column == 1:
                return "" if doc.pages is None else str(doc.pages)
            return str(doc.chunks)
        if role == Qt.ItemDataRole.ToolTipRole:
            return doc.path if doc.error is None else f"{doc.path}\n{doc.error}"
        if role == Qt.ItemDataRole.TextAlignmentRole and column > 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == PATH_ROLE:
            return doc.path
        return None


class FoldersModel(HeaderedTable):
    """One row per watched folder with how many of its documents are indexed.

    The count comes from the documents list the pane already has, so showing
    it costs no extra engine call."""

    HEADERS = ("Folder", "Collection", "Documents")

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._all: list[WatchedFolder] = []
        self._folders: list[WatchedFolder] = []
        self._counts: dict[str, int] = {}
        self._docs: list[DocumentInfo] = []
        self._collection: str | None = None  # shown: one collection's folders, or all

    def set_folders(self, folders: list[WatchedFolder]) -> None:
        self.beginResetModel()
        self._all = sorted(folders, key=lambda f: (f.collection.lower(), f.path.lower()))
        self._counts = _count_documents(folders=self._all, documents=self._docs)
        self._folders = self._shown()
        self.endResetModel()

    def set_collection(self, name: str | None) -> None:
        self.beginResetModel()
        self._collection = name
        self._folders = self._shown()
        self.endResetModel()

    def _shown(self) -> list[WatchedFolder]:
        return [f for f in self._all if self._collection in (None, f.collection)]

    def collections(self) -> list[str]:
        """The collections the engine knows: those with at least one folder."""
        return sorted({f.collection for f in self._all}, key=str.lower)

    def folders_in(self, *, collection: str) -> list[str]:
        return [f.path for f in self._all if f.collection == collection]

    def set_documents(self, documents: list[DocumentInfo]) -> None:
        self.beginResetModel()
        self._docs = [d for d in documents if d.status == "indexed"]
        self._counts = _count_documents(folders=self._all, documents=self._docs)
        self.endResetModel()

    def folders(self) -> list[WatchedFolder]:
        return list(self._all)

    def _rows(self) -> Sequence[object]:
        return self._folders

    def document_count(self, *, path: str) -> int:
        return self._counts.get(path, 0)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._folders):
            return None
        folder = self._folders[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if column == 0:
                return folder.path
            if column == 1:
                return folder.collection
            return str(self._counts.get(folder.path, 0))
        if role == Qt.ItemDataRole.ToolTipRole:
            return folder.path
        if role == Qt.ItemDataRole.TextAlignmentRole and column == 2:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == PATH_ROLE:
            return folder.path
        return None


class ErrorsModel(QAbstractListModel):
    """Files that could not be read, with the reason, one row per path."""

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._errors: dict[str, str] = {}

    def errors(self) -> list[FileError]:
        return [FileError(path=p, reason=r) for p, r in self._errors.items()]

    def replace(self, errors: list[FileError]) -> None:
        self.beginResetModel()
        self._errors = {e.path: e.reason for e in errors}
        self.endResetModel()

    def merge(self, errors: list[FileError]) -> None:
        """Add or update rows; a job reports its errors again with every progress event."""
        changed = [e for e in errors if self._errors.get(e.path) != e.reason]
        if not changed:
            return
        self.beginResetModel()
        for e in changed:
            self._errors[e.path] = e.reason
        self.endResetModel()

    def forget_folder(self, folder: str) -> None:
        """The rows of files in `folder` (and below) go: it was removed."""
        kept = {p: r for p, r in self._errors.items() if not inside(path=p, folder=folder)}
        if len(kept) == len(self._errors):
            return
        self.beginResetModel()
        self._errors = kept
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._errors)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._errors):
            return None
        path, reason = list(self._errors.items())[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            # The name and reason first; the folder under it, since two files
            # of the same name in different folders are common.
            return f"{file_name(path=path)} — {reason}\n{_folder(path=path)}"
        if role in (Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.AccessibleTextRole):
            return f"{path}: {reason}"
        if role == PATH_ROLE:
            return path
        return None


def _count_documents(
    *, folders: list[WatchedFolder], documents: list[DocumentInfo]
) -> dict[str, int]:
    """Documents under each folder; a document in nested folders counts once,
    for the innermost."""
    counts = dict.fromkeys((f.path for f in folders), 0)
    deepest_first = sorted(counts, key=len, reverse=True)
    for doc in documents:
        owner = next((f for f in deepest_first if inside(path=doc.path, folder=f)), None)
        if owner is not None:
            counts[owner] += 1
    return counts


def inside(*, path: str, folder: str) -> bool:
    # Both are absolute paths as the engine wrote them; compare as text so that
    # a folder that no longer exists on disk still gets its count.
    base = folder.rstrip("/\\")
    return path.startswith(base) and path[len(base) : len(base) + 1] in ("/", "\\")


def _folder(*, path: str) -> str:
    name = file_name(path=path)
    if name and path.endswith(name):
        return path[: -len(name)].rstrip("/\\")
    return path
