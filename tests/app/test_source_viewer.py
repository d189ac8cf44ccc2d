from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.viewer.source_viewer import HIGHLIGHT, SourceViewer, qt_span
from engine.wire import SourceView


def test_qt_span_counts_utf16_units_and_folds_crlf() -> None:
    text = "a😀b\r\nc target d"
    start = text.index("target")
    qt_text, qs, qe = qt_span(text=text, start=start, end=start + 6)
    # One extra unit for the emoji (a surrogate pair), one fewer for "\r\n".
    assert (qs, qe) == (start, start + 6)
    assert "\r" not in qt_text


def test_qt_span_clamps_a_span_outside_the_text() -> None:
    _, start, end = qt_span(text="short", start=3, end=99)
    assert (start, end) == (3, 5)


def test_viewer_highlights_the_span_on_a_long_page(qtbot: QtBot) -> None:
    lines = [f"line {i} of filler text to make the page long." for i in range(300)]
    lines[250] = "THE PASSAGE 😀 that the answer cited."
    page = "\r\n".join(lines)
    start = page.index("THE PASSAGE")
    end = start + len(lines[250])
    viewer = SourceViewer()
    qtbot.addWidget(viewer)
    viewer.show_source(
        SourceView(
            chunk_id="c",
            path="/nowhere/long.txt",
            page=None,
            page_count=None,
            page_text=page,
            char_start=start,
            char_end=end,
        )
    )
    qtbot.waitExposed(viewer)
    assert viewer.windowTitle() == "long.txt"
    assert not viewer.open_button.isEnabled()  # the file does not exist here
    (selection,) = viewer.text.extraSelections()
    assert selection.cursor.selectedText() == lines[250]
    assert selection.format.background().color() == HIGHLIGHT
    rect = viewer.text.cursorRect(selection.cursor)
    assert viewer.text.viewport().rect().contains(rect.center())
    assert viewer.text.verticalScrollBar().value() > 0
