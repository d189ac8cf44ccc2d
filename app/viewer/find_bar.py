"""Find in the viewer's page text: a field, Previous / Next, and "2 of 5".

Ctrl+F (or typing in the field) searches the page shown as text, case-insensitively,
wrapping at either end; Enter goes to the next match, Shift+Enter to the previous
one. The match found is the text's selection, so the passage's highlight stays."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent, QTextCursor, QTextDocument
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QTextEdit, QWidget

from app.qt_compat import emit


class FindField(QLineEdit):
    """Enter: next match; Shift+Enter: previous; Escape: clear."""

    sig_step = Signal(bool)  # backward

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            emit(self.sig_step, bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier))
            return
        if event.key() == Qt.Key.Key_Escape and self.text():
            self.clear()
            return
        super().keyPressEvent(event)


class FindBar(QWidget):
    """Searches `target` (a read-only QTextEdit). `before_search` runs first (the
    viewer shows the page as text, where the matches can be selected)."""

    sig_cleared = Signal()  # the words were cleared

    def __init__(self, *, target: QTextEdit, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("findBar")
        self._target = target
        self.before_search: Callable[[], None] | None = None
        self.field = FindField()
        self.field.setPlaceholderText("Find in this page (Ctrl+F)")
        self.field.setAccessibleName("Find in the page text")
        self.field.setClearButtonEnabled(True)
        self.previous_button = QPushButton("Previous")
        self.previous_button.setAccessibleName("Previous match")
        self.next_button = QPushButton("Next")
        self.next_button.setAccessibleName("Next match")
        self.count_label = QLabel("")
        self.count_label.setObjectName("quiet")
        self.count_label.setAccessibleName("Matches")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.field, 1)
        layout.addWidget(self.previous_button)
        layout.addWidget(self.next_button)
        layout.addWidget(self.count_label)
        self.field.textChanged.connect(lambda _text: self.find(backward=False, fresh=True))
        self.field.sig_step.connect(lambda backward: self.find(backward=backward))
        self.previous_button.clicked.connect(lambda: self.find(backward=True))
        self.next_button.clicked.connect(lambda: self.find(backward=False))
        self._update_buttons()

    def start(self) -> None:
        """Ctrl+F: into the field, its text selected to be typed over."""
        self.field.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.field.selectAll()

    def find(self, *, backward: bool, fresh: bool = False) -> bool:
        """Select the next (or previous) match, wrapping; False when there is none.
        `fresh`: the words changed, so the search starts over from the page's top."""
        words = self.field.text()
        self._update_buttons()
        if not words:  # cleared: no selection, and the viewer goes back to the passage
            self.count_label.setText("")
            cursor = self._target.textCursor()
            cursor.clearSelection()
            self._target.setTextCursor(cursor)
            emit(self.sig_cleared)
            return False
        if self.before_search is not None:
            self.before_search()
        flags = QTextDocument.FindFlag.FindBackward if backward else QTextDocument.FindFlag(0)
        if fresh:
            self._target.moveCursor(QTextCursor.MoveOperation.Start)
        found = self._target.find(words, flags)
        if not found:  # wrap round to the other end
            end = QTextCursor.MoveOperation.End if backward else QTextCursor.MoveOperation.Start
            self._target.moveCursor(end)
            found = self._target.find(words, flags)
        if found:  # a third of the way down, not at the very edge, as the passage is
            top = self._target.cursorRect().top()
            bar = self._target.verticalScrollBar()
            bar.setValue(bar.value() + top - self._target.viewport().height() // 3)
        self._count(words=words, found=found)
        return found

    def _count(self, *, words: str, found: bool) -> None:
        document = self._target.document()
        positions: list[int] = []
        cursor = document.find(words, 0)
        while not cursor.isNull():
            positions.append(cursor.selectionStart())
            cursor = document.find(words, cursor)
        if not found or not positions:
            self.count_label.setText("no match" if words else "")
            return
        here = self._target.textCursor().selectionStart()
        index = positions.index(here) + 1 if here in positions else 1
        self.count_label.setText(f"{index} of {len(positions)}")

    def _update_buttons(self) -> None:
        has = bool(self.field.text())
        self.previous_button.setEnabled(has)
        self.next_button.setEnabled(has)
