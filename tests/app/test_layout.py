"""Layouts that hold: the answer column keeps a useful width at every window size,
long messages wrap instead of widening the library, and the split is the user's."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.main_window import ANSWER_MIN_WIDTH
from app.wrap_label import ElidedGroupBox
from engine.wire import IngestProgress, WatchedFolder
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient

LONG = "/home/someone/Documents/" + "/".join(["a-rather-long-folder-name"] * 6)


def _answer_width(window) -> int:  # type: ignore[no-untyped-def]
    return window.chat.split.width()


def _paused(job: str = "j") -> IngestProgress:
    return IngestProgress(
        job_id=job,
        state="running",
        origin="request",
        files_total=40,
        files_done=3,
        paused=True,
        current=LONG + "/a-file-with-a-very-long-name-indeed-that-goes-on.pdf",
    )


def _settle(qtbot: QtBot) -> None:
    QApplication.processEvents()
    qtbot.wait(30)


def test_the_answer_column_keeps_its_width_at_800_by_600(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window(FakeClient())
    window.resize(800, 600)
    _settle(qtbot)
    assert _answer_width(window) >= ANSWER_MIN_WIDTH
    library = window.splitter.sizes()[0]
    assert library <= 0.4 * window.width()

    # The Pause message, a long file being read and long watched folders: the
    # library wraps them; neither pane moves.
    window.library.start_job()
    window.library.show_progress(_paused())
    window.library.set_paused(True)
    window.library.set_folders(
        [WatchedFolder(path=LONG + f"/{i}", collection="default") for i in range(3)]
    )
    _settle(qtbot)
    assert window.splitter.sizes()[0] == library
    assert _answer_width(window) >= ANSWER_MIN_WIDTH
    pace = window.library.pace_label
    assert pace.text().startswith("Paused")
    # Wrapped whole on lines of its own: not a word a line, not cut off.
    assert pace.width() > 0.8 * window.library.progress_box.width()
    assert pace.height() >= pace.heightForWidth(pace.width())


def test_at_every_size_the_answer_column_stays_useful(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    window = make_window(FakeClient())
    window.library.start_job()
    window.library.show_progress(_paused())
    for width, height in ((700, 500), (800, 600), (1024, 700), (1400, 900), (2560, 1440)):
        window.resize(width, height)
        _settle(qtbot)
        assert _answer_width(window) >= ANSWER_MIN_WIDTH, (width, window.splitter.sizes())
        # The larger the window, the more of it goes to the answer.
        assert window.splitter.sizes()[1] >= window.splitter.sizes()[0]


def test_the_split_is_the_users_and_is_remembered(qtbot: QtBot, make_window: MakeWindow) -> None:
    window = make_window(FakeClient())
    window.resize(800, 600)  # within the offscreen screen, where the geometry is restored
    _settle(qtbot)
    default = window.splitter.sizes()
    window.splitter.setSizes([default[0] + 25, default[1] - 25])
    _settle(qtbot)
    chosen = window.splitter.sizes()
    assert chosen != default
    window.library.start_job()
    window.library.show_progress(_paused())
    window.library.set_folders([WatchedFolder(path=LONG, collection="default")])
    _settle(qtbot)
    assert window.splitter.sizes() == chosen  # content does not move it
    window.close()
    again = make_window(FakeClient())
    _settle(qtbot)
    # Within the 2 px by which the offscreen platform restores a window narrower.
    assert abs(again.splitter.sizes()[0] - chosen[0]) <= 2


def test_a_long_progress_title_is_cut_to_the_box_not_the_pane(qtbot: QtBot) -> None:
    box = ElidedGroupBox("Checking watched folders for changes (queued)")
    qtbot.addWidget(box)
    box.resize(160, 80)
    box.show()
    qtbot.waitExposed(box)
    assert box.title() == "Checking watched folders for changes (queued)"
    assert box.shown_title().endswith("…")
    assert box.fontMetrics().horizontalAdvance(box.shown_title()) <= box.width()
    assert box.minimumSizeHint().width() <= 120  # a long title never widens its pane
    assert box.toolTip() == box.title()
    box.resize(900, 80)
    qtbot.waitUntil(lambda: box.shown_title() == box.title(), timeout=2000)


def test_at_1024_by_700_a_source_keeps_its_marker_and_page(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    """Issue #44, 8: "[1]  maint-guide.pdf — pa…files": the title was cut in its middle."""
    from dataclasses import replace

    from PySide6.QtGui import QFont, QFontMetrics

    from app.chat.sources_model import SourceDelegate, fitted_title
    from tests.app.fake_client import CITATIONS

    window = make_window(FakeClient())
    window.resize(1024, 700)
    _settle(qtbot)
    view = window.chat.sources
    width = view.viewport().width() - 3 * SourceDelegate._PAD - 2
    bold = QFont(view.font())
    bold.setBold(True)
    metrics = QFontMetrics(bold)
    cited = replace(
        CITATIONS[0],
        path="/usr/share/doc/maint-guide/maint-guide.en.pdf",
        page=12,
        section="5.13 Other debian/* files, and what each of them holds for the package",
    )
    assert metrics.horizontalAdvance(f"[1]  maint-guide.en.pdf — page 12 — {cited.section}") > width
    title = fitted_title(citation=cited, metrics=metrics, width=width)
    assert title.startswith("[1]  maint-guide.en.pdf — page 12 — 5.13"), title
    assert title.endswith("…") and metrics.horizontalAdvance(title) <= width
    long_name = replace(cited, path="/docs/" + "a-very-long-file-name-" * 6 + "end.pdf")
    title = fitted_title(citation=long_name, metrics=metrics, width=width)
    assert title.startswith("[1]  a-very") and title.endswith("end.pdf — page 12"), title
    assert metrics.horizontalAdvance(title) <= width
