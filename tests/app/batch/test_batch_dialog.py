"""The batch dialog in the real window: on a real engine (the table fills in, the
exports, a cited page opens) and on the fake client (the menu, bad input)."""

from __future__ import annotations

import csv
import threading
from collections.abc import Iterator
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from pytestqt.qtbot import QtBot

from app.batch.export import Format
from app.main_window import MainWindow
from engine.paths import resolve_paths
from engine.service.client import EngineClient
from engine.wire import AnswerEvent, Priority
from tests.app.batch.conftest import QUESTIONS
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient
from tests.support.engine import RunningEngine


def test_answers_fill_the_table_export_and_open_the_cited_page(
    qtbot: QtBot, batch_engine: RunningEngine, tmp_path: Path
) -> None:
    window = MainWindow(
        # The fixture's engine: attach, never start or stop it.
        client_factory=lambda: EngineClient.connect(paths=resolve_paths(), start=False),
        show_welcome=False,
    )
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=30_000)

    window.batch_action.trigger()
    dialog = window.batch_dialog
    assert dialog is not None and dialog.isVisible()
    assert not dialog.progress.isVisible()  # no "0 of 1" before a run
    dialog.questions.setPlainText(
        "\n".join(["# the usual three, one twice", *QUESTIONS, QUESTIONS[0]])
    )
    qtbot.mouseClick(dialog.run_button, Qt.MouseButton.LeftButton)
    assert dialog.running and dialog.cancel_button.isEnabled()
    assert dialog.progress.isVisible() and dialog.progress.maximum() == 4
    assert not dialog.export_csv_button.isEnabled()
    model = dialog.model
    assert model.rowCount() == 4
    qtbot.waitUntil(lambda: not dialog.running, timeout=60_000)

    results = model.results()
    assert [r.status for r in results] == ["answered"] * 4
    assert dialog.progress.value() == dialog.progress.maximum() == 4
    assert "4 answered" in dialog.status.text()
    assert "corrosion" in model.index(0, 2).data()
    assert "bridge report.pdf — page" in model.index(0, 3).data()
    assert "Biscuit" in model.index(1, 2).data()
    assert model.index(3, 1).data() == QUESTIONS[0]  # duplicates are kept

    def chooser(parent: object, fmt: Format) -> str:
        return str(tmp_path / f"answers.{fmt}")

    dialog.choose_export = chooser
    qtbot.mouseClick(dialog.export_csv_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(dialog.export_md_button, Qt.MouseButton.LeftButton)
    with (tmp_path / "answers.csv").open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["question"] for r in rows] == [*QUESTIONS, QUESTIONS[0]]
    assert "bridge report.pdf — page 2" in rows[0]["sources"]
    markdown = (tmp_path / "answers.md").read_text(encoding="utf-8").splitlines()
    assert len(markdown) == 2 + 4 and "Biscuit" in markdown[3]
    assert "Saved" in dialog.status.text()

    # The selected answer's sources; double-clicking one opens its page in the viewer.
    dialog.table.selectRow(0)
    sources = dialog.sources_model
    titles = [
        (Path(sources.citation(r).path).name, sources.citation(r).page)
        for r in range(sources.rowCount())
    ]
    row = titles.index(("bridge report.pdf", 2))
    view = dialog.sources
    rect = view.visualRect(sources.index(row, 0))
    # A person's double-click: a click, then the second press (QTest's mouseDClick
    # alone sends no first press, and an item view then ignores it).
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: window.viewer.isVisible(), timeout=10_000)
    assert window.viewer.windowTitle() == "bridge report.pdf — page 2"
    window.close()


