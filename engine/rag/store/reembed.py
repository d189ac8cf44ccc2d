"""Rebuilding the chunks under another embedder, while the old ones answer.

The new vectors go into a table of their own, named after the new embedder; the
old table and the meta naming it stay in force until the new table holds every
chunk, then the meta is rewritten (one atomic file replace) and the old table
dropped. A run cut short (kill -9, shutdown, cancel) leaves the new table with
the batches it finished; the next run opens it and embeds only what is missing.
Before the swap, under the store's write lock, the new table is made to match
the old one exactly: rows written or removed meanwhile are added or dropped.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from engine.rag.store.fulltext import cut_words
from engine.rag.store.records import IndexMeta, embedded_text
from engine.rag.store.schema import chunks_schema
from engine.rag.store.schema import slug as _slug
from engine.rag.store.search import file_type
from engine.rag.store.search import quote as _quote

log = logging.getLogger(__name__)
_DELETE_BATCH = 500

Embed = Callable[[list[str]], np.ndarray]


def target_table(*, embedder_id: str, dimension: int) -> str:
    """The new table's name: the slug alone could be shared by two long paths."""
    digest = hashlib.sha256(embedder_id.encode()).hexdigest()[:8]
    return f"chunks_{_slug(embedder_id)}_{digest}_{dimension}"


def rebuild(
    store: Any,  # engine.rag.store.lance_store.LanceStore, which calls this (no import circle)
    *,
    embedder_id: str,
    dimension: int,
    embed: Embed,
    batch: int = 256,
    on_swap: Callable[[], None] | None = None,
) -> Iterator[tuple[int, int]]:
    """Yields (chunks done, chunks in all) as batches land; the swap happens
    when the generator runs to its end (`on_swap` is called under the write
    lock, right after the meta names the new table). Closing it early leaves
    the old index in force and the new table for the next run."""
    assert store.meta is not None
    old_name = store.meta.chunks_table
    new_name = target_table(embedder_id=embedder_id, dimension=dimension)
    if new_name == old_name:
        new_name += "_new"
    target = _open_target(store, name=new_name, dimension=dimension)
    old = store.chunks
    have = _drop_stale(target=target, want=_pairs(old))
    rows = [
        r
        for r in old.to_arrow().drop_columns(["vector", "ext"]).to_pylist()
        if (r["chunk_id"], r["text_hash"]) not in have
    ]
    total = old.count_rows()
    done = max(0, total - len(rows))
    if done:
        log.info("re-embedding resumes: %d of %d chunks were done before", done, total)
    yield done, total
    for start in range(0, len(rows), batch):
        part = rows[start : start + batch]
        _add(target, rows=part, embed=embed)
        done += len(part)
        yield min(done, total), total
    with store._write_lock, store.maintainer.lock:
        _catch_up(old=old, target=target, embed=embed)
        store._chunks = target
        store._write_meta(
            IndexMeta(embedder_id=embedder_id, dimension=dimension, chunks_table=new_name)
        )
        if on_swap is not None:
            on_swap()
        store._drop_table(old_name)
        if store.view is not None:
            store.view.drop()
        store.view = store._open_view()
    store.refresh_fulltext_index(force=True)
    store.maintainer.wake()


def _open_target(store: Any, *, name: str, dimension: int) -> Any:
    schema = chunks_schema(dimension)
    if name in store._table_names():
        table = store._db.open_table(name)
        if table.schema.equals(schema):
            return table
        log.info("the half-built table %s has another schema: starting over", name)
    return store._db.create_table(name, schema=schema, mode="overwrite")


def _pairs(table: Any) -> set[tuple[str, str]]:
    got = table.search().select(["chunk_id", "text_hash"]).limit(None).to_arrow()
    return set(
        zip(got.column("chunk_id").to_pylist(), got.column("text_hash").to_pylist(), strict=True)
    )


def _drop_stale(*, target: Any, want: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Remove rows of chunks that are gone or changed since; returns what is left."""
    have = _pairs(target)
    stale = sorted({cid for cid, _ in have - want})
    for start in range(0, len(stale), _DELETE_BATCH):
        ids = ", ".join(_quote(c) for c in stale[start : start + _DELETE_BATCH])
        target.delete(f"chunk_id IN ({ids})")
    return _pairs(target) if stale else have


def _add(target: Any, *, rows: list[dict[str, Any]], embed: Embed) -> None:
    vectors = embed([embedded_text(section=r["section"] or "", text=r["text"]) for r in rows])
    for row, vec in zip(rows, vectors, strict=True):
        row["vector"] = np.asarray(vec, dtype=np.float32).tolist()
        row["ext"] = file_type(row["path"])
        row["words"] = cut_words(row["text"])
    target.add(pa.Table.from_pylist(rows, schema=target.schema))


def _catch_up(*, old: Any, target: Any, embed: Embed) -> None:
    """What ingestion (or another process) changed in the old table since the
    rows were read: the new table gets the same set of (chunk, text)."""
    want = _pairs(old)
    missing = {cid for cid, _ in want - _drop_stale(target=target, want=want)}
    if not missing:
        return
    log.info("re-embedding: %d chunks changed meanwhile", len(missing))
    rows = [
        r
        for r in old.to_arrow().drop_columns(["vector", "ext"]).to_pylist()
        if r["chunk_id"] in missing
    ]
    _add(target, rows=rows, embed=embed)
