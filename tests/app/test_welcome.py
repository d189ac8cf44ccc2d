"""The first-start welcome, the remembered window layout, and the themes."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from app.theme import apply_theme, is_dark, style_sheet
from app.ui_state import welcome_seen
from app.welcome.welcome_dialog import WelcomeDialog
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient


def test_the_dialog_returns_the_samples_and_the_chosen_model(qtbot: QtBot) -> None:
    dialog = WelcomeDialog(choose_model_folder=lambda parent: "/models/tiny-llama")
    qtbot.addWidget(dialog)
    assert dialog.choice().add_samples and dialog.choice().model is None
    dialog.choose_button.click()
    assert dialog.generative.isChecked() and dialog.model_label.text() == "tiny-llama"
    dialog.samples.setChecked(False)
    choice = dialog.choice()
    assert not choice.add_samples and choice.model == "/models/tiny-llama"
    dialog.extractive.setChecked(True)
    assert dialog.choice().model is None


def test_a_gguf_file_can_be_chosen_in_the_welcome(qtbot: QtBot) -> None:
    dialog = WelcomeDialog(
        choose_model_folder=lambda parent: None,
        choose_model_file=lambda parent: "/home/me/Downloads/qwen2.5-1.5b-instruct-q4_k_m.gguf",
    )
    qtbot.addWidget(dialog)
    dialog.gguf_button.click()
    assert dialog.generative.isChecked()
    assert dialog.model_label.text() == "qwen2.5-1.5b-instruct-q4_k_m.gguf"
    assert dialog.choice().model == "/home/me/Downloads/qwen2.5-1.5b-instruct-q4_k_m.gguf"
    assert not dialog.gguf_button.autoDefault()  # Enter still means Get started


def test_a_model_already_in_use_is_shown_chosen_and_kept(qtbot: QtBot) -> None:
    dialog = WelcomeDialog(
        choose_model_folder=lambda parent: None,
        in_use="/home/me/models/qwen2.5-1.5b-instruct-q4_k_m.gguf",
    )
    qtbot.addWidget(dialog)
    assert dialog.generative.isChecked() and not dialog.extractive.isChecked()
    assert dialog.model_label.text() == "In use: qwen2.5-1.5b-instruct-q4_k_m.gguf"
    kept = dialog.choice()
    assert kept.model is None and not kept.open_models and not kept.model_off
    dialog.extractive.setChecked(True)
    off = dialog.choice()
    assert off.model_off and off.model is None and not off.open_models
    dialog.models_button.click()  # Recommended models: the list opens next
    wanted = dialog.choice()
    assert wanted.open_models and not wanted.model_off


def test_quoting_chosen_over_the_model_in_use_turns_it_off(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(model="/models/qwen.gguf")
    window = make_window(client, show_welcome=True)
    qtbot.waitUntil(lambda: window.welcome is not None and window.welcome.isVisible(), timeout=5000)
    welcome = window.welcome
    assert welcome is not None and welcome.model_label.text() == "In use: qwen.gguf"
    welcome.samples.setChecked(False)
    welcome.extractive.setChecked(True)
    welcome.start_button.click()
    qtbot.waitUntil(lambda: bool(client.called("set_model")), timeout=5000)
    assert client.called("set_model")[0]["model"] is None


def test_enter_presses_get_started_which_has_the_visible_focus(qtbot: QtBot) -> None:
    picked: list[str] = []
    dialog = WelcomeDialog(choose_model_folder=lambda parent: picked.append("picker") or None)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.activateWindow()
    qtbot.waitUntil(lambda: dialog.start_button.hasFocus(), timeout=3000)
    assert dialog.start_button.isDefault()
    focused = QApplication.focusWidget()
    assert focused is not None
    with qtbot.waitSignal(dialog.accepted, timeout=3000):
        qtbot.keyClick(focused, Qt.Key.Key_Return)
    assert picked == []  # never the model-folder picker

    # With the focus on the model-folder button, Enter still means Get started.
    again = WelcomeDialog(choose_model_folder=lambda parent: picked.append("picker") or None)
    qtbot.addWidget(again)
    again.show()
    qtbot.waitExposed(again)
    again.choose_button.setFocus()
    with qtbot.waitSignal(again.accepted, timeout=3000):
        qtbot.keyClick(again.choose_button, Qt.Key.Key_Return)
    assert picked == []


def test_the_model_choice_points_to_recommended_models_with_sizes(qtbot: QtBot) -> None:
    dialog = WelcomeDialog(choose_model_folder=lambda parent: None)
    qtbot.addWidget(dialog)
    hint = dialog.model_hint.text()
    assert "Recommended models" in hint and " GB)" in hint
    # What answers look like without a model, said before choosing.
    assert any("word for word" in label.text() for label in dialog.findChildren(QLabel))
    dialog.models_button.click()
    choice = dialog.choice()
    assert dialog.generative.isChecked() and choice.open_models and choice.model is None


def test_opening_a_folder_does_not_offer_the_samples(qtbot: QtBot, make_window: MakeWindow) -> None:
    """`ragdoll open PATH` (the file manager): the welcome says the folder is being
    added and the sample collection is not ticked."""
    from app.commands.desktop import add_on_connect

    client = FakeClient()
    window = make_window(client, show_welcome=False, wait_connected=False)
    add_on_connect(window=window, paths=["/docs/manuals"], choose_folder=False, samples=False)
    welcome = window.show_welcome()
    assert not welcome.samples.isChecked()
    assert "manuals" in welcome.opening_label.text()


def test_a_model_without_a_folder_opens_recommended_models(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window(FakeClient())
    welcome = window.show_welcome()
    welcome.samples.setChecked(False)
    welcome.generative.setChecked(True)
    welcome.start_button.click()
    qtbot.waitUntil(lambda: window.models_dialog.isVisible(), timeout=5000)


def test_the_welcome_shows_once_and_its_choices_are_carried_out(
    qtbot: QtBot, make_window: MakeWindow, ragdoll_home: Path
) -> None:
    client = FakeClient()
    window = make_window(
        client, show_welcome=True, choose_model_folder=lambda parent: "/models/tiny"
    )
    qtbot.waitUntil(lambda: window.welcome is not None and window.welcome.isVisible(), timeout=5000)
    welcome = window.welcome
    assert welcome is not None
    welcome.choose_button.click()
    welcome.start_button.click()
    qtbot.waitUntil(
        lambda: bool(client.called("ingest")) and bool(client.called("set_model")), timeout=5000
    )
    assert client.called("ingest")[0]["paths"][0].endswith("samples")
    assert client.called("set_model")[0]["model"] == "/models/tiny"
    assert welcome_seen()

    again = make_window(FakeClient(), show_welcome=True)
    qtbot.wait(200)
    assert again.welcome is None


def test_window_geometry_and_splitters_are_remembered(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window(FakeClient())
    # Within the offscreen screen (800 × 600) and above the window's minimum width,
    # which the library's and the answer column's minimums make.
    window.resize(790, 560)
    window.splitter.setSizes([225, 560])
    qtbot.wait(50)
    sizes = window.splitter.sizes()
    window.close()
    again = make_window(FakeClient())
    assert (again.width(), again.height()) == (790, 560)
    assert again.splitter.sizes() == sizes


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_each_theme_has_its_style_sheet_and_palette(qtbot: QtBot, scheme: str) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    try:
        apply_theme(app, scheme=scheme)  # type: ignore[arg-type]
        assert is_dark() == (scheme == "dark")
        assert app.styleSheet() == style_sheet(scheme=scheme)  # type: ignore[arg-type]
        assert "QTextBrowser#transcript" in app.styleSheet()
        assert "@STYLES@" not in app.styleSheet()  # icon urls point into the package
        window_colour = app.palette().window().color().lightness()
        assert (window_colour < 100) == (scheme == "dark")
    finally:
        apply_theme(app, scheme="light")
        app.setStyleSheet("")
        app.setPalette(app.style().standardPalette())


def test_in_the_dark_theme_a_disabled_ask_looks_disabled(qtbot: QtBot) -> None:
    """Not a dimmer blue that reads as enabled: the grey of any disabled button."""
    from PySide6.QtWidgets import QPushButton

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    try:
        apply_theme(app, scheme="dark")
        ask, other = QPushButton("Ask"), QPushButton("Other")
        ask.setObjectName("askButton")
        for b in (ask, other):
            qtbot.addWidget(b)
            b.resize(90, 32)
            b.setEnabled(False)
            b.show()
        qtbot.waitExposed(ask)

        def fill(button: QPushButton) -> tuple[int, int, int]:
            c = button.grab().toImage().pixelColor(12, 16)
            return (c.red(), c.green(), c.blue())

        disabled = fill(ask)
        assert disabled == fill(other)
        ask.setEnabled(True)
        enabled = fill(ask)
        assert enabled[2] > enabled[0] + 80 and disabled[2] < disabled[0] + 40  # blue vs grey
    finally:
        apply_theme(app, scheme="light")
        app.setStyleSheet("")
        app.setPalette(app.style().standardPalette())
