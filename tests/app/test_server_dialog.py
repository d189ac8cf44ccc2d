"""Model → Use a model server… in the window: the dialog says what leaves the machine,
lists the server's models through the engine, saves the choice, shows a refusal in
place; an answer that fails while a server writes them offers the local model or
extractive answers, the question kept."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.models_pane.server_dialog import SENT_NOTICE, ServerDialog
from engine.errors import EngineRequestError
from engine.wire import EngineSettings
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient

URL = "http://gpu-box:8000"


def _open_dialog(qtbot: QtBot, window: object) -> ServerDialog:
    window.model_chooser.server_action.trigger()  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: window.server_dialog() is not None, timeout=5000)  # type: ignore[attr-defined]
    dialog = window.server_dialog()  # type: ignore[attr-defined]
    qtbot.waitUntil(dialog.isVisible, timeout=5000)
    return dialog


def test_choosing_a_server_in_the_window(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = FakeClient()
    window = make_window(client)
    assert window.model_chooser.server_action in window.menuBar().actions()[1].menu().actions()
    dialog = _open_dialog(qtbot, window)
    assert dialog.notice.text() == SENT_NOTICE
    assert "sent to this server" in SENT_NOTICE
    assert not dialog.use_button.isEnabled()  # nothing to use yet

    qtbot.keyClicks(dialog.url, URL)
    qtbot.keyClicks(dialog.key, "sk-secret")
    assert dialog.key.echoMode() == dialog.key.EchoMode.Password
    qtbot.mouseClick(dialog.list_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.model.count() == 2, timeout=5000)
    assert client.called("server_models") == [{"url": URL, "api_key": "sk-secret", "ca_file": None}]
    dialog.model.setCurrentText("qwen2.5-7b")
    dialog.concurrency.setValue(16)
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5000)
    assert client.called("set_model_server") == [
        {
            "url": URL,
            "model": "qwen2.5-7b",
            "api_key": "sk-secret",
            "ca_file": None,
            "concurrency": 16,
        }
    ]
    qtbot.waitUntil(lambda: window.model_chooser.server_action.isChecked(), timeout=5000)
    assert URL in window.model_chooser.toolTip()
    assert "passages of your documents are sent there" in window.model_chooser.toolTip()


def test_a_refused_server_is_shown_in_the_dialog(qtbot: QtBot, make_window: MakeWindow) -> None:
    refusal = "the model server at http://gpu-box:8000 refused the API key (401)"
    client = FakeClient(fail={"set_model_server": EngineRequestError(refusal, status=502)})
    window = make_window(client)
    dialog = _open_dialog(qtbot, window)
    qtbot.keyClicks(dialog.url, URL)
    dialog.model.setCurrentText("qwen2.5-7b")
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.error.isVisible(), timeout=5000)
    assert "refused the API key" in dialog.error.text()
    assert dialog.isVisible()  # the person can fix the key and try again
    assert dialog.use_button.isEnabled()


def test_a_failed_answer_offers_the_local_model_or_extractive(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(model="/models/qwen-1.5b.gguf")
    window = make_window(client)
    client.set_model_server(url=URL, model="qwen2.5-7b")
    window.bridge.refresh_status()
    qtbot.waitUntil(lambda: window.model_chooser.server_action.isChecked(), timeout=5000)
    # The engine's settings keep the local model chosen before the server.
    window.bridge.sig_model_changed.emit(
        EngineSettings(model="/models/qwen-1.5b.gguf", server_url=URL, server_model="qwen2.5-7b")
    )
    client.fail["ask_stream"] = RuntimeError("the model server at http://gpu-box:8000 is busy")
    qtbot.keyClicks(window.chat.question, "When is the honey extracted?")
    qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)
    bar = window.server_fallback
    qtbot.waitUntil(bar.isVisible, timeout=5000)
    assert "is busy" in bar.label.text() and "Your question is kept" in bar.label.text()
    assert not bar.local_button.isHidden()
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=5000)
    assert window.chat.regenerate_button.isEnabled()  # the question is kept, to ask again
    qtbot.mouseClick(bar.extractive_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: client.called("set_model") == [{"model": None}], timeout=5000)
    assert not bar.isVisible()
