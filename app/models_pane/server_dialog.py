"""Model → Use a model server…: an OpenAI-compatible server (vLLM, Ollama, llama.cpp's
server) writes the answers; retrieval, the index and the citations stay here.

The dialog's form: it says plainly what leaves the machine before anything does, and
asks for the server, its model, a key and a CA file. Its model list and the choice go
through the engine by the flow both server dialogs share (server_flow.py); the model
server's wiring and its fallback bar are model_server.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.qt_compat import emit
from engine.wire import EngineSettings

if TYPE_CHECKING:
    pass

SENT_NOTICE = (
    "Passages of your documents, your questions and the conversation's earlier turns "
    "are sent to this server to write each answer. Your index and files stay on this "
    "machine. Use only a server you trust (your own, or your team's)."
)
DEFAULT_CONCURRENCY = EngineSettings().server_concurrency


@dataclass(frozen=True, kw_only=True)
class ServerChoice:
    """What the person filled in (the key, when typed, is sent once to the engine,
    which keeps it in a file only they can read)."""

    url: str
    model: str
    api_key: str | None
    ca_file: str | None
    concurrency: int


class ServerDialog(QDialog):
    """Emits `sig_list_requested(url, key, ca_file)` and `sig_use_requested(ServerChoice)`;
    the owner answers with `show_models`, `show_error` or `accept`."""

    sig_list_requested = Signal(str, object, object)  # url, key or None, CA file or None
    sig_use_requested = Signal(object)  # ServerChoice

    def __init__(
        self,
        *,
        choose_ca_file: Callable[[QWidget], str | None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Use a model server")
        self.setObjectName("serverDialog")
        self._choose_ca_file = choose_ca_file or _ca_file_dialog
        self.url = QLineEdit()
        self.url.setPlaceholderText("http://gpu-box:8000 (vLLM), http://localhost:11434 (Ollama)")
        self.url.setAccessibleName("Server address")
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional; kept in a file only you can read")
        self.key.setAccessibleName("API key")
        self.ca_file = QLineEdit()
        self.ca_file.setPlaceholderText("optional: a private CA's certificates (PEM)")
        self.ca_file.setAccessibleName("CA file")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_ca)
        ca_row = QHBoxLayout()
        ca_row.addWidget(self.ca_file, 1)
        ca_row.addWidget(browse)
        self.model = QComboBox()
        self.model.setEditable(True)
        self.model.setAccessibleName("Model")
        self.list_button = QPushButton("List the server's models")
        self.list_button.clicked.connect(self._list)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model, 1)
        model_row.addWidget(self.list_button)
        self.concurrency = QSpinBox()
        self.concurrency.setRange(1, 256)
        self.concurrency.setValue(DEFAULT_CONCURRENCY)
        self.concurrency.setAccessibleName("Requests at once")
        self.concurrency.setToolTip("Questions sent at once; the server batches them")
        self.notice = QLabel(SENT_NOTICE)
        self.notice.setObjectName("serverNotice")
        self.notice.setWordWrap(True)
        self.error = QLabel()
        self.error.setObjectName("errorText")
        self.error.setWordWrap(True)
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.hide()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.use_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.use_button.setText("Send passages to this server")
        self.buttons.accepted.connect(self._use)
        self.buttons.rejected.connect(self.reject)
        self.form = form = QFormLayout()
        form.addRow("Server", self.url)
        form.addRow("API key", self.key)
        form.addRow("CA file", ca_row)
        form.addRow("Model", model_row)
        form.addRow("Requests at once", self.concurrency)
        layout = QVBoxLayout(self)
        layout.addWidget(self.notice)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        self.url.textChanged.connect(self._update)
        self.model.currentTextChanged.connect(self._update)
        self._update()

    def show_settings(self, settings: EngineSettings) -> None:
        """Fill in the server in use (never its key: the engine does not give it)."""
        if settings.server_url:
            self.url.setText(settings.server_url)
            self.model.setCurrentText(settings.server_model or "")
            self.ca_file.setText(settings.server_ca_file or "")
            self.concurrency.setValue(settings.server_concurrency)
            self.key.setPlaceholderText("leave empty to keep the stored key")

    def show_models(self, models: list[str]) -> None:
        current = self.model.currentText()
        self.model.clear()
        self.model.addItems(models)
        if current in models:
            self.model.setCurrentText(current)
        self.error.setVisible(not models)
        self.error.setText("" if models else "The server lists no models.")
        self._busy(False)

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        self.error.show()
        self._busy(False)

    def choice(self) -> ServerChoice:
        return ServerChoice(
            url=self.url.text().strip(),
            model=self.model.currentText().strip(),
            api_key=self.key.text().strip() or None,
            ca_file=self.ca_file.text().strip() or None,
            concurrency=self.concurrency.value(),
        )

    def _list(self) -> None:
        choice = self.choice()
        if choice.url:
            self._busy(True)
            emit(self.sig_list_requested, choice.url, choice.api_key, choice.ca_file)

    def _use(self) -> None:
        choice = self.choice()
        if choice.url and choice.model:
            self._busy(True)
            self.error.hide()
            emit(self.sig_use_requested, choice)

    def _browse_ca(self) -> None:
        path = self._choose_ca_file(self)
        if path:
            self.ca_file.setText(path)

    def _busy(self, busy: bool) -> None:
        self.list_button.setEnabled(not busy and bool(self.url.text().strip()))
        self.use_button.setEnabled(
            not busy and bool(self.url.text().strip() and self.model.currentText().strip())
        )

    def _update(self) -> None:
        self._busy(False)


def _ca_file_dialog(parent: QWidget) -> str | None:
    path, _ = QFileDialog.getOpenFileName(
        parent, "The server's CA certificates", "", "Certificates (*.pem *.crt);;All files (*)"
    )
    return path or None
