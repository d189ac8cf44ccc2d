"""The transcript's view: a reading width on a wide screen, the window's width on a
narrow one, and the empty conversation's hint whole."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.chat.transcript_view import READING_CHARS, TranscriptView

HINT = "Ask about your documents: answers cite [1], [2]…"


def _view(qtbot: QtBot, *, width: int, height: int = 300) -> TranscriptView:
    view = TranscriptView(hint=HINT)
    view.document().setDocumentMargin(14)
    qtbot.addWidget(view)
    view.resize(width, height)
    view.show()
    qtbot.waitExposed(view)
    QApplication.processEvents()
    return view


def test_on_a_wide_screen_lines_stop_at_a_reading_width(qtbot: QtBot) -> None:
    view = _view(qtbot, width=2400)
    view.setPlainText("a few words " * 400)
    QApplication.processEvents()
    cap = view.reading_width()
    assert view.viewport().width() > cap
    assert view.line_width() == cap
    assert view.document().size().width() <= cap
    # About READING_CHARS characters a line, not the 2400 px the view has.
    chars = cap / view.fontMetrics().averageCharWidth()
    assert READING_CHARS <= chars < READING_CHARS + 10

    view.resize(400, 300)  # narrower than the cap: the view's width, no sideways scroll
    QApplication.processEvents()
    assert view.line_width() == view.viewport().width()
    assert view.horizontalScrollBar().maximum() == 0
    view.resize(2400, 300)
    QApplication.processEvents()
    assert view.line_width() == cap


def test_the_hint_wraps_whole_in_a_narrow_column(qtbot: QtBot) -> None:
    # Qt's own placeholder kept only its first line: "Ask about your documents:".
    view = _view(qtbot, width=220)
    assert view.document().isEmpty() and view.hint() == HINT
    image = view.viewport().grab().toImage()
    background = image.pixelColor(image.width() - 2, image.height() - 2)
    inked = [
        y
        for y in range(image.height())
        if any(image.pixelColor(x, y) != background for x in range(image.width()))
    ]
    line = view.fontMetrics().lineSpacing()
    assert inked, "no hint drawn"
    assert max(inked) - min(inked) > 1.5 * line  # more than one line of it

    view.setPlainText("An answer")  # a conversation: no hint over it
    QApplication.processEvents()
    assert not view.document().isEmpty()
