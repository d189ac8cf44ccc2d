"""LanceDB on disk: the documents journal, their pages and their chunks.

Replacing a document's chunks is one `merge_insert` commit (insert the new
rows, delete the document's rows that are not among them), so a reader never
sees half a document and a crash leaves either the old or the new version.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

from engine.store.records import (
    ChunkRecord,
    DocumentRecord,
    EmbeddedChunks,
    IndexMeta,
    PageRecord,
    SearchHit,
)

RRF_K = 60  # the usual reciprocal-rank-fusion constant (Cormack et al.)
_FTS_WORD = re.compile(r"[\w'-]+", re.UNICODE)

DOCUMENTS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string()),
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("mtime", pa.float64()),
        pa.field("content_hash", pa.string()),
        pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        pa.field("pages", pa.int32()),
        pa.field("chunks", pa.int32()),
    ]
)
PAGES_SCHEMA = pa.schema(
    [
        pa.field("page_key", pa.string()),
        pa.field("doc_id", pa.string()),
        pa.field("page", pa.int32()),
        pa.field("text", pa.string()),
    ]
)


def chunks_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_id", pa.string()),
            pa.field("doc_id", pa.string()),
            pa.field("path", pa.string()),
            pa.field("ordinal", pa.int32()),
            pa.field("page", pa.int32()),
            pa.field("char_start", pa.int32()),
            pa.field("char_end", pa.int32()),
            pa.field("text", pa.string()),
            pa.field("text_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class LanceStore:
    """One index folder. Writes are serialised by a lock; reads run freely."""

    def __init__(self, *, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._meta_file = folder / "meta.json"
        # Strong consistency: a search right after an ingest sees its rows.
        self._db = lancedb.connect(str(folder), read_consistency_interval=datetime.timedelta(0))
        self._write_lock = threading.Lock()
        self._fts_lock = threading.Lock()
        self.documents = self._open_or_create("documents", DOCUMENTS_SCHEMA)
        self.pages = self._open_or_create("pages", PAGES_SCHEMA)
        self.meta: IndexMeta | None = self._read_meta()
        self._chunks = self._db.open_table(self.meta.chunks_table) if self.meta else None

    # -- schema and the embedder it was built with -------------------------

    def _open_or_create(self, name: str, schema: pa.Schema) -> Any:
        if name in self._table_names():
            return self._db.open_table(name)
        return self._db.create_table(name, schema=schema, exist_ok=True)

    def _table_names(self) -> list[str]:
        return list(self._db.list_tables().tables)

    def _read_meta(self) -> IndexMeta | None:
        try:
            data = json.loads(self._meta_file.read_text())
        except FileNotFoundError:
            return None
        meta = IndexMeta(**data)
        return meta if meta.chunks_table in self._table_names() else None

    def _write_meta(self, meta: IndexMeta) -> None:
        tmp = self._meta_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta.__dict__))
        os.replace(tmp, self._meta_file)
        self.meta = meta

    def ensure_embedder(self, *, embedder_id: str, dimension: int) -> bool:
        """Make the chunks table match this embedder. Returns True when the
        existing chunks were built with another one and need `reembed`."""
        if self.meta is None:
            table = f"chunks_{_slug(embedder_id)}_{dimension}"
            self._chunks = self._db.create_table(
                table, schema=chunks_schema(dimension), mode="overwrite"
            )
            self._write_meta(
                IndexMeta(embedder_id=embedder_id, dimension=dimension, chunks_table=table)
            )
            return False
        return (self.meta.embedder_id, self.meta.dimension) != (embedder_id, dimension)

    def reembed(
        self, *, embedder_id: str, dimension: int, embed: Any, batch: int = 256
    ) -> Iterator[int]:
        """Rebuild the chunks under a new embedder from their stored text,
        yielding the count done. The old table stays in force until the new
        one is complete, so a crash midway loses nothing."""
        assert self.meta is not None and self._chunks is not None
        old_table = self.meta.chunks_table
        new_table = f"chunks_{_slug(embedder_id)}_{dimension}"
        if new_table == old_table:
            new_table += "_new"
        target = self._db.create_table(new_table, schema=chunks_schema(dimension), mode="overwrite")
        rows = self._chunks.to_arrow().drop_columns(["vector"]).to_pylist()
        for start in range(0, len(rows), batch):
            part = rows[start : start + batch]
            vectors = embed([r["text"] for r in part])
            for row, vec in zip(part, vectors, strict=True):
                row["vector"] = vec.tolist()
            target.add(part)
            yield start + len(part)
        with self._write_lock:
            self._chunks = target
            self._write_meta(
                IndexMeta(embedder_id=embedder_id, dimension=dimension, chunks_table=new_table)
            )
            self._db.drop_table(old_table)
        self.refresh_fulltext_index(force=True)

    @property
    def chunks(self) -> Any:
        if self._chunks is None:
            raise RuntimeError("the store has no embedder yet: call ensure_embedder first")
        return self._chunks

    # -- the documents journal ---------------------------------------------

    def document_by_path(self, *, path: str) -> DocumentRecord | None:
        rows = self.documents.search().where(f"path = {_quote(path)}").limit(1).to_list()
        return _document(rows[0]) if rows else None

    def list_documents(self) -> list[DocumentRecord]:
        rows = self.documents.to_arrow().to_pylist()
        return sorted((_document(r) for r in rows), key=lambda d: d.path)

    def record_document(self, *, doc: DocumentRecord) -> None:
        with self._write_lock:
            (
                self.documents.merge_insert("doc_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute([doc.__dict__])
            )

    def replace_document(
        self, *, doc: DocumentRecord, pages: list[PageRecord], embedded: EmbeddedChunks
    ) -> None:
        """Swap in a document's new pages and chunks, then its journal row."""
        doc_filter = f"doc_id = {_quote(doc.doc_id)}"
        page_rows = [
            {"page_key": f"{p.doc_id}:{p.page}", "doc_id": p.doc_id, "page": p.page, "text": p.text}
            for p in pages
        ]
        chunk_rows = [
            {**c.__dict__, "vector": v}
            for c, v in zip(embedded.chunks, embedded.vectors.tolist(), strict=True)
        ]
        with self._write_lock:
            _replace_rows(
                self.pages,
                key="page_key",
                rows=page_rows,
                doc_filter=doc_filter,
                schema=PAGES_SCHEMA,
            )
            _replace_rows(
                self.chunks,
                key="chunk_id",
                rows=chunk_rows,
                doc_filter=doc_filter,
                schema=self.chunks.schema,
            )
            (
                self.documents.merge_insert("doc_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute([doc.__dict__])
            )

    def remove_document(self, *, doc_id: str) -> None:
        doc_filter = f"doc_id = {_quote(doc_id)}"
        with self._write_lock:
            self.chunks.delete(doc_filter)
            self.pages.delete(doc_filter)
            self.documents.delete(doc_filter)

    def vectors_by_text_hash(self, *, doc_id: str) -> dict[str, np.ndarray]:
        """The vectors a document already has, so unchanged chunks are not
        embedded again when the file changes."""
        rows = (
            self.chunks.search()
            .where(f"doc_id = {_quote(doc_id)}")
            .select(["text_hash", "vector"])
            .limit(None)
            .to_list()
        )
        return {r["text_hash"]: np.asarray(r["vector"], dtype=np.float32) for r in rows}

    # -- reading back --------------------------------------------------------

    def chunk(self, *, chunk_id: str) -> ChunkRecord | None:
        rows = (
            self.chunks.search()
            .where(f"chunk_id = {_quote(chunk_id)}")
            .select(list(ChunkRecord.__dataclass_fields__))
            .limit(1)
            .to_list()
        )
        return _chunk(rows[0]) if rows else None

    def page(self, *, doc_id: str, page: int | None) -> PageRecord | None:
        key = f"{doc_id}:{page}"
        rows = self.pages.search().where(f"page_key = {_quote(key)}").limit(1).to_list()
        if not rows:
            return None
        r = rows[0]
        return PageRecord(doc_id=r["doc_id"], page=r["page"], text=r["text"])

    def counts(self) -> tuple[int, int]:
        chunks = self._chunks.count_rows() if self._chunks is not None else 0
        return self.documents.count_rows("status = 'indexed'"), chunks

    # -- search ----------------------------------------------------------------

    def refresh_fulltext_index(self, *, force: bool = False) -> None:
        """(Re)build BM25 over chunk text. Rows added since are still found
        (LanceDB scans unindexed rows), so this only keeps search fast."""
        if self._chunks is None:
            return
        with self._fts_lock:
            stale = force or not any(i.index_type == "FTS" for i in self.chunks.list_indices())
            if not stale:
                stats = self.chunks.index_stats("text_idx")
                stale = bool(stats and stats.num_unindexed_rows > 0)
            if stale and self.chunks.count_rows() > 0:
                from lancedb.index import FTS

                self.chunks.create_index("text", config=FTS(), replace=True)

    def hybrid_search(
        self, *, vector: np.ndarray, text: str, k: int, candidates: int = 40
    ) -> list[SearchHit]:
        """Vector and BM25 candidates fused by reciprocal rank."""
        if self._chunks is None or self.chunks.count_rows() == 0:
            return []
        cols = list(ChunkRecord.__dataclass_fields__)
        vec_rows = (
            self.chunks.search(vector.astype(np.float32), vector_column_name="vector")
            .distance_type("cosine")
            .select(cols)
            .limit(candidates)
            .to_list()
        )
        fts_rows = self._fulltext(text=text, limit=candidates, cols=cols)
        fused: dict[str, float] = {}
        rows: dict[str, dict[str, Any]] = {}
        for rank, r in enumerate(vec_rows):
            fused[r["chunk_id"]] = fused.get(r["chunk_id"], 0.0) + 1.0 / (RRF_K + rank + 1)
            rows[r["chunk_id"]] = r
        for rank, r in enumerate(fts_rows):
            fused[r["chunk_id"]] = fused.get(r["chunk_id"], 0.0) + 1.0 / (RRF_K + rank + 1)
            rows.setdefault(r["chunk_id"], r)
        best = sorted(fused, key=fused.__getitem__, reverse=True)[:k]
        similarity = self._similarities(ids=best, rows=rows, vector=vector)
        return [
            SearchHit(chunk=_chunk(rows[cid]), similarity=similarity[cid], fused=fused[cid])
            for cid in best
        ]

    def _fulltext(self, *, text: str, limit: int, cols: list[str]) -> list[dict[str, Any]]:
        # The FTS parser treats quotes, colons and AND/OR as syntax; a person's
        # question is plain words.
        words = [w for w in _FTS_WORD.findall(text) if w.upper() not in {"AND", "OR", "NOT"}]
        if not words:
            return []
        try:
            return (
                self.chunks.search(" ".join(words), query_type="fts")
                .select(cols)
                .limit(limit)
                .to_list()
            )
        except (ValueError, RuntimeError, OSError):
            return []  # no FTS index yet on an old table: vector search alone

    def _similarities(
        self, *, ids: list[str], rows: dict[str, dict[str, Any]], vector: np.ndarray
    ) -> dict[str, float]:
        out: dict[str, float] = {}
        missing = []
        for cid in ids:
            dist = rows[cid].get("_distance")
            if dist is None:
                missing.append(cid)
            else:
                out[cid] = 1.0 - float(dist)
        if missing:
            where = "chunk_id IN (" + ", ".join(_quote(c) for c in missing) + ")"
            for r in self.chunks.search().where(where).select(["chunk_id", "vector"]).to_list():
                out[r["chunk_id"]] = float(np.dot(np.asarray(r["vector"]), vector))
        return out


def _replace_rows(
    table: Any, *, key: str, rows: list[dict[str, Any]], doc_filter: str, schema: pa.Schema
) -> None:
    if rows:
        (
            table.merge_insert(key)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(doc_filter)
            .execute(pa.Table.from_pylist(rows, schema=schema))
        )
    else:
        table.delete(doc_filter)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()[:40] or "embedder"


def _document(r: dict[str, Any]) -> DocumentRecord:
    return DocumentRecord(**{f: r[f] for f in DocumentRecord.__dataclass_fields__})


def _chunk(r: dict[str, Any]) -> ChunkRecord:
    return ChunkRecord(**{f: r[f] for f in ChunkRecord.__dataclass_fields__})
