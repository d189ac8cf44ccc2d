"""A cited passage on a scanned PDF page (no text layer) is highlighted from
the OCR lines' boxes."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium
import pytest

from app.viewer.pdf_render import PageRequest, render_page
from engine.rag.ingest.parsers import parse_file
from tests.fixtures.pdf_factory import PdfPage, write_pdf

pytest.importorskip("rapidocr")

SENTENCE = "Replace the filter cartridge every six months."


@pytest.mark.slow  # two pages of OCR
def test_passage_on_a_scanned_page_is_highlighted(tmp_path: Path) -> None:
    manual = write_pdf(
        path=tmp_path / "manual.pdf",
        pages=[PdfPage(heading="Filters", paragraphs=["Intro line.", SENTENCE, "Last line."])],
    )
    document = pdfium.PdfDocument(str(manual))
    scan = document[0].render(scale=150 / 72).to_pil().convert("RGB")
    document.close()
    scanned = tmp_path / "scanned.pdf"
    scan.save(scanned, resolution=150)

    page = parse_file(path=scanned).pages[0]
    start = page.text.index("Replace")
    passage = page.text[start : page.text.index("months", start) + len("months.")]
    rendered = render_page(PageRequest(path=str(scanned), page=1, scale=1.0, passage=passage))
    assert rendered.found
    assert len(rendered.highlights) == 1
    box = rendered.highlights[0]
    # The box lies on the sentence's line: inside the page, a line high.
    assert 0 < box.top() < box.bottom() < rendered.image.height()
    assert box.height() < rendered.image.height() / 20
    assert "cartridge" in rendered.text
