"""The long PDF of `ragdoll bench ingest --parts ask-during`: real pages of several
PDFs, each once while they last (the benchmark itself needs the real manuals and an
engine process: it is run by hand, docs/benchmarks.md)."""

from __future__ import annotations

from pathlib import Path

import pypdfium2 as pdfium
import pytest

from bench.ask_during import TIMED, WARM_UP, long_pdf, pdf_sources, phase_questions
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


def test_each_phase_asks_questions_never_asked_before() -> None:
    # A question asked again finds its sentences in the relevance gate's memo:
    # the bench would time the memo, not an answer.
    idle, during = phase_questions(count=10)
    asked = [*WARM_UP, *idle, *during]
    assert len(idle) == len(during) == 10
    assert len(set(asked)) == len(asked)
    assert set(TIMED) >= set(idle) | set(during)


def test_asking_for_more_questions_than_the_bench_has_is_refused() -> None:
    with pytest.raises(ValueError):
        phase_questions(count=len(TIMED))


def test_the_engines_ingestion_embedder_is_read_from_its_log(tmp_path: Path) -> None:
    from bench.ask_during import engine_ingest_embedder
    from engine.rag.ingest.int8_embedder import IN_USE_MESSAGE

    log = tmp_path / "engine.log"
    log.write_text("2026-11-28 INFO engine.core: started\n")
    assert engine_ingest_embedder(log=log) == "float"
    log.write_text(f"2026-11-28 INFO engine.ingest.int8_embedder: {IN_USE_MESSAGE} (cosine …)\n")
    assert engine_ingest_embedder(log=log) == "int8"
    assert engine_ingest_embedder(log=tmp_path / "absent.log").startswith("unknown")
