"""The library pane in a real window on a fake engine: watched folders and
removing one, the pace of a job with pause / resume / cancel, re-indexing a file."""

from __future__ import annotations

import dataclasses

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMenu, QWidget
from pytestqt.qtbot import QtBot

from app.library import library_pane
from app.library.library_pane import LibraryPane
from app.qt_compat import emit
from engine.rag.ingest.jobs import disk_full_text
from engine.wire import DiskFull, FileNote, IngestProgress, WatchedFolder
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient, indexed_docs, request_error

DOCS = WatchedFolder(path="/docs", collection="garden")
EMPTY = WatchedFolder(path="/other", collection="default")


class _Asked:
    """Stands in for the confirmation box: records the question, gives the answer."""

    def __init__(self, *, answer: bool) -> None:
        self.answer = answer
        self.questions: list[str] = []

    def __call__(self, parent: QWidget, question: str) -> bool:
        self.questions.append(question)
        return self.answer


def _library_client(**kwargs: object) -> FakeClient:
    return FakeClient(watched=[DOCS, EMPTY], _docs=indexed_docs(), **kwargs)  # type: ignore[arg-type]


def test_watched_folders_show_collection_and_document_count(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window(_library_client())
    box = window.library.folders_box
    qtbot.waitUntil(lambda: box.model.rowCount() == 2, timeout=5000)
    qtbot.waitUntil(lambda: box.model.document_count(path="/docs") == 2, timeout=5000)
    rows = [[box.model.index(r, c).data() for c in range(3)] for r in range(box.model.rowCount())]
    assert rows == [["/other", "default", "0"], ["/docs", "garden", "2"]]
    assert box.isVisible()
    assert box.label.text() == "Watched folders (2)"
    assert not box.remove_button.isEnabled()  # nothing selected yet


def test_removing_a_folder_asks_first_and_says_files_are_untouched(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = _library_client()
    asked = _Asked(answer=True)
    window = make_window(client, confirm_remove=asked)
    lib = window.library
    qtbot.waitUntil(lambda: lib.documents_model.rowCount() == 2, timeout=5000)
    qtbot.waitUntil(lambda: lib.folders_box.model.rowCount() == 2, timeout=5000)
    lib.folders_box.select(path="/docs")
    assert lib.folders_box.remove_button.isEnabled()

    qtbot.mouseClick(lib.folders_box.remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: lib.folders_box.model.rowCount() == 1, timeout=5000)
    qtbot.waitUntil(lambda: lib.documents_model.rowCount() == 0, timeout=5000)

    (question,) = asked.questions
    assert "/docs" in question and "2 documents" in question
    assert "never touched" in question
    assert client.called("remove_folder") == [{"path": "/docs"}]
    assert [f.path for f in lib.folders_box.model.folders()] == ["/other"]


def test_a_removed_folders_unreadable_files_leave_the_list(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    """Issue #44, 7: a job's own errors were kept past the engine's list, so a removed
    folder's unreadable file stayed under "could not be read"."""
    from tests.app.fake_client import INGEST_ERROR

    client = _library_client()
    window = make_window(client, confirm_remove=_Asked(answer=True))
    lib = window.library
    qtbot.waitUntil(lambda: lib.folders_box.model.rowCount() == 2, timeout=5000)
    elsewhere = dataclasses.replace(INGEST_ERROR, path="/other/old.doc")
    lib.start_job()
    lib.finish_job(IngestProgress(job_id="j1", state="done", errors=[INGEST_ERROR, elsewhere]))
    qtbot.waitUntil(lambda: lib.errors_model.rowCount() == 2, timeout=5000)
    lib.folders_box.select(path="/docs")
    qtbot.mouseClick(lib.folders_box.remove_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: lib.folders_box.model.rowCount() == 1, timeout=5000)
    qtbot.waitUntil(lambda: len(client.called("errors")) >= 2, timeout=5000)
    qtbot.wait(200)  # the library's refresh lands
    assert [e.path for e in lib.errors_model.errors()] == ["/other/old.doc"]
    assert lib.errors_label.text() == "Files that could not be read (1)"


def test_declining_the_question_removes_nothing(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = _library_client()
    asked = _Asked(answer=False)
    window = make_window(client, confirm_remove=asked)
    box = window.library.folders_box
    qtbot.waitUntil(lambda: box.model.rowCount() == 2, timeout=5000)
    box.select(path="/docs")
    qtbot.mouseClick(box.remove_button, Qt.MouseButton.LeftButton)
    qtbot.wait(100)
    assert len(asked.questions) == 1
    assert client.called("remove_folder") == []
    assert box.model.rowCount() == 2


def test_a_refused_removal_is_reported_and_can_be_tried_again(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = _library_client(fail={"remove_folder": request_error("not a watched folder")})
    window = make_window(client, confirm_remove=_Asked(answer=True))
    box = window.library.folders_box
    qtbot.waitUntil(lambda: box.model.rowCount() == 2, timeout=5000)
    box.select(path="/docs")
    qtbot.mouseClick(box.remove_button, Qt.MouseButton.LeftButton)
    assert not box.remove_button.isEnabled()  # one removal at a time
    qtbot.waitUntil(lambda: "not a watched folder" in window.banner.message, timeout=5000)
    assert box.remove_button.isEnabled()
    assert box.model.rowCount() == 2


def test_progress_shows_rate_and_eta_and_pause_resume_reach_the_engine(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(step_s=0.3)
    window = make_window(client, choose_folder=lambda parent: "/docs")
    lib = window.library
    qtbot.mouseClick(lib.add_folder_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "files/s" in lib.pace_label.text(), timeout=5000)
    assert "2.0 files/s" in lib.pace_label.text()
    assert "min left" in lib.pace_label.text() or "s left" in lib.pace_label.text()
    assert lib.pause_button.isVisible() and lib.cancel_button.isVisible()
    assert not lib.resume_button.isVisible()

    qtbot.mouseClick(lib.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: lib.resume_button.isVisible(), timeout=5000)
    assert "Paused" in lib.pace_label.text()
    assert not lib.pause_button.isVisible()
    assert client.called("pause_ingest") == [{}]
    qtbot.wait(700)  # the job waits while paused
    assert lib.ingesting

    qtbot.mouseClick(lib.resume_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not lib.ingesting, timeout=10_000)
    assert client.called("resume_ingest") == [{}]
    # The documents list is asked for once the job has ended.
    qtbot.waitUntil(lambda: lib.documents_model.rowCount() == 2, timeout=5000)
    assert lib.pace_label.text() == ""
    assert not (lib.pause_button.isVisible() or lib.cancel_button.isVisible())


def test_cancel_stops_the_job_through_the_engine(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = FakeClient(step_s=0.3)
    window = make_window(client, choose_folder=lambda parent: "/docs")
    lib = window.library
    qtbot.mouseClick(lib.add_folder_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: lib.cancel_button.isEnabled(), timeout=5000)
    qtbot.mouseClick(lib.cancel_button, Qt.MouseButton.LeftButton)
    assert lib.cancel_button.text() == "Cancelling…"
    qtbot.waitUntil(lambda: not lib.ingesting, timeout=5000)
    assert client.called("cancel_ingest") == [{"job_id": "job-1"}]
    assert lib.progress_box.title() == "Adding documents was cancelled"
    assert lib.current_label.text().startswith("Stopped after")


def test_reindex_resubmits_that_one_file(qtbot: QtBot, make_window: MakeWindow) -> None:
    client = _library_client()
    window = make_window(client)
    lib = window.library
    qtbot.waitUntil(lambda: lib.documents_model.rowCount() == 2, timeout=5000)

    menu = lib.reindex_menu(path="/docs/c.txt")
    (action,) = menu.actions()
    assert action.text() == "Re-index this file" and action.isEnabled()
    action.trigger()
    qtbot.waitUntil(lambda: not lib.ingesting and bool(client.called("ingest")), timeout=5000)
    assert client.called("ingest") == [{"paths": ["/docs/c.txt"]}]

    # A right click on a row opens that menu for the row's file.
    rect = lib.documents_view.visualRect(lib.documents_model.index(0, 0))
    emit(lib.documents_view.customContextMenuRequested, rect.center())
    qtbot.waitUntil(lambda: isinstance(QApplication.activePopupWidget(), QMenu), timeout=2000)
    popup = QApplication.activePopupWidget()
    assert isinstance(popup, QMenu)
    popup.actions()[0].trigger()
    popup.close()
    qtbot.waitUntil(lambda: len(client.called("ingest")) == 2, timeout=5000)
    assert client.called("ingest")[1] == {"paths": ["/docs/a.md"]}
    qtbot.waitUntil(lambda: not lib.ingesting, timeout=5000)

    # The button next to the documents does the same for the selected row.
    lib.documents_view.clearSelection()
    assert not lib.reindex_button.isEnabled()
    lib.documents_view.selectRow(1)
    assert lib.reindex_button.isEnabled()
    qtbot.mouseClick(lib.reindex_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(client.called("ingest")) == 3, timeout=5000)
    assert client.called("ingest")[2] == {"paths": ["/docs/c.txt"]}


def test_paused_queue_reported_by_the_engine_switches_the_buttons(qtbot: QtBot) -> None:
    pane = LibraryPane(choose_folder=lambda parent: None)
    qtbot.addWidget(pane)
    pane.show()
    pane.set_ready(True)
    pane.start_job()
    assert pane.pause_button.isVisible() and not pane.resume_button.isVisible()
    pane.set_paused(True)
    assert pane.resume_button.isVisible() and not pane.pause_button.isVisible()
    with qtbot.waitSignal(pane.sig_resume, timeout=1000):
        pane.resume_button.click()


def test_a_paused_job_names_no_file_as_worked_on(qtbot: QtBot) -> None:
    pane = LibraryPane(choose_folder=lambda parent: None)
    qtbot.addWidget(pane)
    pane.set_ready(True)
    pane.start_job()
    running = IngestProgress(
        job_id="a", state="running", files_total=9, current="/docs/guide.pdf", paused=True
    )
    pane.show_progress(running)  # the pause asked for: the file at hand is finished
    assert pane.current_label.text() == "Finishing guide.pdf, then pausing"
    pane.show_progress(dataclasses.replace(running, current=None))  # the engine waits
    assert pane.current_label.text() == "Paused"
    assert "Paused" in pane.pace_label.text()
    pane.show_progress(dataclasses.replace(running, current="/docs/next.pdf", paused=False))
    assert pane.current_label.text() == "Working on next.pdf"


def test_a_late_event_of_an_ended_job_is_not_taken_for_the_next_one(qtbot: QtBot) -> None:
    # Cancel a job, add the folder again: the cancelled job's last event may
    # arrive after the new request. The pane must follow the new job to its end.
    pane = LibraryPane(choose_folder=lambda parent: None)
    qtbot.addWidget(pane)
    pane.set_ready(True)
    first = IngestProgress(job_id="a", state="running", origin="request")
    pane.start_job()
    pane.show_progress(first)
    pane.finish_job(dataclasses.replace(first, state="cancelled"))
    pane.start_job()
    pane.show_progress(dataclasses.replace(first, state="cancelled"))  # late
    second = IngestProgress(job_id="b", state="running", origin="request")
    pane.show_progress(second)
    pane.finish_job(dataclasses.replace(second, state="done"))
    assert not pane.ingesting


def test_progress_counts_pages_and_chunks_fills_by_work_and_shows_notes(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(library_pane, "FINISHED_BOX_MS", 200)
    pane = LibraryPane(choose_folder=lambda parent: None)
    qtbot.addWidget(pane)
    pane.show()
    pane.set_ready(True)
    pane.start_job()
    running = IngestProgress(
        job_id="a",
        state="running",
        files_total=20,
        files_done=0,
        current="/docs/big manual.pdf",
        pages_read=196,
        chunks_found=900,
        chunks_embedded=300,
        bytes_total=10_000,
        bytes_done=2_500,
        notes=[FileNote(path="/docs/big.csv", note="only the first 100,000 rows were read")],
    )
    pane.show_progress(running)
    # "0 of 20 files" and yet a quarter of the work is done: the bar says so.
    assert pane.progress_bar.value() == 250 and pane.progress_bar.text() == "0 of 20 files"
    assert pane.current_label.text() == "Working on big manual.pdf"
    assert "196 pages" in pane.counts_label.text()
    assert "300 of 900 new chunks embedded" in pane.counts_label.text()
    assert pane.notes_label.text() == "big.csv: only the first 100,000 rows were read"
    # A finished job's box goes after a short while.
    pane.finish_job(dataclasses.replace(running, state="done", files_done=20))
    assert pane.progress_box.isVisible()
    qtbot.waitUntil(lambda: not pane.progress_box.isVisible(), timeout=3000)


def test_a_full_disk_is_said_in_the_box_and_the_box_stays(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(library_pane, "FINISHED_BOX_MS", 100)
    pane = LibraryPane(choose_folder=lambda parent: None)
    qtbot.addWidget(pane)
    pane.show()
    pane.set_ready(True)
    report = DiskFull(
        mount="/mnt/small", folder="/mnt/small/index", files_in=369, files_not_read=12
    )
    failed = IngestProgress(
        job_id="r",
        state="failed",
        origin="rescan",  # the start-up rescan says it too
        files_total=381,
        files_done=369,
        disk_full=report,
        message=disk_full_text(report),
    )
    pane.show_progress(failed)
    pane.finish_job(failed)
    text = pane.current_label.text()
    assert "The disk at /mnt/small is full" in text
    assert "369 files are in the index; 12 were not read" in text
    assert "Nothing was lost" in text
    qtbot.wait(300)
    assert pane.progress_box.isVisible()


def test_pause_stays_put_as_the_lines_fill_in_and_resume_takes_its_focus(qtbot: QtBot) -> None:
    # Under a real window manager the walkthrough's clicks on Pause missed twice:
    # the button moved down as the job's lines appeared and wrapped.
    pane = LibraryPane(choose_folder=lambda parent: None)
    qtbot.addWidget(pane)
    pane.resize(260, 600)
    pane.show()
    pane.activateWindow()
    qtbot.waitActive(pane)
    pane.set_ready(True)
    pane.start_job()
    QApplication.processEvents()
    where = pane.pause_button.mapTo(pane, pane.pause_button.rect().topLeft())
    running = IngestProgress(
        job_id="a",
        state="running",
        files_total=4,
        current="/docs/a manual with a rather long file name.pdf",
        pages_read=88,
        chunks_found=550,
        chunks_embedded=256,
        notes=[FileNote(path="/docs/big.csv", note="only the first 100,000 rows were read")],
    )
    pane.show_progress(running)
    QApplication.processEvents()
    assert pane.counts_label.height() > pane.fontMetrics().height()  # it wrapped
    assert pane.pause_button.mapTo(pane, pane.pause_button.rect().topLeft()) == where

    pane.pause_button.setFocus()
    with qtbot.waitSignal(pane.sig_pause, timeout=1000):
        qtbot.keyClick(pane.pause_button, Qt.Key.Key_Space)
    pane.set_paused(True)  # what the engine says next
    QApplication.processEvents()
    assert pane.resume_button.isVisible()
    # Not Cancel, the next button in the row: Space there would end the job.
    assert pane.resume_button.hasFocus() and not pane.cancel_button.hasFocus()
    assert pane.resume_button.mapTo(pane, pane.resume_button.rect().topLeft()).y() == where.y()
    with qtbot.waitSignal(pane.sig_resume, timeout=1000):
        qtbot.keyClick(pane.resume_button, Qt.Key.Key_Space)
    pane.set_paused(False)
    assert pane.pause_button.hasFocus()


def test_long_names_lose_their_middle_not_all_after_a_hyphen(qtbot: QtBot) -> None:
    # Wrapped, "apt-guide.txt" broke at its hyphen and its one shown line read
    # "apt-…" at 800x600; unwrapped, the view elides the middle ("apt-…e.txt").
    pane = LibraryPane(choose_folder=lambda parent: None)
    qtbot.addWidget(pane)
    for view in (pane.documents_view, pane.folders_box.view):
        assert not view.wordWrap()
        assert view.textElideMode() == Qt.TextElideMode.ElideMiddle
