"""Ask each document in the real window: on a real engine process (the table fills
in, sorts, exports, a row opens its cited page) and with a fake asker for what a
real engine will not do on demand (a run slow enough to cancel midway)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from pytestqt.qtbot import QtBot

from app.batch.export import Format
from app.each.each_dialog import EachDialog
from app.each.runner import EachRun
from app.main_window import MainWindow
from engine.paths import resolve_paths
from engine.service.client import EngineClient
from engine.wire import Citation
from engine.wire_each import DocumentAnswer, EachPlan, EachRequest
from tests.engine.rag.each.corpus import LICENCES, QUESTION
from tests.support.engine import RunningEngine


def _window(qtbot: QtBot) -> MainWindow:
    window = MainWindow(
        # The fixture's engine: attach, never start or stop it.
        client_factory=lambda: EngineClient.connect(paths=resolve_paths(), start=False),
        show_welcome=False,
    )
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=30_000)
    qtbot.waitUntil(lambda: bool(window.library.folders_box.model.folders()), timeout=30_000)
    return window


def test_a_question_of_each_document_fills_a_sortable_cited_table(
    qtbot: QtBot, each_engine: RunningEngine, reports_dir: Path, tmp_path: Path
) -> None:
    window = _window(qtbot)
    assert window.each_action.shortcut() == QKeySequence("Ctrl+Shift+E")
    box = window.library.folders_box
    qtbot.waitUntil(box.ask_each_button.isEnabled, timeout=30_000)
    box.select(path=str(reports_dir))
    qtbot.mouseClick(box.ask_each_button, Qt.MouseButton.LeftButton)
    dialog = window.each_dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.scope.currentData() == str(reports_dir)  # the folder selected
    assert dialog.scope.findData("reports") >= 0  # its collection is offered too
    assert not dialog.run_button.isEnabled()  # no question yet
    dialog.reuse.setChecked(False)
    qtbot.keyClicks(dialog.question, QUESTION)
    qtbot.keyClick(dialog.question, Qt.Key.Key_Return)
    assert dialog.running and dialog.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: not dialog.running, timeout=60_000)

    model = dialog.model
    assert model.rowCount() == len(LICENCES)
    assert "4 answered, 2 not stated" in dialog.status.text()
    rows = {Path(r.path).stem: r for r in model.rows()}
    for name, (licence, page) in LICENCES.items():
        assert rows[name].status == ("not_stated" if licence is None else "answered")
        if licence is not None:
            assert rows[name].first_page == page

    # Sorting by pages: the documents that state it first, by page; not stated last.
    dialog.table.sortByColumn(3, Qt.SortOrder.AscendingOrder)
    proxy = dialog.proxy
    pages = [proxy.index(r, 3).data() for r in range(proxy.rowCount())]
    assert pages[-2:] == ["", ""] and pages[0].startswith("1")
    names = [proxy.index(r, 1).data() for r in range(proxy.rowCount())]
    assert names[0] == "garden.pdf"

    def chooser(parent: object, fmt: Format) -> str:
        return str(tmp_path / f"licences.{fmt}")

    dialog.choose_export = chooser
    qtbot.mouseClick(dialog.export_csv_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(dialog.export_md_button, Qt.MouseButton.LeftButton)
    with (tmp_path / "licences.csv").open(encoding="utf-8-sig", newline="") as f:
        exported = list(csv.DictReader(f))
    assert [r["document"] for r in exported] == sorted(f"{n}.pdf" for n in LICENCES)
    markdown = (tmp_path / "licences.md").read_text(encoding="utf-8")
    assert markdown.startswith(f"**Question:** {QUESTION}") and "| bees.pdf |" in markdown

    # A double-click on a row opens the page it cites first.
    roof = names.index("roof.pdf")
    rect = dialog.table.visualRect(proxy.index(roof, 2))
    viewport = dialog.table.viewport()
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(viewport, Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: window.viewer.isVisible(), timeout=10_000)
    assert window.viewer.windowTitle() == "roof.pdf — page 3"
    assert dialog.sources_model.rowCount() >= 1  # the row's passages listed below

    # Asked again, every document unchanged: the rows come from the last run.
    dialog.reuse.setChecked(True)
    dialog.start()
    qtbot.waitUntil(lambda: not dialog.running, timeout=60_000)
    dialog.start()
    qtbot.waitUntil(lambda: not dialog.running, timeout=60_000)
    assert f"{len(LICENCES)} from the last run" in dialog.status.text()
    window.close()


class SlowAsker:
    """Hands the dialog a plan and then rows only when the test says."""

    def __init__(self) -> None:
        self.run: EachRun | None = None
        self.on_row: Callable[[DocumentAnswer], None] | None = None
        self.on_finished: Callable[[EachRun], None] | None = None

    def ask_each(self, *, request: EachRequest, on_plan, on_row, on_finished):  # type: ignore[no-untyped-def]
        self.run = EachRun()
        self.run.plan = EachPlan(
            question=request.question, paths=["/d/a.pdf", "/d/b.pdf"], mode="extractive"
        )
        self.on_row, self.on_finished = on_row, on_finished
        on_plan(self.run.plan)
        return self.run

    def row(self, row: DocumentAnswer) -> None:
        assert self.run is not None and self.on_row is not None
        self.run._rows[row.number] = row  # as EachRun.read records it
        self.on_row(row)


def test_cancel_keeps_the_rows_done(qtbot: QtBot) -> None:
    asker = SlowAsker()
    dialog = EachDialog(asker=asker)
    qtbot.addWidget(dialog)
    dialog.set_scopes(collections=["papers"], folders=[])
    dialog.question.setText("Who wrote it?")
    dialog.start()
    assert dialog.model.rowCount() == 2 and dialog.progress.maximum() == 2
    cite = Citation(
        index=1,
        chunk_id="c1",
        path="/d/a.pdf",
        page=4,
        text="By Ada.",
        score=0.6,
        char_start=0,
        char_end=7,
    )
    asker.row(
        DocumentAnswer(
            number=1,
            path="/d/a.pdf",
            status="answered",
            answer="By Ada [1].",
            mode="extractive",
            citations=[cite],
        )
    )
    assert dialog.progress.value() == 1 and "1 of 2 documents" in dialog.status.text()
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    assert asker.run is not None and asker.run.cancelled
    assert not dialog.cancel_button.isEnabled()
    assert asker.on_finished is not None
    asker.on_finished(asker.run)  # the bridge reports once the stream is cut
    assert not dialog.running
    assert "Cancelled: 1 of 2" in dialog.status.text()
    rows = dialog.model.rows()
    assert rows[0].answer == "By Ada [1]." and rows[1].status == "cancelled"
    assert dialog.model.index(1, 2).data() == "Not answered (cancelled)"
    assert dialog.export_csv_button.isEnabled()  # what was answered can be kept