def test_menu_action_bad_input_and_no_engine(
    make_window: MakeWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    window = make_window(FakeClient())
    action = window.batch_action
    assert action.shortcut() == QKeySequence("Ctrl+Shift+B")
    assert action in window.menuBar().actions()[0].menu().actions()
    dialog = window.show_batch()
    assert window.show_batch() is dialog  # one dialog per window
    for widget in (dialog.questions, dialog.run_button, dialog.table, dialog.sources):
        assert widget.accessibleName()

    assert not dialog.run_button.isEnabled()  # nothing to run yet
    dialog.questions.setPlainText("# only a comment\n\n")
    assert not dialog.run_button.isEnabled()
    dialog.start()  # Ctrl+Return still reaches it: it says why nothing runs
    assert "no questions" in dialog.status.text() and not dialog.running

    binary = tmp_path / "questions.txt"
    binary.write_bytes(b"\x00\x01binary")
    dialog.choose_questions = lambda parent: str(binary)
    dialog.load_file()
    assert "not a text file" in dialog.status.text()
    good = tmp_path / "good.txt"
    good.write_text("# mine\nFirst?\n\nSecond?\n")
    dialog.choose_questions = lambda parent: str(good)
    dialog.load_file()
    assert dialog.questions.toPlainText() == "First?\nSecond?"
    assert dialog.run_button.isEnabled()

    window.bridge.close()  # the engine is gone: the dialog says so and sends nothing
    dialog.start()
    assert "not connected" in dialog.status.text() and not dialog.running


class PrioritisedClient(FakeClient):
    """The fake client, taking the priority the real one takes (and noting it)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.priorities: list[str] = []

    def ask_stream(
        self,
        *,
        question: str,
        k: int = 5,
        priority: Priority = "interactive",
        cancel: threading.Event | None = None,
    ) -> Iterator[AnswerEvent]:
        self.priorities.append(priority)
        yield from super().ask_stream(question=question, k=k, cancel=cancel)


def test_cancel_keeps_the_table_and_a_new_run_starts_clean(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    client = PrioritisedClient(token_delay_s=0.2)
    window = make_window(client)
    dialog = window.show_batch()
    dialog.questions.setPlainText("\n".join(f"Question {n}?" for n in range(20)))
    dialog.start()
    assert dialog.running
    qtbot.waitUntil(lambda: len(client.priorities) >= 2, timeout=5_000)
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.running, timeout=5_000)
    assert "20 not answered" in dialog.status.text()
    assert dialog.model.index(19, 2).data() == "Not answered (cancelled)"
    assert dialog.run_button.isEnabled() and dialog.export_csv_button.isEnabled()
    assert set(client.priorities) == {"background"}
    assert len(client.priorities) <= 16  # the bound: the rest were never sent

    client.token_delay_s = 0.0
    dialog.questions.setPlainText("Again?\nOnce more?")
    dialog.start()
    qtbot.waitUntil(lambda: not dialog.running, timeout=10_000)
    qtbot.wait(600)  # the cancelled run's answers finish meanwhile; none may land here
    assert dialog.model.rowCount() == 2
    assert [r.status for r in dialog.model.results()] == ["answered", "answered"]
    assert (
        dialog.model.index(0, 2).data() == "Tomatoes need six hours of sun [1] and warm soil [2]."
    )


def test_a_long_question_shows_its_second_line_before_its_answer(
    make_window: MakeWindow, qtbot: QtBot
) -> None:
    """Issue #44, 8: rows were fitted to their text only when an answer landed."""
    client = FakeClient(token_delay_s=1.0)
    window = make_window(client)
    dialog = window.show_batch()
    long = "How do I " + "change the settings of the thing that holds the other thing, " * 3
    dialog.questions.setPlainText(f"{long}?\nShort?")
    dialog.start()
    line = dialog.table.fontMetrics().lineSpacing()
    qtbot.waitUntil(lambda: dialog.table.rowHeight(0) >= 2 * line, timeout=2_000)
    assert dialog.model.index(0, 2).data() == "Answering…"  # before the answer
    assert dialog.table.rowHeight(1) < 2 * line
    dialog.table.horizontalHeader().resizeSection(1, 120)  # narrower: more lines
    qtbot.waitUntil(lambda: dialog.table.rowHeight(0) >= 4 * line, timeout=2_000)
    dialog.cancel()
