"""The window never freezes: engine calls that take a second each, PDF pages
rendering and hundreds of conversations loading leave the event loop free to
run a 10 ms timer without a noticeable gap: a gap the window made, less what a busy
machine took from the process in it (tests/app/ticker.py)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.chat.chat_pane import ChatPane
from app.chat.conversation_list import SEARCH_DELAY_MS
from app.chat.conversations import ConversationStore, Exchange, new_conversation, with_exchange
from app.viewer.source_viewer import SourceViewer
from engine.wire import IngestProgress, SourceView, WatchedFolder
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient, indexed_docs
from tests.app.test_activity_panel import full_pipeline
from tests.app.ticker import MAX_GAP_S, Ticker
from tests.fixtures.pdf_factory import PdfPage, write_pdf


def test_the_event_loop_keeps_running_while_the_engine_is_slow(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(delay_s=1.0, token_delay_s=0.1)
    ticker = Ticker()

    window = make_window(client, choose_model_folder=lambda parent: "/models/slow")
    qtbot.keyClicks(window.chat.question, "What do tomatoes need?")
    qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)
    window.model_chooser.choose_action.trigger()  # a slow model load at the same time
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=10_000)
    qtbot.waitUntil(window.model_chooser.isEnabled, timeout=10_000)
    gap = ticker.longest()

    assert client.called("ask_stream") and client.called("set_model")
    # It ticked all along the one-second calls, not only before or after them.
    assert ticker.ticks[-1] - ticker.ticks[0] >= 1.0
    assert gap.own_s < MAX_GAP_S, f"the GUI thread stalled for {gap}"


def test_rendering_pdf_pages_never_stalls_the_window(qtbot: QtBot, tmp_path: Path) -> None:
    paragraph = "Every page of this manual has plenty of text to lay out and draw. " * 30
    path = write_pdf(
        path=tmp_path / "long.pdf",
        pages=[PdfPage(heading=f"Chapter {i}", paragraphs=[paragraph]) for i in range(1, 9)],
    )
    viewer = SourceViewer(open_at_page=lambda **kw: None)
    qtbot.addWidget(viewer)
    ticker = Ticker()
    with qtbot.waitSignal(viewer.pdf.sig_rendered, timeout=20_000):
        viewer.show_source(
            SourceView(
                chunk_id="c",
                path=str(path),
                page=1,
                page_count=8,
                page_text=paragraph,
                char_start=0,
                char_end=60,
            )
        )
    for _ in range(3):  # page and zoom through the file as a person would
        with qtbot.waitSignal(viewer.pdf.sig_rendered, timeout=20_000):
            viewer.pdf.next_button.click()
        with qtbot.waitSignal(viewer.pdf.sig_rendered, timeout=20_000):
            viewer.pdf.zoom_in_button.click()
    gap = ticker.longest()
    assert viewer.pdf.page == 4
    assert len(ticker.ticks) >= 2
    assert gap.own_s < MAX_GAP_S, f"the GUI thread stalled for {gap}"


def test_loading_and_searching_many_conversations_never_stalls_the_window(
    qtbot: QtBot, tmp_path: Path
) -> None:
    store = ConversationStore(folder=tmp_path)
    words = [
        "tomato",
        "pepper",
        "budget",
        "garden",
        "invoice",
        "soil",
        "compost",
        "river",
        "bridge",
    ]
    for i in range(300):
        conv = new_conversation(title=f"Conversation {i}")
        for j in range(10):
            conv = with_exchange(
                conv,
                exchange=Exchange(
                    question=f"Question {j} about the {words[(i + j) % len(words)]}?",
                    answer=("A long answer with many words in it. " * 40) + f"needle-{i}-{j}",
                ),
            )
        store.save(conv)

    pane = ChatPane(store=store)
    qtbot.addWidget(pane)
    # Building and first showing the widgets is the test's own synchronous work;
    # what must never stall is loading, listing, searching and opening after it.
    ticker = Ticker()
    pane.show()
    qtbot.waitUntil(lambda: pane.loaded, timeout=30_000)
    assert len(pane.conversations) == 300
    for query in ("needle-123-4", "garden", "tomato pepper", ""):
        pane.conversation_list.search.setText(query)
        qtbot.wait(SEARCH_DELAY_MS + 60)
    pane.conversation_list.search.setText("needle-123-4")
    qtbot.waitUntil(lambda: len(pane.conversation_list.ids()) == 1, timeout=2000)
    pane.conversation_list.list.setCurrentRow(0)  # open it: ten Markdown answers
    qtbot.wait(50)
    gap = ticker.longest()
    assert "needle-123-4" in pane.transcript.toPlainText()
    assert gap.own_s < MAX_GAP_S, f"the GUI thread stalled for {gap}"


def test_library_actions_on_a_slow_engine_never_stall_the_window(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(
        delay_s=0.5,
        watched=[WatchedFolder(path="/docs"), WatchedFolder(path="/other")],
        _docs=indexed_docs(),
    )
    ticker = Ticker()
    window = make_window(client, confirm_remove=lambda parent, question: True)
    lib = window.library
    qtbot.waitUntil(lambda: lib.folders_box.model.rowCount() == 2, timeout=10_000)
    lib.folders_box.select(path="/docs")
    lib.folders_box.remove_button.click()
    lib.set_ready(True)
    lib.start_job()  # show the job controls, as while a folder is being added
    lib.pause_button.click()
    qtbot.waitUntil(lambda: lib.folders_box.model.rowCount() == 1, timeout=10_000)
    qtbot.waitUntil(lambda: bool(client.called("pause_ingest")), timeout=10_000)
    gap = ticker.longest()
    assert client.called("remove_folder") == [{"path": "/docs"}]
    assert gap.own_s < MAX_GAP_S, f"the GUI thread stalled for {gap}"


def test_activity_charts_and_engine_jobs_on_a_slow_engine_never_stall_the_window(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    """The Activity window's status poll redraws a full history every second, and a
    job a watched folder started is found and followed: all off the GUI thread."""
    client = FakeClient(
        delay_s=0.3,
        step_s=0.2,
        pipeline=full_pipeline(),
        queue_jobs=[IngestProgress(job_id="watch-1", state="queued", origin="watcher")],
    )
    window = make_window(client)
    statuses: list[object] = []
    window.bridge.sig_status.connect(statuses.append)
    panel = window.show_activity()  # building the window is the click's own work
    qtbot.wait(100)
    ticker = Ticker()
    qtbot.waitUntil(lambda: len(statuses) >= 4, timeout=15_000)
    qtbot.waitUntil(lambda: bool(client.called("ingest_events")), timeout=10_000)
    qtbot.waitUntil(lambda: not window.library.ingesting, timeout=10_000)
    gap = ticker.longest()
    assert len(panel.latency.points("interactive")) == 256
    assert window.library.progress_box.title() == "Watched folder updated"
    assert gap.own_s < MAX_GAP_S, f"the GUI thread stalled for {gap}"
