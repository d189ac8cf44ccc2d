"""The source viewer: one page's text with the cited passage highlighted."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor, QDesktopServices, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.chat.answer_render import page_title
from engine.wire import SourceView

HIGHLIGHT = QColor("#ffe58a")


def qt_span(*, text: str, start: int, end: int) -> tuple[str, int, int]:
    """The text as Qt will hold it, and the span in Qt's positions.

    The engine's offsets count Python characters; a QTextDocument counts UTF-16
    code units and turns "\\r\\n" into one paragraph break. Both shift every
    position after them, so convert rather than trust the numbers."""
    start = max(0, min(start, len(text)))
    end = max(start, min(end, len(text)))

    def qt_pos(index: int) -> int:
        prefix = text[:index]
        return len(prefix.encode("utf-16-le")) // 2 - prefix.count("\r\n")

    return text.replace("\r\n", "\n"), qt_pos(start), qt_pos(end)


class SourceViewer(QDialog):
    """Non-modal, reused for every click so that sources do not pile up in windows."""

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sourceViewer")
        self.setWindowTitle("Source")
        self.setModal(False)
        self.resize(860, 700)
        self._source: SourceView | None = None

        self.title_label = QLabel()
        self.title_label.setObjectName("viewerTitle")
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)
        self.path_label = QLabel()
        self.path_label.setObjectName("quiet")
        self.path_label.setTextFormat(Qt.TextFormat.PlainText)
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.path_label.setWordWrap(True)

        self.text = QTextEdit()
        self.text.setObjectName("pageText")
        self.text.setAccessibleName("Page text")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.text.document().setDocumentMargin(16)

        buttons = QDialogButtonBox()
        self.open_button = QPushButton("Open file")
        self.open_button.setAccessibleName("Open the file in its own application")
        self.open_button.clicked.connect(self._open_file)
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        # A plain button: the standard Close carries an icon on some styles and
        # would not match "Open file" beside it.
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        buttons.addButton(close, QDialogButtonBox.ButtonRole.RejectRole)

        layout = QVBoxLayout(self)
        layout.setSpacing(6)
        layout.addWidget(self.title_label)
        layout.addWidget(self.path_label)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)

    @property
    def source(self) -> SourceView | None:
        return self._source

    def show_source(self, source: SourceView) -> None:
        self._source = source
        title = page_title(path=source.path, page=source.page)
        self.setWindowTitle(title)
        self.title_label.setText(title)
        where = source.path
        if source.page is not None and source.page_count is not None:
            where = f"{source.path}  ·  page {source.page} of {source.page_count}"
        self.path_label.setText(where)
        self.open_button.setEnabled(Path(source.path).exists())

        text, start, end = qt_span(
            text=source.page_text, start=source.char_start, end=source.char_end
        )
        self.text.setPlainText(text)
        self._highlight(start=start, end=end)
        self.show()
        self.raise_()
        self.activateWindow()
        # Scroll once the dialog has its size, or "centre" means nothing.
        self._scroll_to(start=start, end=end)

    def _highlight(self, *, start: int, end: int) -> None:
        cursor = QTextCursor(self.text.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        selection = QTextEdit.ExtraSelection()
        selection.cursor = cursor
        fmt = QTextCharFormat()
        fmt.setBackground(HIGHLIGHT)
        fmt.setForeground(QColor("#1f2328"))
        selection.format = fmt
        self.text.setExtraSelections([selection] if end > start else [])

    def _scroll_to(self, *, start: int, end: int) -> None:
        """Put the passage's first line about a third of the way down."""
        cursor = QTextCursor(self.text.document())
        cursor.setPosition(end)
        self.text.setTextCursor(cursor)
        self.text.ensureCursorVisible()
        cursor.setPosition(start)
        self.text.setTextCursor(cursor)
        self.text.ensureCursorVisible()
        top = self.text.cursorRect(cursor).top()
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.value() + top - self.text.viewport().height() // 3)

    def _open_file(self) -> None:
        if self._source is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(self._source.path))
