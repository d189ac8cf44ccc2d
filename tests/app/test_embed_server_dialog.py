"""Model → Use an embeddings server… in the window: the dialog says plainly that the
text of the documents is sent there, lists the server's models through the engine,
sends the choice (with its batch) through the engine, shows a refusal in place; the
embedder's menu label names the server and that the documents' text goes to it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.models_pane.embed_server_dialog import EMBED_SENT_NOTICE, EmbedServerDialog
from app.models_pane.model_chooser import embedder_text
from engine.errors import EngineRequestError
from engine.wire import EmbedServerInfo, EngineSettings, EngineStatus
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient

URL = "http://gpu-box:8080"


def _open_dialog(qtbot: QtBot, window: object) -> EmbedServerDialog:
    window.model_chooser.embed_server_action.trigger()  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: window.embed_server_dialog() is not None, timeout=5000)  # type: ignore[attr-defined]
    dialog = window.embed_server_dialog()  # type: ignore[attr-defined]
    qtbot.waitUntil(dialog.isVisible, timeout=5000)
    return dialog


def test_choosing_an_embeddings_server_in_the_window(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = FakeClient()
    window = make_window(client)
    menu = window.model_chooser.menu()
    assert window.model_chooser.embed_server_action in menu.actions()
    dialog = _open_dialog(qtbot, window)
    assert dialog.windowTitle() == "Use an embeddings server"
    assert dialog.notice.text() == EMBED_SENT_NOTICE
    assert "The text of your documents" in EMBED_SENT_NOTICE and "sent to this server" in (
        EMBED_SENT_NOTICE
    )
    assert dialog.form.labelForField(dialog.batch).text() == "Texts a request"  # type: ignore[union-attr]
    assert not dialog.use_button.isEnabled()

    qtbot.keyClicks(dialog.url, URL)
    qtbot.keyClicks(dialog.key, "sk-embed-secret")
    assert dialog.key.echoMode() == dialog.key.EchoMode.Password
    qtbot.mouseClick(dialog.list_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.model.count() == 2, timeout=5000)
    dialog.model.setCurrentText("nomic-embed-text")
    dialog.batch.setValue(16)
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5000)
    assert client.called("set_embedder_server") == [
        {
            "url": URL,
            "model": "nomic-embed-text",
            "api_key": "sk-embed-secret",
            "ca_file": None,
            "batch": 16,
            "timeout_s": None,
        }
    ]
    chooser = window.model_chooser
    qtbot.waitUntil(lambda: chooser.embed_server_action.isChecked(), timeout=5000)
    label = chooser.embedder_label.text()
    assert f"nomic-embed-text on {URL}" in label  # the fake switches at once
    assert "your documents' text is sent to that server" in label

    # Opened again, it shows the server chosen (never the key).
    dialog = _open_dialog(qtbot, window)
    qtbot.waitUntil(lambda: dialog.url.text() == URL, timeout=5000)
    assert dialog.model.currentText() == "nomic-embed-text" and dialog.batch.value() == 16
    assert dialog.key.text() == ""


def test_a_refused_embeddings_server_is_shown_in_the_dialog(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    refusal = f"the embeddings server at {URL} has no model 'nope' (404)"
    client = FakeClient(fail={"set_embedder_server": EngineRequestError(refusal, status=502)})
    window = make_window(client)
    dialog = _open_dialog(qtbot, window)
    qtbot.keyClicks(dialog.url, URL)
    dialog.model.setCurrentText("nope")
    qtbot.mouseClick(dialog.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.error.isVisible(), timeout=5000)
    assert "has no model 'nope'" in dialog.error.text()
    assert dialog.isVisible() and dialog.use_button.isEnabled()
    assert client.settings().embedder == EngineSettings().embedder


def test_the_menu_names_a_switch_to_a_server_and_what_is_sent() -> None:
    status = EngineStatus(
        version="0",
        pid=1,
        documents=1,
        chunks=3,
        embedder=f"server:nomic-embed-text@{URL}",
        model=None,
        answer_mode="extractive",
        embedder_in_force="all-MiniLM-L6-v2",
        embed_server=EmbedServerInfo(url=URL, model="nomic-embed-text", batch=32, in_force=False),
    )
    assert embedder_text(status) == (
        f"Embedder: all-MiniLM-L6-v2 (re-embedding with nomic-embed-text on {URL})"
        " — your documents' text is sent to that server"
    )
