"""The transcript's view: on a wide screen its lines stop at a reading width, and
its hint for an empty conversation wraps rather than losing its end."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette, QResizeEvent
from PySide6.QtWidgets import QTextBrowser, QTextEdit

# Characters a line at most: at 2560x1440 maximized, an answer ran on lines of
# over 300 characters, which the eye loses on the way back to the left.
READING_CHARS = 100


class TranscriptView(QTextBrowser):
    def __init__(self, *, hint: str) -> None:
        super().__init__()
        self._hint = hint
        self.setAccessibleDescription(hint)

    def hint(self) -> str:
        return self._hint

    def reading_width(self) -> int:
        """The widest a line gets, in pixels, margins included."""
        margin = round(self.document().documentMargin())
        return READING_CHARS * self.fontMetrics().averageCharWidth() + 2 * margin

    def line_width(self) -> int:
        """How wide the lines are laid out now."""
        if self.lineWrapMode() == QTextEdit.LineWrapMode.FixedPixelWidth:
            return self.lineWrapColumnOrWidth()
        return self.viewport().width()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_lines()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:  # the style sheet's font comes late
            self._fit_lines()

    def _fit_lines(self) -> None:
        cap = self.reading_width()
        if self.viewport().width() > cap:
            if self.lineWrapColumnOrWidth() != cap:
                self.setLineWrapColumnOrWidth(cap)
            if self.lineWrapMode() != QTextEdit.LineWrapMode.FixedPixelWidth:
                self.setLineWrapMode(QTextEdit.LineWrapMode.FixedPixelWidth)
        elif self.lineWrapMode() != QTextEdit.LineWrapMode.WidgetWidth:
            # Narrower than the cap: the view's own width, never a sideways scroll.
            self.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if not self.document().isEmpty():
            return
        # Not setPlaceholderText: Qt clips its placeholder to one line, so in a
        # narrow column the hint lost its end ("…answers cite").
        painter = QPainter(self.viewport())
        painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
        painter.setFont(self.font())
        margin = round(self.document().documentMargin())
        area = self.viewport().rect().adjusted(margin, margin, -margin, -margin)
        area.setWidth(min(area.width(), self.reading_width() - 2 * margin))
        painter.drawText(area, Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap, self._hint)
        painter.end()
