"""Chunks keep their section title; an index written before the column existed
still opens, its chunks without a section, and takes new ones with it."""

from __future__ import annotations

from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa

from engine.rag.pipeline.answer_stream import citation_for
from engine.rag.store.fulltext import cut_words
from engine.rag.store.lance_store import DOCUMENTS_SCHEMA, LanceStore, chunks_schema
from engine.rag.store.records import ChunkRecord, DocumentRecord, EmbeddedChunks, PageRecord
from engine.wire import Citation, from_json_dict

DIM = 8


def _old_index(folder: Path) -> None:
    db = lancedb.connect(str(folder))
    old_schema = pa.schema([f for f in chunks_schema(DIM) if f.name not in ("section", "words")])
    row = {
        "chunk_id": "old:0",
        "doc_id": "old",
        "path": "/docs/old.txt",
        "ordinal": 0,
        "page": None,
        "char_start": 0,
        "char_end": 22,
        "text": "an old chunk of gravel",
        "text_hash": "t",
        "vector": [1.0] + [0.0] * (DIM - 1),
        "ext": ".txt",
    }
    db.create_table("chunks_old_8", pa.Table.from_pylist([row], schema=old_schema))
    (folder / "meta.json").write_text(
        '{"embedder_id": "old", "dimension": 8, "chunks_table": "chunks_old_8"}'
    )


def _write_new(
    store: LanceStore, *, doc_id: str, text: str, section: str = "", languages: str = ""
) -> None:
    """A new document of one chunk whose vector is the second unit vector."""
    path = f"/docs/{doc_id}.pdf"
    doc = DocumentRecord(
        doc_id=doc_id,
        path=path,
        size=1,
        mtime=1.0,
        content_hash="h",
        status="indexed",
        error=None,
        pages=1,
        chunks=1,
        languages=languages,
    )
    chunk = ChunkRecord(
        chunk_id=f"{doc_id}:0",
        doc_id=doc_id,
        path=path,
        ordinal=0,
        page=1,
        char_start=0,
        char_end=len(text),
        text=text,
        text_hash=doc_id,
        section=section,
    )
    store.replace_document(
        doc=doc,
        pages=[PageRecord(doc_id=doc_id, page=1, text=text)],
        embedded=EmbeddedChunks(
            chunks=[chunk], vectors=np.asarray([[0.0, 1.0] + [0.0] * (DIM - 2)], np.float32)
        ),
    )


def test_old_index_opens_and_new_chunks_keep_their_section(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    _old_index(folder)
    store = LanceStore(folder=folder, background=False)
    try:
        assert store.chunk(chunk_id="old:0").section == ""  # type: ignore[union-attr]
        _write_new(
            store, doc_id="new", text="gravel goes on top", section="5.13 Other debian/* files"
        )
        hits = store.hybrid_search(
            vector=np.asarray([0.0, 1.0] + [0.0] * (DIM - 2), np.float32), text="gravel", k=2
        )
        sections = {h.chunk.chunk_id: h.chunk.section for h in hits}
        assert sections == {"new:0": "5.13 Other debian/* files", "old:0": ""}
        citation = citation_for(1, next(h for h in hits if h.chunk.chunk_id == "new:0"))
        assert citation.section == "5.13 Other debian/* files"
    finally:
        store.close()
    # A client older than the field ignores it; one newer than the engine gets "".
    old_engine_json = {k: v for k, v in citation.__dict__.items() if k != "section"}
    assert from_json_dict(Citation, old_engine_json).section == ""


def test_an_old_index_s_chunks_get_their_cut_words_when_its_search_needs_them(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "index"
    _old_index(folder)
    store = LanceStore(folder=folder, background=False)
    try:
        for n, languages in enumerate(("cs", "de")):  # several languages: cut words
            _write_new(store, doc_id=f"new{n}", text=f"filler {n} text", languages=languages)
        store.refresh_fulltext_index()
        words = {r["chunk_id"]: r["words"] for r in store.chunks.to_arrow().to_pylist()}
        assert words["old:0"] == cut_words("an old chunk of gravel")
        # An inflected "gravelového" meets "gravel" in their first five letters, by the
        # words alone (the question's vector points at the other chunks).
        (hit,) = store.hybrid_search(
            vector=np.asarray([0.0, 1.0] + [0.0] * (DIM - 2), np.float32), text="gravelového", k=1
        )
        assert hit.chunk.chunk_id == "old:0"
    finally:
        store.close()


def test_chunks_written_without_their_words_are_filled(tmp_path: Path) -> None:
    # A program that does not know the column writes its chunks with no words (NULL).
    store = LanceStore(folder=tmp_path / "index", background=False)
    store.ensure_embedder(embedder_id="t", dimension=DIM)
    try:
        for n, languages in enumerate(("cs", "de")):
            _write_new(store, doc_id=f"new{n}", text=f"filler {n} text", languages=languages)
        row = {f.name: None for f in store.chunks.schema}
        row |= {"chunk_id": "bare:0", "doc_id": "bare", "path": "/docs/bare.txt", "ordinal": 0}
        row |= {"text": "Überschriften nummerieren", "text_hash": "b", "ext": ".txt"}
        row |= {"vector": [1.0] + [0.0] * (DIM - 1), "section": ""}
        store.chunks.add(pa.Table.from_pylist([row], schema=store.chunks.schema))
        store.refresh_fulltext_index()
        words = {r["chunk_id"]: r["words"] for r in store.chunks.to_arrow().to_pylist()}
        assert words["bare:0"] == "übers numme"
    finally:
        store.close()


def test_documents_written_before_the_reader_column_count_as_read_by_reader_0(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "index"
    _old_index(folder)
    db = lancedb.connect(str(folder))
    old_schema = pa.schema([f for f in DOCUMENTS_SCHEMA if f.name != "reader"])
    row = {
        "doc_id": "old",
        "path": "/docs/old.txt",
        "size": 22,
        "mtime": 1.0,
        "content_hash": "h",
        "status": "indexed",
        "error": None,
        "pages": None,
        "chunks": 1,
    }
    db.create_table("documents", pa.Table.from_pylist([row], schema=old_schema))
    store = LanceStore(folder=folder, background=False)
    try:
        (doc,) = store.list_documents()
        assert (doc.doc_id, doc.reader) == ("old", 0)
    finally:
        store.close()
    # A new index, and a row written by a program that does not know the column.
    fresh = LanceStore(folder=tmp_path / "fresh", background=False)
    try:
        fresh.documents.add(pa.Table.from_pylist([row], schema=fresh.documents.schema))
        (doc,) = fresh.list_documents()
        assert (doc.doc_id, doc.reader) == ("old", 0)
    finally:
        fresh.close()


def test_documents_written_before_the_languages_column_have_no_languages(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "index"
    _old_index(folder)
    db = lancedb.connect(str(folder))
    old_schema = pa.schema([f for f in DOCUMENTS_SCHEMA if f.name not in ("reader", "languages")])
    row = {
        "doc_id": "old",
        "path": "/docs/old.txt",
        "size": 22,
        "mtime": 1.0,
        "content_hash": "h",
        "status": "indexed",
        "error": None,
        "pages": None,
        "chunks": 1,
    }
    db.create_table("documents", pa.Table.from_pylist([row], schema=old_schema))
    store = LanceStore(folder=folder, background=False)
    try:
        (doc,) = store.list_documents()
        assert (doc.reader, doc.languages) == (0, "")
        assert "languages" in store.documents.schema.names
        assert store.collection_languages() == ()
    finally:
        store.close()
