"""The per-document table as a Qt model: one row per document of the plan, filled in
as rows finish. Sorting goes through a QSortFilterProxyModel on SORT_ROLE, which
orders by what a column means (a page as a number, "not stated" after answers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QObject, QSortFilterProxyModel, Qt
from PySide6.QtGui import QFont

from app.chat.answer_render import elide, file_name
from app.each.export import pages_text
from app.qt_compat import emit
from app.table_model import HeaderedTable, Index
from engine.wire_each import NOT_STATED, DocumentAnswer

ROW_ROLE = Qt.ItemDataRole.UserRole + 1
SORT_ROLE = Qt.ItemDataRole.UserRole + 2
_EXCERPT_CHARS = 240  # the cell; the whole answer is in the tooltip and the export
_STATUS_ORDER = {"answered": 0, "not_stated": 1, "failed": 2, "cancelled": 3}


class EachResultsModel(HeaderedTable):
    HEADERS = ("#", "Document", "Answer", "Pages")

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._paths: list[str] = []
        self._answers: list[DocumentAnswer | None] = []
        self._running = False

    def set_plan(self, paths: Sequence[str]) -> None:
        """A new run: every document waits for its row."""
        self.beginResetModel()
        self._paths = list(paths)
        self._answers = [None] * len(paths)
        self._running = True
        self.endResetModel()

    def clear(self) -> None:
        self.set_plan([])
        self._running = False

    def set_row(self, row: DocumentAnswer) -> None:
        at = row.number - 1
        if not 0 <= at < len(self._answers):
            return
        self._answers[at] = row
        emit(self.dataChanged, self.index(at, 0), self.index(at, len(self.HEADERS) - 1))

    def finish(self) -> None:
        """The run ended: rows without an answer now say so."""
        self._running = False
        if self._answers:
            emit(self.dataChanged, self.index(0, 0), self.index(len(self._answers) - 1, 3))

    def row(self, at: int) -> DocumentAnswer | None:
        return self._answers[at] if 0 <= at < len(self._answers) else None

    def rows(self) -> list[DocumentAnswer]:
        """Every document in plan order, for export; one still waiting counts as not answered."""
        return [
            r or DocumentAnswer(number=i + 1, path=p, status="cancelled")
            for i, (p, r) in enumerate(zip(self._paths, self._answers, strict=True))
        ]

    # -- Qt's model interface -----------------------------------------------------------

    def _rows(self) -> Sequence[object]:
        return self._paths

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._paths):
            return None
        at, column = index.row(), index.column()
        row = self._answers[at]
        if role == ROW_ROLE:
            return row
        if role == SORT_ROLE:
            return self._sort_key(at=at, column=column, row=row)
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(at=at, column=column, row=row)
        if role == Qt.ItemDataRole.ToolTipRole:
            if column == 1:
                return self._paths[at]
            if column == 2 and row is not None:
                return row.answer or row.error or None
            if column == 3 and row is not None and row.citations:
                return "Double-click to open the page cited first"
            return None
        if (
            role == Qt.ItemDataRole.FontRole
            and column == 2
            and (row is None or row.status != "answered")
        ):
            font = QFont()
            font.setItalic(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole:
            horizontal = Qt.AlignmentFlag.AlignRight if column == 0 else Qt.AlignmentFlag.AlignLeft
            return int(horizontal | Qt.AlignmentFlag.AlignTop)
        return None

    def _display(self, *, at: int, column: int, row: DocumentAnswer | None) -> str:
        if column == 0:
            return str(at + 1)
        if column == 1:
            return file_name(path=self._paths[at])
        if column == 2:
            return _answer_cell(row=row, running=self._running)
        return pages_text(row=row) if row is not None else ""

    def _sort_key(self, *, at: int, column: int, row: DocumentAnswer | None) -> Any:
        if column == 0:
            return at
        if column == 1:
            return file_name(path=self._paths[at]).lower()
        if column == 2:
            status = _STATUS_ORDER[row.status] if row is not None else 4
            return f"{status}{row.answer.lower() if row is not None else ''}"
        page = row.first_page if row is not None else None
        return page if page is not None else 1_000_000_000


def _answer_cell(*, row: DocumentAnswer | None, running: bool) -> str:
    if row is None:
        return "Answering…" if running else "Not answered (cancelled)"
    if row.status == "failed":
        return f"Failed: {row.error}"
    if row.status == "cancelled":
        return "Not answered (cancelled)"
    if row.status == "not_stated":
        return row.answer or NOT_STATED
    text = elide(text=row.answer, limit=_EXCERPT_CHARS) or "(empty answer)"
    return f"{text}  (from the last run)" if row.reused else text


def sorting_proxy(
    *, model: EachResultsModel, parent: QObject | None = None
) -> QSortFilterProxyModel:
    proxy = QSortFilterProxyModel(parent)
    proxy.setSourceModel(model)
    proxy.setSortRole(SORT_ROLE)
    proxy.setDynamicSortFilter(True)  # a row that lands takes its place in the order
    return proxy
