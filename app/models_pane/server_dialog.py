"""Model → Use a model server…: an OpenAI-compatible server (vLLM, Ollama, llama.cpp's
server) writes the answers; retrieval, the index and the citations stay here.

The dialog says plainly what leaves the machine before anything does; its model list
and the choice go through the engine (which checks the server before saving), by the
flow the embeddings server's dialog shares (`ServerDialogFlow`). When an answer fails
while a server writes them, `ServerFallbackBar` offers the local model or extractive
answers; the question stays in the conversation to ask again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.bridge_plumbing import EngineOp, describe_error
from app.qt_compat import emit
from engine.wire import EngineSettings, EngineStatus

if TYPE_CHECKING:
    from app.engine_bridge import EngineBridge
    from engine.service.client import EngineClient

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


D = TypeVar("D", bound=ServerDialog)
P = TypeVar("P")  # what the dialog's `sig_use_requested` carries


class ServerDialogFlow(Generic[D, P]):
    """A server dialog through the engine, the same for the model server's and the
    embeddings server's: opened by `open_signal` with the server in use filled in (never
    its key: the engine does not give it), its "List the server's models" and its choice
    (`send(client, pick)`, headlined `what`) asked of the engine, never of the window,
    since the engine holds the stored key and checks the server before saving. On the
    engine's yes the dialog closes and the settings go out as `sig_model_changed`; a
    refusal is shown in the dialog. `on_settings` hears every settings the engine gives."""

    def __init__(
        self,
        *,
        bridge: EngineBridge,
        open_signal: Signal,
        parent: QWidget,
        make: Callable[[QWidget], D],
        what: str,
        send: Callable[[EngineClient, P], EngineSettings],
        on_settings: Callable[[EngineSettings], object] | None = None,
    ) -> None:
        self._bridge = bridge
        self._parent = parent
        self._make = make
        self._what = what
        self._send = send
        self._on_settings = on_settings
        self.settings: EngineSettings | None = None  # the engine's, once read
        self.dialog: D | None = None  # the one opened last (for tests)
        bridge.sig_connected.connect(
            lambda _status: bridge.run(
                EngineOp(
                    what="Reading the settings",
                    call=lambda c: c.settings(),
                    success=self._settings_changed,
                )
            )
        )
        bridge.sig_model_changed.connect(self._settings_changed)
        open_signal.connect(self._open)

    def _open(self) -> None:
        dialog = self._make(self._parent)
        self.dialog = dialog
        if self.settings is not None:
            dialog.show_settings(self.settings)
        dialog.sig_list_requested.connect(
            lambda url, key, ca: self._list_models(dialog, url=url, key=key, ca=ca)
        )
        dialog.sig_use_requested.connect(lambda pick: self._use(dialog, pick))
        dialog.open()

    def _list_models(self, dialog: D, *, url: str, key: str | None, ca: str | None) -> None:
        self._bridge.run(
            EngineOp(
                what="Listing the server's models",
                call=lambda c: c.server_models(url=url, api_key=key, ca_file=ca),
                success=dialog.show_models,
                failure=lambda e: dialog.show_error(describe_error(error=e)),
            )
        )

    def _use(self, dialog: D, pick: P) -> None:
        def done(settings: EngineSettings) -> None:
            self.settings = settings
            dialog.accept()
            emit(self._bridge.sig_model_changed, settings)
            # The model chooser's labels name the server (and a re-embedding under way).
            self._bridge.refresh_status()

        self._bridge.run(
            EngineOp(
                what=self._what,
                call=lambda c: self._send(c, pick),
                success=done,
                failure=lambda e: dialog.show_error(describe_error(error=e)),
            )
        )

    def _settings_changed(self, settings: EngineSettings) -> None:
        self.settings = settings
        if self._on_settings is not None:
            self._on_settings(settings)


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
