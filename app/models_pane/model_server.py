"""Model → Use a model server… wired to the engine: the dialog through the shared flow,
and, when an answer fails while a server writes them, `ServerFallbackBar` offering the
local model or extractive answers; the question stays in the conversation to ask again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.models_pane.server_dialog import ServerChoice, ServerDialog
from app.models_pane.server_flow import ServerDialogFlow
from app.qt_compat import emit
from engine.wire import EngineSettings, EngineStatus

if TYPE_CHECKING:
    from app.engine_bridge import EngineBridge


class ServerFallbackBar(QFrame):
    """Shown when an answer from the model server failed: the reason, and the ways to
    go on (the local model, when one was chosen before; extractive answers)."""

    sig_local = Signal()
    sig_extractive = Signal()

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.label = QLabel()
        self.label.setObjectName("errorText")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.local_button = QPushButton("Use the local model")
        self.local_button.clicked.connect(lambda: self._chose(self.sig_local))
        self.extractive_button = QPushButton("Extractive answers")
        self.extractive_button.clicked.connect(lambda: self._chose(self.sig_extractive))
        dismiss = QPushButton("Keep the server")
        dismiss.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 8, 8, 8)
        layout.addWidget(self.label, 1)
        for button in (self.local_button, self.extractive_button, dismiss):
            layout.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def offer(self, *, message: str, local_model: str | None) -> None:
        self.label.setText(
            f"The model server could not answer: {message}\n"
            "Your question is kept in the conversation: ask it again (Regenerate) once "
            "the server answers, or go on without it."
        )
        self.local_button.setVisible(bool(local_model))
        self.local_button.setToolTip(local_model or "")
        self.show()

    def _chose(self, signal: Signal) -> None:
        self.hide()
        emit(signal)


def attach_server_dialog(
    *,
    bridge: EngineBridge,
    open_signal: Signal,
    answer_failed: Signal,
    bar: ServerFallbackBar,
    parent: QWidget,
    dialog_factory: Callable[[QWidget], ServerDialog] | None = None,
) -> Callable[[], ServerDialog | None]:
    """Wire the dialog (opened by `open_signal`) and the fallback bar (shown on
    `answer_failed(message)` while a server writes the answers) to the engine.
    Returns the dialog open now, if any (for tests)."""

    def settings_changed(settings: EngineSettings) -> None:
        if not settings.server_url:
            bar.hide()

    flow: ServerDialogFlow[ServerDialog, ServerChoice] = ServerDialogFlow(
        bridge=bridge,
        open_signal=open_signal,
        parent=parent,
        make=dialog_factory or (lambda p: ServerDialog(parent=p)),
        what="Using the model server",
        send=lambda c, choice: c.set_model_server(
            url=choice.url,
            model=choice.model,
            api_key=choice.api_key,
            ca_file=choice.ca_file,
            concurrency=choice.concurrency,
        ),
        on_settings=settings_changed,
    )
    state: dict[str, EngineStatus | None] = {"status": None}

    def remember(status: EngineStatus) -> None:
        state["status"] = status

    def local_model() -> str | None:
        return flow.settings.model if flow.settings is not None else None

    def failed(message: str) -> None:
        status = state["status"]
        if status is not None and status.server is not None:
            bar.offer(message=message, local_model=local_model())

    answer_failed.connect(failed)
    bridge.sig_status.connect(remember)
    bridge.sig_connected.connect(remember)
    bar.sig_local.connect(lambda: bridge.set_model(model=local_model()))
    bar.sig_extractive.connect(lambda: bridge.set_model(model=None))
    return lambda: flow.dialog
