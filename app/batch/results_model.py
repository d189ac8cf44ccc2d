"""The batch table as a Qt model: one row per question, filled in as answers arrive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QFont

from app.batch.runner import BatchResult
from app.chat.answer_render import elide, file_name, page_word
from app.qt_compat import emit
from app.table_model import HeaderedTable, Index

RESULT_ROLE = Qt.ItemDataRole.UserRole + 1
_EXCERPT_CHARS = 220  # the cell; the whole answer is in the tooltip and the export


class BatchResultsModel(HeaderedTable):
    HEADERS = ("#", "Question", "Answer", "Sources")
    SOURCES_COLUMN = 3

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._questions: list[str] = []
        self._results: list[BatchResult | None] = []
        self._running = False

    # -- filling ---------------------------------------------------------------------

    def set_questions(self, questions: Sequence[str]) -> None:
        """A new run: every row waits for its answer."""
        self.beginResetModel()
        self._questions = list(questions)
        self._results = [None] * len(questions)
        self._running = True
        self.endResetModel()

    def set_result(self, result: BatchResult) -> None:
        row = result.number - 1
        if not 0 <= row < len(self._results):
            return
        self._results[row] = result
        emit(self.dataChanged, self.index(row, 0), self.index(row, len(self.HEADERS) - 1))

    def finish(self, results: Sequence[BatchResult]) -> None:
        """The run ended: rows without an answer now say so."""
        self._running = False
        for r in results:
            if 0 <= r.number - 1 < len(self._results):
                self._results[r.number - 1] = r
        if self._results:
            emit(self.dataChanged, self.index(0, 0), self.index(len(self._results) - 1, 3))

    def result(self, row: int) -> BatchResult | None:
        return self._results[row] if 0 <= row < len(self._results) else None

    def results(self) -> list[BatchResult]:
        """The rows with an outcome, for export; a row still waiting counts as not answered."""
        return [
            r or BatchResult(number=i + 1, question=q, status="cancelled")
            for i, (q, r) in enumerate(zip(self._questions, self._results, strict=True))
        ]

    # -- Qt's model interface -----------------------------------------------------------

    def _rows(self) -> Sequence[object]:
        return self._questions

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._questions):
            return None
        row, column = index.row(), index.column()
        result = self._results[row]
        if role == RESULT_ROLE:
            return result
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(row=row, column=column, result=result)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(row=row, column=column, result=result)
        waiting_or_failed = result is None or result.status != "answered"
        if role == Qt.ItemDataRole.FontRole and column == 2 and waiting_or_failed:
            font = QFont()
            font.setItalic(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and column == 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        return None

    def _display(self, *, row: int, column: int, result: BatchResult | None) -> str:
        if column == 0:
            return str(row + 1)
        if column == 1:
            return self._questions[row]
        if column == 2:
            return _answer_cell(result=result, running=self._running)
        if result is None:
            return ""
        return sources_cell(result=result)

    def _tooltip(self, *, row: int, column: int, result: BatchResult | None) -> str | None:
        if column == 1:
            return self._questions[row]
        if column == 2 and result is not None:
            return result.answer or result.error or None
        if column == 3 and result is not None and result.citations:
            return "Double-click to open the first source"
        return None


def _answer_cell(*, result: BatchResult | None, running: bool) -> str:
    if result is None:
        return "Answering…" if running else "Not answered"
    if result.status == "failed":
        return f"Failed: {result.error}"
    if result.status == "cancelled":
        return "Not answered (cancelled)"
    return elide(text=result.answer, limit=_EXCERPT_CHARS) or "(empty answer)"


def sources_cell(*, result: BatchResult) -> str:
    """One line per file with its pages: "guide.pdf — pages 1, 3" (the list under
    the table has each passage with its [n])."""
    pages: dict[str, list[int]] = {}
    for c in sorted(result.citations, key=lambda c: c.index):
        found = pages.setdefault(c.path, [])
        if c.page is not None and c.page not in found:
            found.append(c.page)
    lines = []
    for path, numbers in pages.items():
        name = file_name(path=path)
        if not numbers:
            lines.append(name)
            continue
        word = page_word(path=path) + ("s" if len(numbers) > 1 else "")
        lines.append(f"{name} — {word} {', '.join(map(str, sorted(numbers)))}")
    return "\n".join(lines)
