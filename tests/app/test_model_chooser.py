"""The "Model…" control asks for a GGUF file as well as a folder."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.models_pane.model_chooser import ModelChooser


def test_choosing_a_gguf_file_requests_that_file(qtbot: QtBot) -> None:
    chooser = ModelChooser(
        choose_folder=lambda parent: None,
        choose_file=lambda parent: "/models/qwen2.5-1.5b-instruct-q4_k_m.gguf",
    )
    qtbot.addWidget(chooser)
    assert chooser.choose_gguf_action in chooser.menu().actions()
    with qtbot.waitSignal(chooser.sig_model_requested) as requested:
        chooser.choose_gguf_action.trigger()
    assert requested.args == ["/models/qwen2.5-1.5b-instruct-q4_k_m.gguf"]


def test_cancelling_the_file_dialog_requests_nothing(qtbot: QtBot) -> None:
    chooser = ModelChooser(choose_folder=lambda parent: None, choose_file=lambda parent: None)
    qtbot.addWidget(chooser)
    with qtbot.assertNotEmitted(chooser.sig_model_requested):
        chooser.choose_gguf_action.trigger()
