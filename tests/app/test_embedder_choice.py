"""The window's embedder control: a folder chosen in the Model menu goes to the engine,
the re-embedding shows in the ingestion progress box, and the menu names the embedder."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from engine.rag.ingest.embedder_offer import embedder_offer
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient, request_error


def test_choosing_an_embedder_folder_re_embeds_with_progress(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(step_s=0.05)
    window = make_window(client, choose_embedder_folder=lambda parent: "/models/multilingual-e5")
    chooser = window.model_chooser
    assert chooser.embedder_label.text() == "Embedder: fake-embedder"
    titles: list[str] = []
    window.bridge.sig_ingest_progress.connect(
        lambda p: titles.append(window.library.progress_box.title())
    )

    chooser.choose_embedder_action.trigger()
    qtbot.waitUntil(lambda: bool(client.called("set_embedder")), timeout=5000)
    assert client.called("set_embedder") == [{"embedder": "/models/multilingual-e5"}]
    # The job is followed in the same box as ingestion, under its own title.
    qtbot.waitUntil(
        lambda: window.library.progress_box.title() == "Re-embedded: the new embedder is in use",
        timeout=5000,
    )
    assert "Re-embedding with the new embedder" in titles
    qtbot.waitUntil(
        lambda: chooser.embedder_label.text() == "Embedder: multilingual-e5", timeout=5000
    )
    assert not chooser.default_embedder_action.isChecked()

    chooser.default_embedder_action.trigger()  # back to the bundled one
    qtbot.waitUntil(lambda: len(client.called("set_embedder")) == 2, timeout=5000)
    assert client.called("set_embedder")[1] == {"embedder": "all-MiniLM-L6-v2"}
    qtbot.waitUntil(chooser.default_embedder_action.isChecked, timeout=5000)


def test_a_gguf_embedder_file_is_chosen_in_the_model_menu(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(step_s=0.05)
    window = make_window(
        client, choose_embedder_file=lambda parent: "/models/nomic-embed-text-v1.5.f16.gguf"
    )
    chooser = window.model_chooser
    assert chooser.choose_embedder_gguf_action in chooser.menu().actions()
    chooser.choose_embedder_gguf_action.trigger()
    qtbot.waitUntil(lambda: bool(client.called("set_embedder")), timeout=5000)
    assert client.called("set_embedder") == [{"embedder": "/models/nomic-embed-text-v1.5.f16.gguf"}]
    qtbot.waitUntil(
        lambda: chooser.embedder_label.text() == "Embedder: nomic-embed-text-v1.5.f16.gguf",
        timeout=5000,
    )


def test_a_refused_embedder_is_told_and_the_status_bar_comes_back(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(
        fail={"set_embedder": request_error("cut.gguf is not a readable GGUF file")}
    )
    window = make_window(client, choose_embedder_file=lambda parent: "/models/cut.gguf")
    qtbot.waitUntil(lambda: window.engine_label.text().startswith("Engine ready"), timeout=5000)
    window.model_chooser.choose_embedder_gguf_action.trigger()
    qtbot.waitUntil(lambda: "not a readable GGUF file" in window.banner.message, timeout=5000)
    assert window.engine_label.text().endswith("failed")
    dismiss = next(b for b in window.banner.findChildren(QPushButton) if b.text() == "Dismiss")
    qtbot.mouseClick(dismiss, Qt.MouseButton.LeftButton)
    assert window.banner.message == ""
    qtbot.waitUntil(lambda: window.engine_label.text().startswith("Engine ready"), timeout=5000)


def test_a_collection_not_in_english_is_offered_a_multilingual_embedder(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    """The engine's offer shows in the Model menu with its size; accepting it downloads
    the embedder from the hub (only then) and switches to the downloaded folder, which
    re-embeds the collection; the offer goes once the switch is made."""
    client = FakeClient(step_s=0.05)
    client.embedder_offer = embedder_offer(languages=["de", "fr"], embedder="all-MiniLM-L6-v2")
    window = make_window(client)
    chooser = window.model_chooser
    qtbot.waitUntil(chooser.offer_action.isVisible, timeout=5000)
    assert chooser.offer_action.text() == (
        "Documents in German and French: use multilingual-e5-small, "
        "a multilingual embedder (471 MB download)…"
    )
    assert not client.called("download_model")

    chooser.offer_action.trigger()
    qtbot.waitUntil(lambda: bool(client.called("set_embedder")), timeout=5000)
    assert client.called("download_model") == [
        {"repo_id": "intfloat/multilingual-e5-small", "file": None}
    ]
    assert client.called("set_embedder") == [
        {"embedder": "/models/intfloat--multilingual-e5-small"}
    ]
    qtbot.waitUntil(lambda: not chooser.offer_action.isVisible(), timeout=5000)


def test_questions_in_another_language_are_named_in_the_offer() -> None:
    """An English collection asked in German: the offer says whose language it is for."""
    from app.models_pane.model_chooser import offer_text

    offer = embedder_offer(languages=["en"], embedder="all-MiniLM-L6-v2", asked=["de"])
    assert offer_text(offer) == (
        "Questions in German: use multilingual-e5-small, a multilingual embedder (471 MB download)…"
    )


def test_an_offer_the_engine_makes_later_shows_without_any_other_change(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    """The engine offers the embedder once a question comes in another language: the
    window's probe shows it, though no document or job changed."""
    client = FakeClient(step_s=0.05)
    window = make_window(client)
    chooser = window.model_chooser
    qtbot.wait(300)
    assert not chooser.offer_action.isVisible()
    client.embedder_offer = embedder_offer(
        languages=["en"], embedder="all-MiniLM-L6-v2", asked=["de"]
    )
    qtbot.waitUntil(chooser.offer_action.isVisible, timeout=10_000)
    assert chooser.offer_action.text().startswith("Questions in German:")
    # In the window's Model menu too, where a person looks first.
    assert chooser.offer_action in window.menuBar().actions()[1].menu().actions()
