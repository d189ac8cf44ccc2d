"""The flow both server dialogs share (app/models_pane/server_flow.py), on its own: the
settings read once connected, the model list and the choice through the engine, the
dialog closed on its yes, a refusal shown in place."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from app.engine_bridge import EngineBridge
from app.models_pane.server_dialog import ServerChoice, ServerDialog
from app.models_pane.server_flow import ServerDialogFlow
from engine.errors import EngineRequestError
from engine.service.client import EngineClient
from engine.wire import EngineSettings
from tests.app.fake_client import FakeClient

URL = "http://gpu-box:8000"


class _Menu(QObject):
    sig_open = Signal()


def test_a_server_dialog_flow_asks_the_engine_and_closes_on_its_yes(qtbot: QtBot) -> None:
    client = FakeClient()
    client.set_model_server(url=URL, model="qwen2.5-7b")  # the engine's server in use
    bridge = EngineBridge(client_factory=lambda: client, health_interval_ms=60_000)
    parent = QWidget()
    qtbot.addWidget(parent)
    menu = _Menu()
    heard: list[EngineSettings] = []
    announced: list[EngineSettings] = []
    sent: list[ServerChoice] = []

    def send(engine: EngineClient, choice: ServerChoice) -> EngineSettings:
        sent.append(choice)
        return engine.settings()

    flow: ServerDialogFlow[ServerDialog, ServerChoice] = ServerDialogFlow(
        bridge=bridge,
        open_signal=menu.sig_open,
        parent=parent,
        make=lambda p: ServerDialog(parent=p),
        what="Trying the server",
        send=send,
        on_settings=heard.append,
    )
    bridge.sig_model_changed.connect(announced.append)
    bridge.connect_engine()
    qtbot.waitUntil(lambda: bool(heard), timeout=5000)  # read once connected
    assert heard[0].server_url == URL and flow.settings == heard[0]

    menu.sig_open.emit()
    dialog = flow.dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible, timeout=5000)
    assert dialog.url.text() == URL and dialog.model.currentText() == "qwen2.5-7b"
    qtbot.mouseClick(dialog.list_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.model.count() == 2, timeout=5000)
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5000)
    assert sent == [dialog.choice()] and announced == [heard[0]]
    assert heard == [heard[0], heard[0]]  # the announced settings are heard too

    client.fail["settings"] = EngineRequestError("the server refused", status=502)
    menu.sig_open.emit()
    again = flow.dialog
    assert again is not None and again is not dialog
    qtbot.waitUntil(again.isVisible, timeout=5000)
    qtbot.mouseClick(again.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(again.error.isVisible, timeout=5000)
    assert "the server refused" in again.error.text() and again.isVisible()
    bridge.close()
