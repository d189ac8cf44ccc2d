"""The list of sources under an answer: a Qt model and a two-line delegate."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QRect,
    QSize,
    Qt,
)
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from app.chat.answer_render import elide, file_name, page_title, source_title
from app.theme import is_dark
from engine.wire import Citation

CHUNK_ID_ROLE = Qt.ItemDataRole.UserRole + 1
CITATION_ROLE = Qt.ItemDataRole.UserRole + 2

_QUIET = QColor("#57606a")
_QUIET_DARK = QColor("#a0a8b4")
_PASSAGE_CHARS = 400  # the delegate elides to the width; this only bounds the work

_Index = QModelIndex | QPersistentModelIndex


class SourcesModel(QAbstractListModel):
    """The citations of the answer on screen, in marker order."""

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._citations: list[Citation] = []

    def set_citations(self, citations: list[Citation]) -> None:
        self.beginResetModel()
        self._citations = sorted(citations, key=lambda c: c.index)
        self.endResetModel()

    def citation(self, row: int) -> Citation:
        return self._citations[row]

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._citations)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._citations):
            return None
        c = self._citations[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return f"[{c.index}] {source_title(citation=c)}\n{elide(text=c.text, limit=160)}"
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{c.path}\n\n{elide(text=c.text, limit=_PASSAGE_CHARS)}"
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return f"Source {c.index}: {source_title(citation=c)}"
        if role == CHUNK_ID_ROLE:
            return c.chunk_id
        if role == CITATION_ROLE:
            return c
        return None


def fitted_title(*, citation: Citation, metrics: QFontMetrics, width: int) -> str:
    """ "[n]  file — page p — section" in `width` pixels: the section is cut first,
    then the file name in its middle; the marker and the page stay (cutting the
    whole line in its middle left "maint-guide.pdf — pa…files" at 1024 pixels)."""
    head = f"[{citation.index}]  {page_title(path=citation.path, page=citation.page)}"
    full = f"{head} — {citation.section}" if citation.section else head
    if metrics.horizontalAdvance(full) <= width:
        return full
    room = width - metrics.horizontalAdvance(head)
    if citation.section and room > metrics.horizontalAdvance(" — …") * 2:
        tail = metrics.elidedText(f" — {citation.section}", Qt.TextElideMode.ElideRight, room)
        return head + tail
    if metrics.horizontalAdvance(head) <= width:
        return head
    name = file_name(path=citation.path)
    rest = head[head.index(name) + len(name) :]
    marker = f"[{citation.index}]  "
    room = width - metrics.horizontalAdvance(marker + rest)
    if room <= metrics.horizontalAdvance("…") * 4:
        return metrics.elidedText(head, Qt.TextElideMode.ElideRight, width)
    return marker + metrics.elidedText(name, Qt.TextElideMode.ElideMiddle, room) + rest


class SourceDelegate(QStyledItemDelegate):
    """Title in bold over one line of the passage in a quieter colour."""

    _PAD = 6

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        line = QFontMetrics(option.font).lineSpacing()
        return QSize(200, 2 * line + 2 * self._PAD + 2)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        citation = index.data(CITATION_ROLE)
        if not isinstance(citation, Citation):
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)

        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        group = QPalette.ColorGroup.Active
        text_role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        text_colour = opt.palette.color(group, text_role)
        # Darker than the palette's placeholder grey, which is below 4.5:1 on white.
        quiet = text_colour if selected else (_QUIET_DARK if is_dark() else _QUIET)

        rect = opt.rect.adjusted(self._PAD + 2, self._PAD, -self._PAD, -self._PAD)
        line = QFontMetrics(opt.font).lineSpacing()
        painter.save()
        bold = QFont(opt.font)
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(text_colour)
        title = fitted_title(citation=citation, metrics=QFontMetrics(bold), width=rect.width())
        painter.drawText(
            QRect(rect.left(), rect.top(), rect.width(), line),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            title,
        )
        painter.setFont(opt.font)
        painter.setPen(quiet)
        passage = QFontMetrics(opt.font).elidedText(
            elide(text=citation.text, limit=_PASSAGE_CHARS),
            Qt.TextElideMode.ElideRight,
            rect.width(),
        )
        painter.drawText(
            QRect(rect.left(), rect.top() + line, rect.width(), line),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            passage,
        )
        painter.restore()
