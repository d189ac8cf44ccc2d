from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QKeySequence, QWheelEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.viewer.passage_match import locate
from app.viewer.pdf_render import PageRequest, render_page
from app.viewer.source_viewer import HIGHLIGHT, SourceViewer, qt_span
from engine.rag.ingest.parsers import parse_file
from engine.wire import SourceView
from tests.fixtures.pdf_factory import PdfPage, write_pdf


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


# -- PDFs: the page rendered by pdfium, the passage found and drawn over it ----------------

PASSAGE_PDF = (
    "Tomatoes need at least six hours of direct sunlight every day, and their "
    "soil must stay evenly moist without ever becoming waterlogged."
)


def garden_pdf(tmp_path: Path) -> Path:
    filler = "Compost improves the structure of clay soils and feeds the worms. " * 6
    return write_pdf(
        path=tmp_path / "garden.pdf",
        pages=[
            PdfPage(heading="Soil", paragraphs=[filler]),
            PdfPage(heading="Tomatoes", paragraphs=[filler, PASSAGE_PDF, filler]),
            PdfPage(heading="Peppers", paragraphs=[filler]),
        ],
    )


def engine_source(path: Path, *, page: int, passage: str) -> SourceView:
    """What the engine sends for a chunk: pypdf's cleaned page text and the span."""
    parsed = parse_file(path=path)
    text = parsed.pages[page - 1].text
    flat = " ".join(passage.split())
    # The cleaned text may break lines anywhere: find the passage ignoring spacing.
    pattern = r"\s+".join(re.escape(word) for word in flat.split())
    match = re.search(pattern, text)
    assert match is not None
    return SourceView(
        chunk_id="c",
        path=str(path),
        page=page,
        page_count=parsed.page_count,
        page_text=text,
        char_start=match.start(),
        char_end=match.end(),
    )


def test_locate_ignores_spacing_case_hyphens_and_ligatures() -> None:
    chars = list("Intro.\r\nThe ﬁrst pass-\r\nage is HERE and   there.\r\nEnd")
    span = locate(chars=chars, passage="the first passage is here and there.")
    assert span is not None
    first, last = span
    assert "".join(chars[first : last + 1]) == "The ﬁrst pass-\r\nage is HERE and   there."
    assert locate(chars=chars, passage="not on this page") is None
    assert locate(chars=chars, passage="   ") is None


def test_locate_bridges_a_middle_that_differs_by_its_two_ends() -> None:
    text = "aa The passage begins here and runs [TABLE 1] and then it goes on until it ends here. b"
    passage = "The passage begins here and runs and then it goes on until it ends here."
    span = locate(chars=list(text), passage=passage)
    assert span is not None
    assert "".join(list(text)[span[0] : span[1] + 1]).startswith("The passage begins")
    assert "".join(list(text)[span[0] : span[1] + 1]).endswith("it ends here.")


def test_render_page_draws_the_passage_boxes_where_its_text_is(tmp_path: Path) -> None:
    path = garden_pdf(tmp_path)
    rendered = render_page(PageRequest(path=str(path), page=2, scale=1.5, passage=PASSAGE_PDF))
    assert rendered.page_count == 3 and not rendered.error
    assert rendered.found and len(rendered.highlights) >= 2  # the passage wraps
    width, _height = rendered.size_pt
    assert rendered.image.width() == round(width * 1.5)
    for box in rendered.highlights:
        assert 0 <= box.left() < box.right() <= rendered.image.width()
        assert 0 <= box.top() < box.bottom() <= rendered.image.height()
        # Highlighted pixels hold ink: the box is over text, not blank paper.
        dark = sum(
            rendered.image.pixelColor(int(x), int(box.center().y())).lightness() < 128
            for x in range(int(box.left()), int(box.right()))
        )
        assert dark > 0
    other = render_page(PageRequest(path=str(path), page=3, scale=1.0, passage=PASSAGE_PDF))
    assert not other.found and other.highlights == ()


