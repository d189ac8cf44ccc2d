"""What one file's ingestion embeds (engine/rag/ingest/indexer.py): each chunk under
its section's title, while the stored and quoted text stays the chunk's own; a
chunk is embedded again only when its text or its section changed; the embedder
switch's re-embedding gives the same vectors as ingestion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.ingest_many import StandInEmbedder
from engine.rag.ingest import indexer
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.formats.base import Heading, PageText, ParsedDocument
from engine.rag.ingest.indexer import ChunkingParams, index_file
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import embedded_hash

INSTALL = "Run the installer from the first disc and follow the screens to the end."
NETWORK = "Edit the interfaces file to give the machine a fixed address on boot."


class Recording(StandInEmbedder):
    """Hash vectors, and every text it was asked to embed."""

    def __init__(self, *, real: Embedder) -> None:
        super().__init__(real=real)
        self.texts: list[str] = []

    def _encode_beside(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        self.texts.extend(texts)
        return super()._encode_beside(texts, batch_size=batch_size)


@pytest.fixture
def embedder(real: Embedder) -> Recording:
    return Recording(real=real)


def _parser(titles: list[str]):  # type: ignore[no-untyped-def]
    """Two pages, each opening with a heading whose title is `titles[i]`."""

    def parse(*, path: Path) -> ParsedDocument:
        pages = [
            PageText(number=i + 1, text=text, headings=(Heading(offset=0, title=title),))
            for i, (title, text) in enumerate(zip(titles, [INSTALL, NETWORK], strict=True))
        ]
        return ParsedDocument(path=path, pages=pages, page_count=2)

    return parse


def _index(*, path: Path, store: LanceStore, embedder: Recording, titles: list[str]) -> str:
    embedder.texts.clear()
    outcome = index_file(
        path=path,
        store=store,
        embedder=embedder,
        params=ChunkingParams(),
        parse=_parser(titles),
    )
    return outcome.status


def _rows(store: LanceStore) -> dict[str, dict]:  # type: ignore[type-arg]
    rows = store.chunks.to_arrow().to_pylist()
    return {r["chunk_id"]: r for r in rows}


def test_the_embedded_text_carries_the_title_and_the_stored_text_does_not(
    tmp_path: Path, store: LanceStore, embedder: Recording
) -> None:
    doc = tmp_path / "manual.txt"
    doc.write_text("version 1")
    assert _index(path=doc, store=store, embedder=embedder, titles=["Installing", "Network"]) == (
        "indexed"
    )
    assert sorted(embedder.texts) == sorted([f"Installing\n{INSTALL}", f"Network\n{NETWORK}"])
    rows = sorted(_rows(store).values(), key=lambda r: r["ordinal"])
    assert [r["text"] for r in rows] == [INSTALL, NETWORK]
    assert [r["section"] for r in rows] == ["Installing", "Network"]
    chunk = store.chunk(chunk_id=rows[0]["chunk_id"])
    assert chunk is not None and chunk.text == INSTALL


def test_only_a_chunk_whose_section_changed_is_embedded_again(
    tmp_path: Path, store: LanceStore, embedder: Recording
) -> None:
    doc = tmp_path / "manual.txt"
    doc.write_text("version 1")
    _index(path=doc, store=store, embedder=embedder, titles=["Installing", "Network"])
    before = _rows(store)

    # The same file again: nothing is read, nothing embedded.
    assert _index(path=doc, store=store, embedder=embedder, titles=["x", "y"]) == "unchanged"
    assert embedder.texts == []

    # The file changed, its chunks' text and sections did not: every vector is reused.
    doc.write_text("version 2")
    assert _index(path=doc, store=store, embedder=embedder, titles=["Installing", "Network"]) == (
        "indexed"
    )
    assert embedder.texts == []

    # The second page's section was renamed: its chunk alone is embedded, under the new title.
    doc.write_text("version 3")
    _index(path=doc, store=store, embedder=embedder, titles=["Installing", "Networking"])
    assert embedder.texts == [f"Networking\n{NETWORK}"]
    after = _rows(store)
    first = next(cid for cid, r in after.items() if r["text"] == INSTALL)
    second = next(cid for cid, r in after.items() if r["text"] == NETWORK)
    assert np.array_equal(after[first]["vector"], before[first]["vector"])
    assert not np.allclose(after[second]["vector"], before[second]["vector"])
    assert after[second]["text_hash"] == embedded_hash(section="Networking", text=NETWORK)


def test_the_embedder_switch_embeds_what_ingestion_embedded(
    tmp_path: Path, store: LanceStore, embedder: Recording
) -> None:
    doc = tmp_path / "manual.txt"
    doc.write_text("version 1")
    _index(path=doc, store=store, embedder=embedder, titles=["Installing", ""])
    ingested = {cid: r["vector"] for cid, r in _rows(store).items()}
    embedder.texts.clear()
    list(
        store.reembed(
            embedder_id="another",
            dimension=embedder.info.dimension,
            embed=lambda texts: embedder.embed(texts, background=True),
        )
    )
    assert sorted(embedder.texts) == sorted([f"Installing\n{INSTALL}", NETWORK])
    switched = {cid: r["vector"] for cid, r in _rows(store).items()}
    assert switched.keys() == ingested.keys()
    for cid, vector in ingested.items():
        assert np.allclose(switched[cid], vector)


def test_a_file_read_by_an_older_reader_is_read_again_keeping_its_vectors(
    tmp_path: Path, store: LanceStore, embedder: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "manual.txt"
    doc.write_text("version 1")
    _index(path=doc, store=store, embedder=embedder, titles=["Installing", "Network"])
    (known,) = store.list_documents()
    assert known.reader == indexer.READER_VERSION
    before = _rows(store)

    # A newer reader: the unchanged file is read again; its chunks are the same
    # text under the same titles, so nothing is embedded and every vector stays.
    monkeypatch.setattr(indexer, "READER_VERSION", indexer.READER_VERSION + 1)
    assert _index(path=doc, store=store, embedder=embedder, titles=["Installing", "Network"]) == (
        "indexed"
    )
    assert embedder.texts == []
    assert {cid: r["vector"] for cid, r in _rows(store).items()} == {
        cid: r["vector"] for cid, r in before.items()
    }
    (reread,) = store.list_documents()
    assert reread.reader == indexer.READER_VERSION
    # Read by the newest reader now: the next scan skips it.
    assert _index(path=doc, store=store, embedder=embedder, titles=["x", "y"]) == "unchanged"


def test_a_disk_full_error_is_never_a_files_state(tmp_path: Path, store: LanceStore) -> None:
    """An older version recorded "the disk is full" as a file's error and never read it
    again; such a row is read again, and no such row is written any more."""
    from engine.rag.ingest.discovery import IgnoreRules
    from engine.rag.ingest.journal import Journal
    from engine.rag.store.records import DocumentRecord

    path = tmp_path / "notes.txt"
    path.write_text(INSTALL)
    stat = path.stat()
    old = "could not read the file: the disk at /mnt (holding /mnt/index) is full"
    key, doc_id = str(path), indexer.doc_id_for(path)
    row = DocumentRecord(
        doc_id=doc_id,
        path=key,
        size=stat.st_size,
        mtime=stat.st_mtime,
        content_hash="",
        status="error",
        error=old,
        pages=None,
        chunks=0,
        reader=indexer.READER_VERSION,
    )
    store.record_document(doc=row)
    step = indexer.triage(path=path, store=store, journal=Journal(store=store), rules=IgnoreRules())
    assert isinstance(step, indexer.ToParse)  # read again, though it did not change

    store.remove_document(doc_id=doc_id)
    journal = Journal(store=store)
    parse_failed = "could not read the file (OSError: [Errno 28] No space left on device)"
    outcome = indexer.record_error(store=store, journal=journal, path=path, reason=parse_failed)
    assert outcome.status == "error" and store.list_documents() == []
