"""The real window on a real engine process: add a folder, ask, open a source.

Everything between the window and the page text is real: EngineClient over
HTTP, the engine's ingestion of Markdown, text and PDF files, the bundled
embedder, the extractive answer with citations, and the source endpoint.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.exceptions import TimeoutError as QtWaitTimeout
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from engine.paths import resolve_paths
from engine.service.client import EngineClient
from engine.wire import IngestProgress
from tests.app.ticker import Ticker
from tests.fixtures.small_corpus import write_small_corpus
from tests.support.engine import RunningEngine, process_alive
from tests.support.stalls import Stopwatch

# A freeze a person would notice while a real model loads and answers (the window's own
# responsiveness tests allow 0.1 s with a fake engine); measured less the time the
# machine kept this process waiting for a CPU (tests/app/ticker.py).
MAX_GAP_S = 0.5


def _documents(folder: Path) -> Path:
    write_small_corpus(folder)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    return folder


def test_add_a_folder_ask_and_open_the_cited_page(
    qtbot: QtBot, engine: RunningEngine, tmp_path: Path
) -> None:
    folder = _documents(tmp_path / "my documents")
    not_a_model = tmp_path / "not a model"
    not_a_model.mkdir()
    window = MainWindow(
        # The test's engine belongs to the fixture: attach, never start or stop it.
        client_factory=lambda: EngineClient.connect(paths=resolve_paths(), start=False),
        choose_folder=lambda parent: str(folder),
        choose_model_folder=lambda parent: str(not_a_model),
        confirm_remove=lambda parent, question: "never touched" in question,
    )
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=30_000)
    assert not window.bridge.started_engine

    qtbot.mouseClick(window.library.add_folder_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.library.ingesting, timeout=5_000)
    qtbot.waitUntil(lambda: not window.library.ingesting, timeout=120_000)
    qtbot.waitUntil(lambda: window.library.documents_model.rowCount() == 3, timeout=10_000)
    library = window.library
    assert library.progress_box.title() == "Documents added"
    # The bar fills with the work done; its words count the files.
    assert library.progress_bar.value() == library.progress_bar.maximum()
    assert library.progress_bar.text() == "4 of 4 files"
    (error,) = library.errors_model.errors()
    assert Path(error.path).name == "broken.pdf"
    assert error.reason

    qtbot.keyClicks(window.chat.question, "What did the inspection of the bridge find?")
    qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=60_000)
    transcript = window.chat.transcript.toPlainText()
    assert "corrosion" in transcript
    assert "The answer failed" not in transcript
    sources = window.chat.sources_model
    cited = [(Path(c.path).name, c.page) for c in map(sources.citation, range(sources.rowCount()))]
    assert ("bridge report.pdf", 2) in cited, cited
    row = cited.index(("bridge report.pdf", 2))

    view = window.chat.sources
    rect = view.visualRect(sources.index(row, 0))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: window.viewer.isVisible(), timeout=10_000)
    assert window.viewer.windowTitle() == "bridge report.pdf — page 2"
    (selection,) = window.viewer.text.extraSelections()
    highlighted = selection.cursor.selectedText()
    assert "corrosion on the north pylon" in " ".join(highlighted.split())
    page = window.viewer.text.toPlainText()
    assert page[selection.cursor.selectionStart() : selection.cursor.selectionEnd()] == (
        highlighted.replace("\u2029", "\n")
    )

    # A folder that is not a model: the engine refuses it and the window says why.
    window.model_chooser.choose_action.trigger()
    qtbot.waitUntil(window.banner.isVisible, timeout=30_000)
    assert "Could not load the model" in window.banner.label.text()
    assert window.model_chooser.isEnabled()
    assert engine.client.status().answer_mode == "extractive"

    # Re-index one unchanged file: it goes through the ingest call and is skipped.
    finished: list[IngestProgress] = []
    window.bridge.sig_ingest_finished.connect(finished.append)
    garden = str((folder / "garden.txt").resolve())
    library.reindex_menu(path=garden).actions()[0].trigger()
    qtbot.waitUntil(lambda: bool(finished), timeout=60_000)
    assert finished[0].state == "done" and finished[0].files_skipped == 1

    # Remove the folder: its documents leave the library, its files stay on disk.
    box = library.folders_box
    qtbot.waitUntil(lambda: box.model.rowCount() == 1, timeout=10_000)
    assert box.model.document_count(path=str(folder.resolve())) == 3
    box.select(path=str(folder.resolve()))
    qtbot.mouseClick(box.remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: box.model.rowCount() == 0, timeout=30_000)
    qtbot.waitUntil(lambda: library.documents_model.rowCount() == 0, timeout=10_000)
    assert sorted(p.name for p in folder.iterdir()) == [
        "bridge report.pdf",
        "broken.pdf",
        "garden.txt",
        "lighthouse.md",
    ]

    window.close()
    assert engine.client.status().documents == 0  # the window left the engine running


def test_the_window_starts_the_engine_and_stops_it_on_quit(
    qtbot: QtBot, ragdoll_home: Path
) -> None:
    window = MainWindow()  # the default factory: attach to an engine, or start one
    pids: list[int] = []
    window.bridge.sig_connected.connect(lambda status: pids.append(status.pid))
    qtbot.addWidget(window)
    window.show()
    assert window.engine_label.text() in ("", "Starting engine…")
    try:
        qtbot.waitUntil(lambda: window.bridge.connected, timeout=90_000)
        assert window.bridge.started_engine
        (pid,) = pids
        assert process_alive(pid)
        with Stopwatch() as quitting:
            window.close()
        assert quitting.took.own_s < 5, f"quitting blocked the window for {quitting.took}"
        # A deadline, not a bound: at load 10 one engine was still stopping after 30 s.
        deadline = time.monotonic() + 120
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not process_alive(pid), "the engine outlived the window that started it"
    finally:
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_chosen_model_folder_or_gguf_file_streams_a_generated_answer(
    qtbot: QtBot, engine: RunningEngine, tmp_path: Path
) -> None:
    """A model folder, then a GGUF file chosen as a person does (Model > Choose a GGUF
    model file…), each answers in the window with its name and sources; a truncated GGUF
    file is then refused with the reason and the model in use stays. One engine for all
    keeps the test quick."""
    from gguf import GGMLQuantizationType

    from engine.runtime.models.gguf_writer import write_gguf
    from engine.runtime.models.synthetic import write_random_model

    model = write_random_model(folder=tmp_path / "tiny-llama")
    qwen = write_random_model(folder=tmp_path / "tiny-qwen", architecture="qwen2")
    (tmp_path / "Downloads").mkdir()
    gguf = write_gguf(
        model_dir=qwen,
        out=tmp_path / "Downloads" / "tiny-qwen.Q4_0.gguf",
        qtype=GGMLQuantizationType.Q4_0,
    )
    truncated = tmp_path / "Downloads" / "half.Q4_0.gguf"
    truncated.write_bytes(gguf.read_bytes()[: gguf.stat().st_size // 2])
    files = [str(gguf), str(truncated)]
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.txt").write_text("The garden budget is 4,200 euros for raised beds.\n")
    engine.ingest(notes)

    window = MainWindow(
        client_factory=lambda: EngineClient.connect(paths=resolve_paths(), start=False),
        choose_model_folder=lambda parent: str(model),
        choose_model_file=lambda parent: files.pop(0),
    )
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=30_000)
    tokens: list[str] = []
    window.chat.sig_ask.connect(lambda stream: stream.sig_token.connect(tokens.append))
    # The event loop's longest pause while a GGUF model loads and answers.
    ticker = Ticker(start=False)

    for action, name in (
        (window.model_chooser.choose_action, "tiny-llama"),
        (window.model_chooser.choose_gguf_action, "tiny-qwen.Q4_0.gguf"),
    ):
        tokens.clear()
        if name.endswith(".gguf"):
            ticker.start()
        action.trigger()
        qtbot.waitUntil(
            lambda name=name: f"generated by {name}" in window.mode_label.text(),
            timeout=60_000,
        )
        qtbot.keyClicks(window.chat.question, "What is the garden budget?")
        qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: window.chat.streaming, timeout=10_000)
        qtbot.waitUntil(lambda: not window.chat.streaming, timeout=120_000)
        assert len(tokens) > 1  # streamed piece by piece, not delivered whole
        assert "The answer failed" not in window.chat.transcript.toPlainText()
        assert window.chat.sources_model.rowCount() >= 1
        assert window.chat.sources_model.citation(0).path.endswith("garden.txt")
    gap = ticker.longest()
    assert engine.client.settings().model == str(gguf)
    assert gap.own_s < MAX_GAP_S, f"the GUI thread stalled for {gap}"

    window.model_chooser.choose_gguf_action.trigger()
    qtbot.waitUntil(window.banner.isVisible, timeout=30_000)
    assert "half.Q4_0.gguf is truncated" in window.banner.label.text()
    assert window.model_chooser.isEnabled()
    assert engine.client.settings().model == str(gguf)  # the old choice stands
    window.close()


def test_pause_cancel_and_resume_reach_the_real_engine(
    qtbot: QtBot, engine: RunningEngine, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.txt").write_text("The garden budget is 4,200 euros for raised beds.\n")
    window = MainWindow(
        client_factory=lambda: EngineClient.connect(paths=resolve_paths(), start=False),
        choose_folder=lambda parent: str(notes),
    )
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=30_000)
    library = window.library
    engine.client.pause_ingest()  # as if paused from another window: the job waits

    qtbot.mouseClick(library.add_folder_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(library.resume_button.isVisible, timeout=10_000)
    assert library.pace_label.text().startswith("Paused")
    qtbot.waitUntil(library.cancel_button.isEnabled, timeout=10_000)
    qtbot.mouseClick(library.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not library.ingesting, timeout=30_000)
    assert library.progress_box.title() == "Adding documents was cancelled"
    assert engine.client.status().documents == 0

    qtbot.mouseClick(library.add_folder_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(library.resume_button.isVisible, timeout=10_000)
    qtbot.mouseClick(library.resume_button, Qt.MouseButton.LeftButton)
    try:
        qtbot.waitUntil(lambda: not library.ingesting, timeout=60_000)
    except (AssertionError, QtWaitTimeout) as e:  # seen under load: say where it stood
        queue = engine.client.ingest_queue()
        log_tail = resolve_paths().engine_log.read_text(errors="replace")[-3000:]
        raise AssertionError(
            f"still ingesting; engine queue {queue}; library jobs {library._jobs}, "
            f"awaiting {library._awaiting}, shown {library._job_id}; log tail:\n{log_tail}"
        ) from e
    assert library.progress_box.title() == "Documents added"
    assert not engine.client.ingest_queue().paused
    qtbot.waitUntil(lambda: library.documents_model.rowCount() == 1, timeout=10_000)
    window.close()
