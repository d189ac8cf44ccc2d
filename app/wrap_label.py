"""Text that a layout never cuts short: a word-wrapped label, a group box whose
title is elided to its width."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QGroupBox, QLabel, QSizePolicy, QWidget

# Before its first layout a label has no width to wrap at: assume a pane's.
_FIRST_WIDTH = 300


class WrapLabel(QLabel):
    """Word-wrapped, and as tall as its lines at the width it was given.

    Qt's layouts settle minimum heights without asking a wrapped label its height
    for width, so in a crowded pane the lines overlap or are cut. This label's
    minimum height follows its width, and it takes no width of its own: the text
    wraps in whatever the pane gives it rather than widen the pane."""

    def __init__(self, text: str = "", *, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)

    def _height(self) -> int:
        if not self.text():
            return 0
        width = self.width() if self.width() > 40 else _FIRST_WIDTH
        return self.heightForWidth(width)

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self._height())

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self._height())

    def setText(self, text: str) -> None:
        super().setText(text)
        self.updateGeometry()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()  # a new width: maybe another number of lines


class ElidedGroupBox(QGroupBox):
    """A group box whose title is cut with "…" to the width it is given (the whole
    title in its tooltip): a group box's title cannot wrap, and a long one would
    otherwise widen the pane or be clipped mid-word."""

    # Room the frame and the title's indent take from the box's width.
    _TITLE_MARGIN = 24

    def __init__(self, title: str = "", *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full_title = ""
        self.setTitle(title)

    def title(self) -> str:
        """The whole title (what is drawn may be cut: `shown_title`)."""
        return self._full_title

    def shown_title(self) -> str:
        return super().title()

    def setTitle(self, title: str) -> None:
        self._full_title = title
        self.setToolTip(title)
        self._elide()

    def _elide(self) -> None:
        width = max(self.width() - self._TITLE_MARGIN, 40)
        shown = self.fontMetrics().elidedText(self._full_title, Qt.TextElideMode.ElideRight, width)
        super().setTitle(shown)

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), 120), hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self._elide()
