"""The documents journal as one ingestion job sees it, and the row-level
operations that need no parsing: copying a moved file's chunks, and repairing
what a killed engine left behind.

The journal is read once per job (one scan of the documents table) so that a
rescan of an unchanged folder costs one stat per file, not one query.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from engine.errors import DiskFullError
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import ChunkRecord, DocumentRecord, EmbeddedChunks, PageRecord

log = logging.getLogger(__name__)
TOUCH_BATCH = 1000


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class Journal:
    def __init__(self, *, store: LanceStore) -> None:
        self._store = store
        self._by_path: dict[str, DocumentRecord] = {}
        self._by_hash: dict[str, DocumentRecord] = {}
        self._touched: dict[str, DocumentRecord] = {}
        for doc in store.list_documents():
            self.remember(doc)

    def get(self, *, path: str) -> DocumentRecord | None:
        return self._by_path.get(path)

    def with_content(self, *, digest: str) -> DocumentRecord | None:
        """An indexed document with exactly this content (a moved or copied file)."""
        return self._by_hash.get(digest) if digest else None

    def documents(self) -> list[DocumentRecord]:
        return list(self._by_path.values())

    def remember(self, doc: DocumentRecord) -> None:
        old = self._by_path.get(doc.path)
        if old is not None and self._by_hash.get(old.content_hash) is old:
            del self._by_hash[old.content_hash]
        self._by_path[doc.path] = doc
        if doc.status == "indexed" and doc.content_hash:
            self._by_hash[doc.content_hash] = doc

    def touch(self, doc: DocumentRecord) -> None:
        """A file with a new mtime and the same content: its row is updated
        with others in one commit (`flush`). Losing it costs one more hash."""
        self.remember(doc)
        self._touched[doc.doc_id] = doc
        if len(self._touched) >= TOUCH_BATCH:
            self.flush()

    def flush(self) -> None:
        if not self._touched:
            return
        rows, self._touched = list(self._touched.values()), {}
        (
            self._store.documents.merge_insert("doc_id")
            .when_matched_update_all()
            .execute([dataclasses.asdict(d) for d in rows])
        )

    def forget(self, *, path: str) -> None:
        old = self._by_path.pop(path, None)
        if old is not None and self._by_hash.get(old.content_hash) is old:
            del self._by_hash[old.content_hash]


def copy_document(*, store: LanceStore, source: DocumentRecord, target: DocumentRecord) -> int:
    """Give `target` (same content, another path) the chunks and vectors of
    `source` in one atomic swap: a renamed file is never parsed or embedded
    again. Returns the number of chunks copied (0 when the source has none)."""
    rows = _rows(store.chunks, doc_id=source.doc_id)
    if len(rows) != source.chunks:
        return 0  # the source is not whole (a crash mid-write): parse instead
    rows.sort(key=lambda r: r["ordinal"])
    chunks = [
        ChunkRecord(
            **{
                **{f: r[f] for f in ChunkRecord.__dataclass_fields__},
                "chunk_id": f"{target.doc_id}:{r['ordinal']}",
                "doc_id": target.doc_id,
                "path": target.path,
            }
        )
        for r in rows
    ]
    vectors = np.asarray([r["vector"] for r in rows], dtype=np.float32)
    pages = [
        PageRecord(doc_id=target.doc_id, page=r["page"], text=r["text"])
        for r in _rows(store.pages, doc_id=source.doc_id)
    ]
    doc = dataclasses.replace(target, pages=source.pages, chunks=len(chunks))
    store.replace_document(
        doc=doc, pages=pages, embedded=EmbeddedChunks(chunks=chunks, vectors=vectors)
    )
    return len(chunks)


def remove_orphans(*, store: LanceStore) -> int:
    """Delete chunks and pages whose document has no journal row: a new file's
    rows written just before the engine was killed, before its journal row.
    Returns the number of documents cleaned."""
    if store.meta is None:
        return 0
    known = {d.doc_id for d in store.list_documents() if d.status == "indexed"}
    found: set[str] = set()
    try:
        for table in (store.chunks, store.pages):
            ids = table.search().select(["doc_id"]).limit(None).to_arrow().column("doc_id")
            found.update(ids.unique().to_pylist())
    except (OSError, RuntimeError, ValueError):  # a repair must never stop the engine
        log.exception("could not look for unfinished documents")
        return 0
    orphans = sorted(found - known)
    try:
        if orphans:
            log.info("removing the rows of %d unfinished documents", len(orphans))
            store.remove_documents(doc_ids=orphans)
    except DiskFullError as e:  # the start-up rescan says so; the engine starts
        log.warning("could not remove unfinished documents: %s", e)
        return 0
    return len(orphans)


def _rows(table: Any, *, doc_id: str) -> list[dict[str, Any]]:
    return table.search().where(f"doc_id = {_quote(doc_id)}").limit(None).to_list()
