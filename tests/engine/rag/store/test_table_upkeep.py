"""Tables written by an earlier version open with the columns this one reads, and the
scalar indices are built once a table has rows."""

from __future__ import annotations

from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa

from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import IndexMeta, SearchFilters
from engine.rag.store.schema import PAGES_SCHEMA, chunks_schema
from engine.rag.store.table_upkeep import ensure_scalar_indices

DIM = 16


def test_old_store_gains_the_type_column(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    db = lancedb.connect(str(folder))
    old_schema = pa.schema([f for f in chunks_schema(DIM) if f.name != "ext"])
    row = {
        "chunk_id": "d:0",
        "doc_id": "d",
        "path": "/x/y.z/Report.PDF",
        "ordinal": 0,
        "page": 1,
        "char_start": 0,
        "char_end": 4,
        "text": "text",
        "text_hash": "t",
        "vector": [1.0] + [0.0] * (DIM - 1),
    }
    plain = {**row, "chunk_id": "d:1", "path": "/x/y.z/README"}
    db.create_table("chunks_old_16", pa.Table.from_pylist([row, plain], schema=old_schema))
    meta = IndexMeta(embedder_id="old", dimension=DIM, chunks_table="chunks_old_16")
    (folder / "meta.json").write_text(
        '{"embedder_id": "old", "dimension": 16, "chunks_table": "chunks_old_16"}'
    )
    s = LanceStore(folder=folder, background=False)
    assert s.meta == meta
    cols = s.chunks.to_arrow().select(["chunk_id", "ext"]).to_pydict()
    exts = dict(zip(cols["chunk_id"], cols["ext"], strict=True))
    assert exts == {"d:0": ".pdf", "d:1": ""}
    (r,) = s.search_batch(
        vectors=np.ones((1, DIM), np.float32),
        texts=["text"],
        k=5,
        filters=SearchFilters(types=("pdf",)),
    )
    assert [h.chunk.chunk_id for h in r.hits] == ["d:0"]


def test_scalar_indices_wait_for_rows(tmp_path: Path) -> None:
    db = lancedb.connect(str(tmp_path))
    pages = db.create_table("pages", schema=PAGES_SCHEMA)
    ensure_scalar_indices(chunks=None, pages=pages)  # no embedder yet, no rows
    assert pages.list_indices() == []
    row = {"page_key": "d:1", "doc_id": "d", "page": 1, "text": "text"}
    pages.add(pa.Table.from_pylist([row], schema=PAGES_SCHEMA))
    ensure_scalar_indices(chunks=None, pages=pages)
    ensure_scalar_indices(chunks=None, pages=pages)  # built once
    assert [tuple(i.columns) for i in pages.list_indices()] == [("page_key",)]