def test_the_viewer_shows_the_pdf_page_pages_zooms_and_toggles_to_text(
    qtbot: QtBot, tmp_path: Path
) -> None:
    path = garden_pdf(tmp_path)
    opened: list[dict[str, object]] = []
    viewer = SourceViewer(open_at_page=lambda **kw: opened.append(kw))
    qtbot.addWidget(viewer)
    with qtbot.waitSignal(viewer.pdf.sig_rendered, timeout=10_000):
        viewer.show_source(engine_source(path, page=2, passage=PASSAGE_PDF))
    assert viewer.showing_image
    shown = viewer.pdf.shown
    assert shown is not None and shown.found and shown.highlights
    assert viewer.pdf.status.text() == ""
    # The text view still holds the engine's page with the passage highlighted.
    (selection,) = viewer.text.extraSelections()
    assert " ".join(selection.cursor.selectedText().split()) == PASSAGE_PDF

    with qtbot.waitSignal(viewer.pdf.sig_rendered, timeout=10_000):
        viewer.pdf.next_button.click()
    assert viewer.pdf.page == 3 and "page 3 of 3" in viewer.path_label.text()
    assert viewer.pdf.shown is not None and not viewer.pdf.shown.highlights
    assert not viewer.pdf.next_button.isEnabled()
    viewer.text_mode.click()
    assert not viewer.showing_image
    assert "Peppers" in viewer.text.toPlainText()  # pdfium's text of page 3
    viewer.image_mode.click()

    before = viewer.pdf.zoom
    with qtbot.waitSignal(viewer.pdf.sig_rendered, timeout=10_000):
        viewer.pdf.zoom_in_button.click()
    assert viewer.pdf.zoom > before
    assert viewer.pdf.shown is not None and viewer.pdf.shown.image.width() > shown.image.width()

    zoomed = viewer.pdf.zoom
    viewport = viewer.pdf.scroll.viewport()
    centre = QPointF(viewport.rect().center())
    wheel = QWheelEvent(
        centre,
        QPointF(viewport.mapToGlobal(centre.toPoint())),
        QPoint(0, 0),
        QPoint(0, 120),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.ControlModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    with qtbot.waitSignal(viewer.pdf.sig_rendered, timeout=10_000):
        QApplication.sendEvent(viewport, wheel)
    assert viewer.pdf.zoom > zoomed

    viewer.open_page_button.click()
    assert opened == [{"path": str(path), "page": 3}]


def test_a_missing_pdf_falls_back_to_the_text_view(qtbot: QtBot) -> None:
    viewer = SourceViewer(open_at_page=lambda **kw: None)
    qtbot.addWidget(viewer)
    viewer.show_source(
        SourceView(
            chunk_id="c",
            path="/nowhere/gone.pdf",
            page=2,
            page_count=3,
            page_text="some text",
            char_start=0,
            char_end=4,
        )
    )
    assert not viewer.showing_image
    assert not viewer.modes.isVisible()
    assert not viewer.open_page_button.isEnabled()


def test_open_at_this_page_without_a_system_viewer_says_so(qtbot: QtBot, tmp_path: Path) -> None:
    """No viewer takes a page and nothing opens PDFs: the window says it, rather
    than a traceback on stderr and nothing on screen."""
    path = garden_pdf(tmp_path)

    def no_viewer(**kw: object) -> object:
        raise FileNotFoundError("xdg-open")

    tried: list[str] = []
    viewer = SourceViewer(open_at_page=no_viewer, open_file=lambda p: tried.append(p) or False)
    qtbot.addWidget(viewer)
    viewer.show_source(engine_source(path, page=2, passage=PASSAGE_PDF))
    viewer.open_page_button.click()
    assert tried == [str(path)]
    assert viewer.message_label.isVisibleTo(viewer)
    assert "No program on this computer opens .pdf files" in viewer.message_label.text()
    # The next source starts clean.
    viewer.show_source(engine_source(path, page=2, passage=PASSAGE_PDF))
    assert not viewer.message_label.isVisibleTo(viewer)


def test_a_viewer_that_ignores_the_page_is_explained(qtbot: QtBot, tmp_path: Path) -> None:
    from native.open_page import ViewerCommand

    path = garden_pdf(tmp_path)
    viewer = SourceViewer(
        open_at_page=lambda **kw: ViewerCommand(argv=["xdg-open"], honours_page=False),
        open_file=lambda p: True,
    )
    qtbot.addWidget(viewer)
    viewer.show_source(engine_source(path, page=2, passage=PASSAGE_PDF))
    viewer.open_page_button.click()
    assert "first page" in viewer.message_label.text() and "page 2" in viewer.message_label.text()


def test_a_viewer_closed_before_its_scroll_timer_fires_is_left_alone(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """A render arriving just before the viewer is closed queues a scroll to the
    passage: the timer must not reach the deleted scroll area."""
    import shiboken6

    from app.viewer.pdf_view import PdfPageView

    pdf = garden_pdf(tmp_path)
    page = render_page(PageRequest(path=str(pdf), page=2, scale=1.0, passage=PASSAGE_PDF))
    assert page.highlights
    view = PdfPageView()  # not given to qtbot: it is deleted here, not at teardown
    view._scroll_to(page)
    shiboken6.delete(view)
    qtbot.wait(50)  # the queued scroll would raise in the event loop here


def test_locate_finds_a_passage_the_engine_rewrote_from_pdf_glyphs() -> None:
    # What pdfium reads on the bash manual page and a Sphinx PDF, against the text
    # the engine stored (engine/rag/ingest/text_cleanup.py): "˜" for "~", a spacing
    # accent before its letter, a code line wrapped with "␣" and "˓→".
    chars = list("reads ˜/.bashrc, for P´eter: (fi),␣\r\n˓→French (fr). End")
    passage = "reads ~/.bashrc, for Péter: (fi), French (fr)."
    span = locate(chars=chars, passage=passage)
    assert span is not None
    assert "".join(chars[span[0] : span[1] + 1]) == "".join(chars[:-4])


def test_find_in_the_page_text(qtbot: QtBot, tmp_path: Path) -> None:
    """Issue #44, 8: the viewer had no find. Ctrl+F, the words, Enter / Shift+Enter,
    wrapping; on a PDF shown as an image the search shows its text."""
    from PySide6.QtTest import QTest

    path = garden_pdf(tmp_path)
    viewer = SourceViewer(open_at_page=lambda **kw: None)
    qtbot.addWidget(viewer)
    with qtbot.waitSignal(viewer.pdf.sig_rendered, timeout=10_000):
        viewer.show_source(engine_source(path, page=2, passage=PASSAGE_PDF))
    qtbot.waitExposed(viewer)
    assert viewer.showing_image
    QTest.keySequence(viewer, QKeySequence(QKeySequence.StandardKey.Find))
    bar = viewer.find_bar
    assert bar.field.hasFocus()
    word = PASSAGE_PDF.split()[1]
    page = viewer.text.toPlainText().lower()
    count = page.count(word.lower())
    assert count >= 1
    qtbot.keyClicks(bar.field, word)
    assert not viewer.showing_image  # the matches are selected in the text
    assert viewer.text.textCursor().selectedText().lower() == word.lower()
    assert bar.count_label.text() == f"1 of {count}"
    first = viewer.text.textCursor().selectionStart()
    for _ in range(count):  # Enter goes round to the first match again
        qtbot.keyClick(bar.field, Qt.Key.Key_Return)
    assert viewer.text.textCursor().selectionStart() == first
    qtbot.keyClick(bar.field, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert bar.count_label.text() == f"{count} of {count}"
    (selection,) = viewer.text.extraSelections()  # the passage stays highlighted
    assert " ".join(selection.cursor.selectedText().split()) == PASSAGE_PDF
    bar.field.setText("no such words anywhere")
    assert bar.count_label.text() == "no match"
    qtbot.keyClick(bar.field, Qt.Key.Key_Escape)  # cleared: back to the passage
    assert bar.field.text() == "" and not viewer.text.textCursor().hasSelection()
    rect = viewer.text.cursorRect(selection.cursor)
    assert viewer.text.viewport().rect().contains(rect.center())
