"""The job's view of the journal, row copies for renamed files, and the
repair of rows a killed engine left without their journal row."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from engine.rag.ingest.journal import Journal, copy_document, remove_orphans
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import ChunkRecord, DocumentRecord, EmbeddedChunks, PageRecord

DIM = 8


def _store(tmp_path: Path) -> LanceStore:
    store = LanceStore(folder=tmp_path / "index")
    store.ensure_embedder(embedder_id="fake", dimension=DIM)
    return store


def _doc(doc_id: str, path: str, chunks: int = 2, digest: str = "h1") -> DocumentRecord:
    return DocumentRecord(
        doc_id=doc_id, path=path, size=10, mtime=1.0, content_hash=digest,
        status="indexed", error=None, pages=None, chunks=chunks,
    )  # fmt: skip


def _write(store: LanceStore, doc: DocumentRecord, *, journal_row: bool = True) -> None:
    chunks = [
        ChunkRecord(
            chunk_id=f"{doc.doc_id}:{i}",
            doc_id=doc.doc_id,
            path=doc.path,
            ordinal=i,
            page=None,
            char_start=0,
            char_end=5,
            text=f"text {i}",
            text_hash=f"t{i}",
        )
        for i in range(doc.chunks)
    ]
    vectors = np.arange(doc.chunks * DIM, dtype=np.float32).reshape(doc.chunks, DIM)
    store.replace_document(
        doc=doc,
        pages=[PageRecord(doc_id=doc.doc_id, page=None, text="text 0 text 1")],
        embedded=EmbeddedChunks(chunks=chunks, vectors=vectors),
    )
    if not journal_row:
        store.documents.delete(f"doc_id = '{doc.doc_id}'")


def test_copy_gives_the_new_path_the_same_chunks_and_vectors(tmp_path: Path) -> None:
    store = _store(tmp_path)
    source = _doc("a", "/docs/old.md")
    _write(store, source)
    target = dataclasses.replace(source, doc_id="b", path="/docs/new.md", chunks=0)
    assert copy_document(store=store, source=source, target=target) == 2
    copied = store.vectors_by_text_hash(doc_id="b")
    np.testing.assert_array_equal(copied["t1"], store.vectors_by_text_hash(doc_id="a")["t1"])
    assert store.chunk(chunk_id="b:1").path == "/docs/new.md"
    assert store.page(doc_id="b", page=None).text == "text 0 text 1"
    assert store.document_by_path(path="/docs/new.md").chunks == 2


def test_a_source_that_is_not_whole_is_not_copied(tmp_path: Path) -> None:
    store = _store(tmp_path)
    source = _doc("a", "/docs/old.md")
    _write(store, source)
    store.chunks.delete("chunk_id = 'a:1'")
    target = dataclasses.replace(source, doc_id="b", path="/docs/new.md")
    assert copy_document(store=store, source=source, target=target) == 0


def test_orphan_rows_of_an_unfinished_document_are_removed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _write(store, _doc("kept", "/docs/kept.md"))
    _write(store, _doc("orphan", "/docs/orphan.md"), journal_row=False)
    assert store.counts() == (1, 4)
    assert remove_orphans(store=store) == 1
    assert store.counts() == (1, 2)
    assert store.vectors_by_text_hash(doc_id="orphan") == {}
    assert remove_orphans(store=store) == 0


def test_touches_are_written_in_one_commit_and_lookups_follow(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for i in range(3):
        store.record_document(doc=_doc(f"d{i}", f"/docs/{i}.md", digest=f"h{i}"))
    journal = Journal(store=store)
    assert journal.with_content(digest="h1").doc_id == "d1"
    version = store.documents.version
    for i in range(3):
        journal.touch(dataclasses.replace(journal.get(path=f"/docs/{i}.md"), mtime=5.0))
    assert store.documents.version == version  # nothing written yet
    journal.flush()
    assert store.documents.version == version + 1
    assert {d.mtime for d in store.list_documents()} == {5.0}
    journal.forget(path="/docs/1.md")
    assert journal.with_content(digest="h1") is None and journal.get(path="/docs/1.md") is None
