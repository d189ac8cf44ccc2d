"""The error banner: a failure, in words, across the top of the main window."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.qt_compat import emit


class ErrorBanner(QFrame):
    """A failure, in words, across the top of the window until dismissed.

    A banner rather than a message box: it never blocks the event loop, it can
    hold several lines (a log path), and a second error replaces the first."""

    sig_retry = Signal()
    # Dismissed by the person: the status bar may go back to the engine's state.
    sig_dismissed = Signal()

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.label = QLabel()
        self.label.setObjectName("errorText")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setAccessibleName("Error")
        self.retry_button = QPushButton("Retry")
        self.retry_button.setAccessibleName("Retry starting the engine")
        self.retry_button.clicked.connect(self._retry)
        dismiss = QPushButton("Dismiss")
        dismiss.setAccessibleName("Dismiss the error")
        dismiss.clicked.connect(self._dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 8, 8)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.retry_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(dismiss, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    @property
    def message(self) -> str:
        return self.label.text() if self.isVisibleTo(self.parentWidget()) else ""

    def show_error(self, message: str, *, can_retry: bool = False) -> None:
        self.label.setText(message)
        self.retry_button.setVisible(can_retry)
        self.show()

    def _dismiss(self) -> None:
        self.hide()
        emit(self.sig_dismissed)

    def _retry(self) -> None:
        self.hide()
        emit(self.sig_retry)
