from __future__ import annotations

from app.chat.answer_render import (
    answer_html,
    chunk_id_from_href,
    citation_href,
    elide,
    file_name,
    source_title,
)
from tests.app.fake_client import CITATIONS


def test_markers_become_links_to_their_chunk() -> None:
    html = answer_html(text="Sun [1] and soil [2].", citations=CITATIONS)
    assert f'href="{citation_href(chunk_id="doc-a/p2#0")}"' in html
    assert f'href="{citation_href(chunk_id="doc-b#3")}"' in html
    assert html.count("<a ") == 2


def test_a_marker_split_over_tokens_links_only_once_complete() -> None:
    assert "<a " not in answer_html(text="Sun [", citations=CITATIONS)
    assert "<a " in answer_html(text="Sun [1]", citations=CITATIONS)


def test_grouped_markers_link_each_number_and_unknown_numbers_stay_text() -> None:
    html = answer_html(text="Both [1, 2]; invented [9].", citations=CITATIONS)
    assert html.count("<a ") == 2
    assert "[9]" in html


def test_answer_text_is_escaped_and_keeps_line_breaks() -> None:
    html = answer_html(text="a <b>bold</b> & claim\nnext", citations=[])
    assert "<b>" not in html
    assert "&lt;b&gt;" in html
    assert "&amp;" in html
    assert "<br>" in html


def test_href_round_trips_odd_chunk_ids() -> None:
    for chunk_id in ("doc-a/p2#0", "a b?c=d&e", "ünï"):
        assert chunk_id_from_href(href=citation_href(chunk_id=chunk_id)) == chunk_id
    assert chunk_id_from_href(href="https://example.com") is None


def test_titles_and_eliding() -> None:
    assert source_title(citation=CITATIONS[0]) == "garden guide.pdf — page 2"
    assert source_title(citation=CITATIONS[1]) == "notes.md"
    assert file_name(path=r"C:\Users\me\report.pdf") == "report.pdf"
    text = "word " * 100
    short = elide(text=text, limit=40)
    assert len(short) <= 40
    assert short.endswith("…")
    assert elide(text="  a\n\n b  ", limit=40) == "a b"


def test_page_titles_name_slides_sheets_chapters_and_messages() -> None:
    from app.chat.answer_render import page_title

    assert page_title(path="/d/deck.pptx", page=3) == "deck.pptx — slide 3"
    assert page_title(path="/d/book.EPUB", page=2) == "book.EPUB — chapter 2"
    assert page_title(path="/d/a.pdf", page=1) == "a.pdf — page 1"
    assert page_title(path="/d/notes.txt", page=None) == "notes.txt"
