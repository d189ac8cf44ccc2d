"""The model chooser's requests carried out through the engine bridge, and what
the window shows while a model loads, once it is in and when it failed. Loading
takes seconds: the chat waits (and says so) meanwhile."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QProgressBar

from app.chat.chat_pane import ChatPane
from app.engine_bridge import EngineBridge
from app.error_banner import ErrorBanner
from app.models_pane.model_chooser import ModelChooser
from engine.wire import EngineSettings


def model_in_use_text(settings: EngineSettings) -> str:
    """The status bar's line once a model (or none) is in force."""
    if settings.server_url:
        return (
            f"Answers from {settings.server_model} on {settings.server_url} "
            "(passages are sent there)"
        )
    # "auto" holds the weights as stored; a chosen format (int8, int4, bf16, f32) is
    # worth seeing, since it changes memory use and answers.
    weights = "" if settings.model_weights == "auto" else f" ({settings.model_weights})"
    return f"Model loaded: {settings.model}{weights}" if settings.model else "Extractive answers"


class ModelActions(QObject):
    def __init__(
        self,
        *,
        chooser: ModelChooser,
        bridge: EngineBridge,
        chat: ChatPane,
        banner: ErrorBanner,
        busy: QProgressBar,
        say: Callable[[str], None],
        parent: QObject | None = None,
    ) -> None:
        """`busy`: the status bar's working indicator; `say`: a line beside it."""
        super().__init__(parent)
        self._chooser = chooser
        self._bridge = bridge
        self._chat = chat
        self._banner = banner
        self._busy = busy
        self._say = say
        bridge.sig_model_busy.connect(self._loading)
        bridge.sig_model_changed.connect(self._changed)
        bridge.sig_model_failed.connect(self._failed)
        chooser.sig_model_requested.connect(self.set_model)
        chooser.sig_embedder_requested.connect(self._set_embedder)

    def set_model(self, model: str | None) -> None:
        self._bridge.set_model(model=model)

    def _set_embedder(self, embedder: str) -> None:
        self._bridge.set_embedder(embedder=embedder)

    def _loading(self, busy: bool) -> None:
        self._chooser.set_busy(busy)
        self._busy.setVisible(busy)
        if busy:
            self._say("Loading the model…")
            self._chat.set_ready(False)
        else:
            self._chat.set_ready(self._bridge.connected)

    def _changed(self, settings: EngineSettings) -> None:
        self._banner.hide()
        self._say(model_in_use_text(settings))

    def _failed(self, message: str) -> None:
        self._say("The model could not be loaded")
        self._banner.show_error(f"Could not load the model: {message}")
