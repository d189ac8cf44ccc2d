"""The window on a fake engine: every flow a person uses, and failures shown, not crashed."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.chat.answer_render import chunk_id_from_href, citation_href
from app.main_window import MainWindow
from app.qt_compat import emit
from app.viewer.source_viewer import HIGHLIGHT
from engine.errors import EngineUnavailableError
from engine.paths import resolve_paths
from tests.app.conftest import MakeWindow
from tests.app.fake_client import (
    ANSWER,
    CITATIONS,
    INGEST_ERROR,
    PASSAGE,
    PASSAGE_START,
    FakeClient,
    request_error,
)


def ask(qtbot: QtBot, window: MainWindow, question: str = "What do tomatoes need?") -> None:
    qtbot.keyClicks(window.chat.question, question)
    qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)


def ask_and_wait(qtbot: QtBot, window: MainWindow) -> None:
    ask(qtbot, window)
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=5000)


def anchors(document: QTextDocument) -> list[str]:
    """The link targets in a document, in order, each once."""
    found: list[str] = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            if fmt.isAnchor() and fmt.anchorHref() not in found:
                found.append(fmt.anchorHref())
            it += 1
        block = block.next()
    return found


def click_source(qtbot: QtBot, window: MainWindow, row: int) -> None:
    view = window.chat.sources
    rect = view.visualRect(window.chat.sources_model.index(row, 0))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def test_window_opens_and_connects(make_window: MakeWindow) -> None:
    window = make_window(FakeClient())
    assert window.windowTitle() == "RAGDoll"
    # 1200 wide, or the whole of a smaller screen (the offscreen one is 800 × 600).
    free = window.screen().availableGeometry()
    assert window.width() >= min(1000, free.width() - 10)
    assert window.width() <= free.width() and window.height() <= free.height()
    assert "Engine ready" in window.engine_label.text()
    assert window.mode_label.text() == "Answers: extractive (no model)"
    assert window.library.add_folder_button.isEnabled()
    assert window.library.empty_label.isVisible()


def test_window_appears_before_the_engine_answers(qtbot: QtBot, make_window: MakeWindow) -> None:
    window = make_window(FakeClient(delay_s=0.5), wait_connected=False)
    qtbot.waitUntil(lambda: window.engine_label.text() == "Starting engine…", timeout=1000)
    assert window.isVisible()
    assert not window.chat.ask_button.isEnabled()
    assert not window.library.add_folder_button.isEnabled()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=5000)
    qtbot.keyClicks(window.chat.question, "hello")
    assert window.chat.ask_button.isEnabled()


def test_engine_that_cannot_start_is_reported_with_its_log(
    qtbot: QtBot, ragdoll_home: Path
) -> None:
    attempts: list[int] = []
    client = FakeClient()

    def factory() -> FakeClient:
        attempts.append(1)
        if len(attempts) == 1:
            raise EngineUnavailableError("the engine stopped while starting (exit code 1)")
        return client

    window = MainWindow(client_factory=factory)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.banner.isVisible(), timeout=5000)
    message = window.banner.label.text()
    assert "exit code 1" in message
    assert str(resolve_paths().engine_log) in message
    assert window.engine_label.text() == "Engine not running"

    qtbot.mouseClick(window.banner.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=5000)
    assert not window.banner.isVisible()


def test_adding_a_folder_shows_progress_documents_and_errors(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient()
    window = make_window(client, choose_folder=lambda parent: "/docs")
    seen: list[str] = []
    window.bridge.sig_ingest_progress.connect(
        lambda p: seen.append(
            f"{p.files_done}/{p.files_total} {window.library.current_label.text()}"
        )
    )

    qtbot.mouseClick(window.library.add_folder_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.library.documents_model.rowCount() == 2, timeout=5000)

    assert client.called("ingest") == [{"paths": ["/docs"]}]
    assert "1/3 Working on broken.pdf" in seen
    lib = window.library
    assert not lib.ingesting
    assert lib.progress_bar.value() == lib.progress_bar.maximum()  # the work, all done
    assert lib.progress_bar.text() == "3 of 3 files"
    assert "7 chunks added" in lib.counts_label.text()
    assert "1 could not be read" in lib.counts_label.text()
    assert lib.errors_model.errors() == [INGEST_ERROR]
    shown = lib.errors_model.index(0, 0).data()
    assert shown == "broken.pdf — the PDF is encrypted\n/docs"
    assert lib.errors_view.isVisible()
    assert lib.documents_label.text() == "Documents (2 · 7 chunks)"
    qtbot.waitUntil(lambda: "2 documents, 7 chunks" in window.engine_label.text(), timeout=5000)


def test_the_sample_collection_is_one_click(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = FakeClient()
    window = make_window(client)
    qtbot.mouseClick(window.library.add_samples_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(client.called("ingest")), timeout=5000)
    (path,) = client.called("ingest")[0]["paths"]  # type: ignore[misc]
    assert Path(path).name == "samples"


def test_an_answer_streams_in_with_clickable_citations(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(token_delay_s=0.05)
    window = make_window(client)
    tokens: list[str] = []
    window.chat.sig_ask.connect(lambda stream: stream.sig_token.connect(tokens.append))

    ask(qtbot, window)
    assert window.chat.streaming
    assert not window.chat.ask_button.isEnabled()
    assert window.chat.stop_button.isVisible()
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=5000)

    assert len(tokens) == len(client.tokens)
    assert client.called("ask_stream")[0]["question"] == "What do tomatoes need?"
    transcript = window.chat.transcript
    text = transcript.toPlainText()
    assert "What do tomatoes need?" in text
    assert ANSWER in text
    assert "No language model is installed" in text
    links = anchors(transcript.document())
    assert [chunk_id_from_href(href=h) for h in links] == [c.chunk_id for c in CITATIONS]
    assert window.chat.sources_model.rowCount() == 2
    assert window.chat.sources_label.text() == "Sources (2)"
    assert not window.chat.stop_button.isVisible()
    qtbot.keyClicks(window.chat.question, "again")
    assert window.chat.ask_button.isEnabled()


def test_clicking_a_source_shows_the_page_with_the_passage_highlighted(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient()
    window = make_window(client)
    ask_and_wait(qtbot, window)

    click_source(qtbot, window, row=0)
    viewer = window.viewer
    qtbot.waitUntil(viewer.isVisible, timeout=5000)
    assert client.called("source") == [{"chunk_id": CITATIONS[0].chunk_id}]
    assert viewer.windowTitle() == "garden guide.pdf — page 2"
    assert "page 2 of 4" in viewer.path_label.text()

    (selection,) = viewer.text.extraSelections()
    assert selection.cursor.selectionStart() == PASSAGE_START
    assert selection.cursor.selectedText() == PASSAGE
    assert selection.format.background().color() == HIGHLIGHT
    # Scrolled so the passage is on screen.
    rect = viewer.text.cursorRect(selection.cursor)
    assert viewer.text.viewport().rect().intersects(rect)
    # The status line does not keep saying "Opening the source…".
    qtbot.waitUntil(lambda: "Opening" not in window.engine_label.text(), timeout=5000)


def test_a_marker_in_the_answer_opens_its_source(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = FakeClient()
    window = make_window(client)
    ask_and_wait(qtbot, window)
    emit(window.chat.transcript.anchorClicked, QUrl(citation_href(chunk_id="doc-b#3")))
    qtbot.waitUntil(window.viewer.isVisible, timeout=5000)
    assert window.viewer.windowTitle() == "notes.md"
    (selection,) = window.viewer.text.extraSelections()
    assert selection.cursor.selectionStart() == 0


def test_stop_keeps_what_arrived_and_ignores_the_rest(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(token_delay_s=0.3)
    window = make_window(client)
    ask(qtbot, window)
    qtbot.waitUntil(lambda: bool(window.chat.answer_text), timeout=5000)
    qtbot.keyClick(window.chat.question, Qt.Key.Key_Escape)

    assert not window.chat.streaming
    assert window.chat.answer_stream is not None
    assert window.chat.answer_stream.state == "stopped"
    cut = window.chat.answer_text
    assert f"{cut.rstrip()} (stopped)" in window.chat.transcript.toPlainText()
    assert cut != ANSWER
    # The reader closes the engine's stream at its next event: the engine stops writing.
    qtbot.waitUntil(lambda: bool(client.called("ask_stream_closed")), timeout=5000)
    qtbot.wait(1200)  # the stream would have finished by now
    assert window.chat.answer_text == cut
    assert "No language model" not in window.chat.transcript.toPlainText()
    qtbot.keyClicks(window.chat.question, "next")
    assert window.chat.ask_button.isEnabled()


def test_choosing_a_model_folder_and_going_back_to_extractive(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(delay_s=0.2)
    window = make_window(client, choose_model_folder=lambda parent: "/models/qwen2-0.5b")
    window.model_chooser.choose_action.trigger()
    qtbot.waitUntil(lambda: not window.model_chooser.isEnabled(), timeout=1000)
    assert window.model_chooser.text() == "Loading model…"
    qtbot.waitUntil(window.model_chooser.isEnabled, timeout=5000)
    assert client.called("set_model") == [{"model": "/models/qwen2-0.5b"}]
    qtbot.waitUntil(lambda: "qwen2-0.5b" in window.mode_label.text(), timeout=5000)

    window.model_chooser.extractive_action.trigger()
    qtbot.waitUntil(lambda: len(client.called("set_model")) == 2, timeout=5000)
    assert client.called("set_model")[1] == {"model": None}
    qtbot.waitUntil(lambda: "extractive" in window.mode_label.text(), timeout=5000)


def test_a_model_that_fails_to_load_is_reported(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = FakeClient(fail={"set_model": request_error("config.json names no causal LM")})
    window = make_window(client, choose_model_folder=lambda parent: "/models/broken")
    window.model_chooser.choose_action.trigger()
    qtbot.waitUntil(window.banner.isVisible, timeout=5000)
    assert "Could not load the model: config.json names no causal LM" in window.banner.label.text()
    assert window.model_chooser.isEnabled()
    assert window.model_chooser.text() == "Model…"


def test_a_failing_engine_call_is_shown_not_swallowed(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(fail={"source": RuntimeError("the chunk store is corrupt")})
    window = make_window(client)
    ask_and_wait(qtbot, window)
    errors: list[tuple[str, str]] = []
    window.bridge.sig_error.connect(lambda what, why: errors.append((what, why)))
    click_source(qtbot, window, row=1)
    qtbot.waitUntil(window.banner.isVisible, timeout=5000)
    assert errors == [("Opening the source", "RuntimeError: the chunk store is corrupt")]
    assert "the chunk store is corrupt" in window.banner.label.text()
    assert not window.viewer.isVisible()


def test_a_failing_ask_ends_the_answer_with_the_reason(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(fail={"ask_stream": EngineUnavailableError("connection refused")})
    window = make_window(client)
    ask_and_wait(qtbot, window)
    assert "connection refused" in window.chat.transcript.toPlainText()
    qtbot.keyClicks(window.chat.question, "again")
    assert window.chat.ask_button.isEnabled()


def test_quitting_stops_an_engine_this_window_started(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(started_here=True)
    window = make_window(client)
    window.close()
    assert client.called("shutdown") == [{}]
    assert client.called("close") == [{}]


def test_quitting_leaves_an_engine_someone_else_started(make_window: MakeWindow) -> None:
    client = FakeClient(started_here=False)
    window = make_window(client)
    window.close()
    assert client.called("shutdown") == []
    assert QApplication.instance() is not None


def test_active_profiling_shows_progress_and_can_be_skipped(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    from engine.wire import ProfilingStatus

    client = FakeClient(
        profiling=ProfilingStatus(
            state="running", message="timing retrieval", fraction=0.5, reason="first start"
        )
    )
    window = make_window(client)
    qtbot.waitUntil(lambda: window.profiling_banner.isVisible(), timeout=5000)
    assert window.profiling_banner.progress.value() == 50
    window.profiling_banner.skip_button.click()
    qtbot.waitUntil(lambda: bool(client.called("skip_profiling")), timeout=5000)
    qtbot.waitUntil(lambda: not window.profiling_banner.isVisible(), timeout=5000)


def test_the_model_menu_opens_the_recommended_models(qtbot: QtBot, make_window: MakeWindow) -> None:
    window = make_window(FakeClient())
    action = window.model_chooser.models_action
    assert action.isVisible()
    action.trigger()
    qtbot.waitUntil(window.models_dialog.isVisible, timeout=5000)


def test_a_chosen_weight_format_is_shown_with_the_model(make_window: MakeWindow) -> None:
    from engine.wire import EngineSettings

    window = make_window(FakeClient())
    window.bridge.sig_model_changed.emit(EngineSettings(model="/m/qwen", model_weights="int4"))
    assert window.engine_label.text() == "Model loaded: /m/qwen (int4)"
    window.bridge.sig_model_changed.emit(EngineSettings(model="/m/qwen"))
    assert window.engine_label.text() == "Model loaded: /m/qwen"


def test_the_model_can_be_asked_to_rank_the_sources(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = FakeClient()
    window = make_window(client)
    rank = window.model_chooser.rank_action
    assert rank in window.menuBar().actions()[1].menu().actions()  # in the Model menu too
    assert not rank.isEnabled()  # extractive answers: nothing to rank with
    client.model = "/models/qwen2-0.5b"
    window.bridge.refresh_status()
    qtbot.waitUntil(rank.isEnabled, timeout=5000)
    assert not rank.isChecked()

    rank.trigger()
    qtbot.waitUntil(lambda: client.called("set_reranker") == [{"reranker": "model"}], timeout=5000)
    qtbot.waitUntil(rank.isChecked, timeout=5000)  # as the engine's status says
    rank.trigger()
    qtbot.waitUntil(lambda: len(client.called("set_reranker")) == 2, timeout=5000)
    assert client.called("set_reranker")[1] == {"reranker": None}
    qtbot.waitUntil(lambda: not rank.isChecked(), timeout=5000)

    # A refusal is shown, and the switch goes back to what the engine has.
    client.fail["set_reranker"] = request_error("the model ranker is unavailable")
    rank.trigger()
    qtbot.waitUntil(window.banner.isVisible, timeout=5000)
    assert "the model ranker is unavailable" in window.banner.label.text()
    qtbot.waitUntil(lambda: not rank.isChecked(), timeout=5000)


def test_ranking_by_the_model_is_not_shown_on_without_a_model(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    """Issue #44, 8: the engine keeps the "model" ranking setting when the model goes
    (for the next one); the menu showed it ticked with no model to rank with."""
    from app.models_pane.model_chooser import RANK_NEEDS_MODEL

    client = FakeClient(model="/models/qwen2-0.5b", reranker="model")
    window = make_window(client)
    rank = window.model_chooser.rank_action
    qtbot.waitUntil(lambda: rank.isEnabled() and rank.isChecked(), timeout=5000)
    client.model = None  # Extractive answers chosen; the setting stays "model"
    window.bridge.refresh_status()
    qtbot.waitUntil(lambda: not rank.isEnabled(), timeout=5000)
    assert not rank.isChecked()
    assert rank.toolTip() == RANK_NEEDS_MODEL
