"""Bad files become entries in the error list; the rest is ingested and the
engine keeps running."""

from __future__ import annotations

import io
from pathlib import Path

from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from engine.ingest.embedder import Embedder
from engine.ingest.indexer import ChunkingParams, index_file
from engine.ingest.parsers import parse_file
from engine.store.lance_store import LanceStore
from tests.support.engine import RunningEngine


def _pdf_bytes(text: str) -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def _encrypted_pdf(text: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_pdf_bytes(text))))
    writer.encrypt(user_password="secret", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _bad_folder(root: Path) -> Path:
    folder = root / "mixed docs"
    folder.mkdir()
    (folder / "good notes.md").write_text(
        "# Greenhouse log\n\nThe tomato seedlings were moved to the east bench on Tuesday. "
        "Watering happens every second morning with rain water from the blue barrel.\n"
    )
    (folder / "locked.pdf").write_bytes(_encrypted_pdf("Secret quarterly figures."))
    (folder / "truncated.pdf").write_bytes(_pdf_bytes("Half a file " * 50)[:300])
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "binary.txt").write_bytes(bytes(range(256)) * 20)
    return folder


def test_bad_files_are_listed_with_reasons_and_the_rest_is_ingested(
    engine: RunningEngine, tmp_path: Path
) -> None:
    folder = _bad_folder(tmp_path)
    result = engine.ragdoll("ingest", str(folder))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "1 ingested" in result.stdout
    reasons = {Path(e.path).name: e.reason for e in engine.client.errors()}
    assert set(reasons) == {"locked.pdf", "truncated.pdf", "empty.pdf", "binary.txt"}
    assert "encrypted" in reasons["locked.pdf"].lower()
    assert "binary" in reasons["binary.txt"].lower()
    for name in reasons:
        assert f"{name}:" in result.stdout  # the summary names every bad file
    status = engine.client.status()  # the engine is still there
    assert status.documents == 1
    answer = engine.client.ask(question="Where did the tomato seedlings go?")
    assert answer.citations and answer.citations[0].path.endswith("good notes.md")


def test_missing_path_and_unsupported_file_are_errors(
    engine: RunningEngine, tmp_path: Path
) -> None:
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    result = engine.ragdoll("ingest", str(tmp_path / "nope"), str(tmp_path / "photo.jpg"))
    assert result.returncode == 2
    assert "not found" in result.stdout
    assert "unsupported file type .jpg" in result.stdout


def test_file_that_vanishes_mid_read_is_an_error(tmp_path: Path) -> None:
    doc = tmp_path / "short-lived.txt"
    doc.write_text("This file will be gone by the time it is read.")
    store = LanceStore(folder=tmp_path / "index")
    embedder = Embedder()
    store.ensure_embedder(embedder_id=embedder.info.id, dimension=embedder.info.dimension)

    def vanish_then_parse(*, path: Path):  # type: ignore[no-untyped-def]
        path.unlink()
        return parse_file(path=path)

    outcome = index_file(
        path=doc, store=store, embedder=embedder, params=ChunkingParams(), parse=vanish_then_parse
    )
    assert outcome.status == "error"
    assert outcome.reason
    assert store.counts() == (0, 0)
    [recorded] = store.list_documents()
    assert recorded.status == "error"
