"""The long PDF of `ragdoll bench ingest --parts ask-during`: real pages of several
PDFs, each once while they last (the benchmark itself needs the real manuals and an
engine process: it is run by hand, docs/benchmarks.md)."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium

from engine.bench.ask_during import long_pdf, pdf_sources
from tests.fixtures.pdf_factory import PdfPage, write_pdf


def test_the_long_pdf_takes_every_source_page_once_before_repeating(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name, count in (("a", 3), ("b", 2)):
        pages = [PdfPage(paragraphs=[f"Manual {name}, page {i}."]) for i in range(count)]
        write_pdf(path=src / f"{name}.pdf", pages=pages)
    (src / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    out = tmp_path / "long.pdf"
    assert long_pdf(sources=pdf_sources(src), pages=7, out=out) == 7
    pdf = pdfium.PdfDocument(str(out))
    texts = [pdf[i].get_textpage().get_text_range() for i in range(len(pdf))]
    pdf.close()
    order = [t.split(",")[0].split()[-1] + t.split("page ")[1][0] for t in texts]
    assert order == ["a0", "a1", "a2", "b0", "b1", "a0", "a1"]
