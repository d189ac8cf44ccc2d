"""A strip that says the engine is timing this machine (active profiling), with
its progress and a Skip button. Shown at the top of the main window while a run
is in progress; hidden otherwise."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.qt_compat import emit
from engine.wire import ProfilingStatus


class ProfilingBanner(QFrame):
    sig_skip = Signal()

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("profilingBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.label.setAccessibleName("Active profiling")
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(180)
        self.progress.setAccessibleName("Active profiling progress")
        self.skip_button = QPushButton("Skip")
        self.skip_button.setAccessibleName("Skip timing this machine and use the defaults")
        self.skip_button.setToolTip(
            "Use the planner's defaults instead. You can time the machine later with "
            "`ragdoll profile --active`."
        )
        self.skip_button.clicked.connect(self._skip)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.progress)
        layout.addWidget(self.skip_button)
        self.hide()

    def show_status(self, status: ProfilingStatus | None) -> None:
        if status is None or status.state != "running":
            self.hide()
            return
        why = f" ({status.reason})" if status.reason else ""
        self.label.setText(
            f"Timing this machine to balance search and generation{why}: {status.message}"
        )
        self.progress.setValue(round(100 * status.fraction))
        self.skip_button.setEnabled(True)
        self.show()

    def _skip(self) -> None:
        self.skip_button.setEnabled(False)  # one request; the next status hides the strip
        emit(self.sig_skip)
