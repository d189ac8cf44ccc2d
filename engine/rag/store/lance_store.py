"""LanceDB on disk: the documents journal, their pages and their chunks.

Replacing documents' chunks is one `merge_insert` commit per table for a whole
group of documents (insert the new rows, delete their rows that are not among
them; doc_writes.py), so a reader never sees half a document and a crash
leaves either the old or the new version.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

from engine.errors import StaleVectorsError
from engine.json_file import write_json
from engine.rag.store import doc_writes, fulltext, table_upkeep, view_upkeep
from engine.rag.store import search as _search
from engine.rag.store.ann_index import IndexMaintainer, IndexPolicy, IndexState, index_state
from engine.rag.store.ivf_view import IvfView
from engine.rag.store.records import (
    ChunkRecord,
    DocumentContent,
    DocumentRecord,
    EmbeddedChunks,
    IndexMeta,
    PageRecord,
    SearchFilters,
    SearchHit,
    SearchResult,
)
from engine.rag.store.resident_memory import lance_session, view_budget
from engine.rag.store.schema import (
    DOCUMENTS_SCHEMA,
    PAGES_SCHEMA,
    chunks_schema,
)
from engine.rag.store.schema import chunk_of as _chunk
from engine.rag.store.schema import document_of as _document
from engine.rag.store.schema import slug as _slug
from engine.rag.store.search import NOT_FOUND_SIMILARITY, filters_accept
from engine.rag.store.search import quote as _quote
from engine.rag.store.word_index import WordIndex
from engine.runtime.planner.placement import Placement

__all__ = ["DOCUMENTS_SCHEMA", "PAGES_SCHEMA", "LanceStore", "chunks_schema"]
log = logging.getLogger(__name__)


class LanceStore:
    """One index folder. Writes are serialised by a lock; reads run freely.

    `resident_bytes` caps what the store keeps in memory of its indices: the
    IVF view's partitions (least recently used out first) and LanceDB's caches;
    it comes from the planner's Placement (`apply_placement`). None: no cap on
    the view, LanceDB's own defaults. `index_policy` says when
    the partitioned index is built; `background=False` leaves maintenance to
    explicit `maintain_index()` calls.
    """

    def __init__(
        self,
        *,
        folder: Path,
        resident_bytes: int | None = None,
        index_policy: IndexPolicy | None = None,
        background: bool = True,
        scorer: str = "auto",
    ) -> None:
        """`scorer`: how the IVF view scores a partition (engine/rag/store/scoring.py
        `pick_scorer`; RAGDOLL_IVF_SCORER)."""
        self._scorer = scorer
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._meta_file = folder / "meta.json"
        self._write_lock = threading.Lock()
        self.use_view = True  # False: LanceDB answers the vector side (benchmarks compare)
        # Old versions of the journal and pages kept for readers in flight: their
        # reads are point lookups of milliseconds.
        self.keep_journal_versions_s = 60.0
        self._search_pool = ThreadPoolExecutor(
            max_workers=min(8, os.cpu_count() or 2), thread_name_prefix="store-fts"
        )
        self._connect(resident_bytes)
        self.meta: IndexMeta | None = self._read_meta()
        self._chunks = self._open_chunks()
        self.words = WordIndex(
            chunks=lambda: self._chunks,
            documents=lambda: self.documents,
            config_file=self._fulltext_file,
        )
        self.view: IvfView | None = self._open_view()
        self.maintainer = IndexMaintainer(
            table=lambda: self._chunks,
            dimension=lambda: self.meta.dimension if self.meta else 0,
            scalar_indices=self.ensure_scalar_indices,
            policy=index_policy or IndexPolicy(),
            background=background,
            view_step=self._view_step,
        )

    def _connect(self, resident_bytes: int | None) -> None:
        self.resident_budget = resident_bytes
        self._session = lance_session(resident_bytes)
        # Strong consistency: a search right after an ingest sees its rows.
        self._db = lancedb.connect(
            str(self.folder),
            read_consistency_interval=datetime.timedelta(0),
            session=self._session,
        )
        self.documents = table_upkeep.with_document_columns(
            self._open_or_create("documents", DOCUMENTS_SCHEMA)
        )
        self.pages = self._open_or_create("pages", PAGES_SCHEMA)

    def _open_chunks(self) -> Any:
        if self.meta is None:
            return None
        name = self.meta.chunks_table
        return table_upkeep.with_chunk_columns(self._db.open_table(name), name=name)

    # -- the IVF view (ivf_view.py) ------------------------------------------

    def _open_view(self) -> IvfView | None:
        if self.meta is None or self._chunks is None:
            return None
        return view_upkeep.open_view(
            root=self.folder / "ivf",
            table_name=self.meta.chunks_table,
            table=self._chunks,
            dimension=self.meta.dimension,
            budget_bytes=view_budget(self.resident_budget),
            scorer=self._scorer,
        )

    def build_view(self, *, retrain: bool = True) -> dict[str, Any]:
        """Write a new generation of the IVF view from a snapshot of the table
        and make it current. Writes meanwhile go on (they land in the delta)."""
        view = self.view
        if view is None or self.meta is None:
            return {"rows": 0}
        seq, target, built = view_upkeep.rebuild(
            view=view,
            db=self._db,
            table=self.chunks,
            table_name=self.meta.chunks_table,
            write_lock=self._write_lock,
            rows_per_partition=self.maintainer.policy.rows_per_partition,
            retrain=retrain,
        )
        if self.view is not view:  # the table was replaced meanwhile (reembed)
            shutil.rmtree(target, ignore_errors=True)
            return built
        view.finish_build(seq=seq, built=target)
        log.info(
            "IVF view: %d rows in %d partitions in %.1f s",
            built["rows"],
            built["partitions"],
            built["seconds"],
        )
        return built

    def _view_for_search(self) -> IvfView | None:
        """The view when it is ready and agrees with the table. A table version
        the view has not seen (a maintenance commit, or a write that did not go
        through the store) is checked by counting rows, once per version."""
        view = self.view
        if not self.use_view or view is None or not view.ready:
            return None
        if self.chunks.version != view.table_version:
            # No journalled write half done; a write in progress (a group of
            # files) must not hold a question up: LanceDB answers this one.
            if not self._write_lock.acquire(blocking=False):
                return None
            try:
                version = self.chunks.version
                if not view.validate(table_rows=self.chunks.count_rows()):
                    self.maintainer.wake()  # rebuild it; LanceDB answers meanwhile
                    return None
                view.table_version = version
            finally:
                self._write_lock.release()
        return view

    def _view_step(self, *, due: bool, force: bool) -> str | None:
        if self.view is None or self._chunks is None:
            return None
        return view_upkeep.step(
            view=self.view,
            table_rows=self._chunks.count_rows,
            policy=self.maintainer.policy,
            rebuild=lambda retrain: self.build_view(retrain=retrain),
            due=due,
            force=force,
        )

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
        write_json(file=self._meta_file, data=meta.__dict__, indent=None)
        self.meta = meta

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """The store's write lock, for a decision about the index that no write may
        come between: which embedder a new index is made for (the embedder in force
        at the engine's start and a switch both may ask, engine/service/embedder_in_force.py)."""
        with self._write_lock:
            yield

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
            self.view = self._open_view()
            return False
        return (self.meta.embedder_id, self.meta.dimension) != (embedder_id, dimension)

    def reembed(
        self,
        *,
        embedder_id: str,
        dimension: int,
        embed: Any,
        batch: int = 256,
        on_swap: Any = None,
    ) -> Iterator[tuple[int, int]]:
        """Rebuild the chunks under a new embedder from their stored text,
        yielding (done, total). The old table stays in force until the new
        one is complete, so a crash midway loses nothing, and the next call
        goes on from the batches done (engine/rag/store/reembed.py)."""
        from engine.rag.store.reembed import rebuild

        yield from rebuild(
            self,
            embedder_id=embedder_id,
            dimension=dimension,
            embed=embed,
            batch=batch,
            on_swap=on_swap,
        )

    def _drop_table(self, name: str) -> None:
        # Another process with this index open (`ragdoll profile` beside the
        # engine) may still be writing into it; the meta no longer names it,
        # so a table left behind is only disk space, dropped on the next try.
        for attempt in range(3):
            try:
                self._db.drop_table(name)
                return
            except (OSError, RuntimeError, ValueError) as e:
                if attempt == 2:
                    log.warning("could not remove the old chunks table %s: %s", name, e)
                time.sleep(0.2 * (attempt + 1))

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
        with doc_writes.disk_full_raised(self.folder), self._write_lock:
            doc_writes.upsert_documents(table=self.documents, rows=[doc.__dict__])

    def replace_document(
        self, *, doc: DocumentRecord, pages: list[PageRecord], embedded: EmbeddedChunks
    ) -> None:
        """Swap in a document's new pages and chunks, then its journal row."""
        self.replace_documents(items=[DocumentContent(doc=doc, pages=pages, embedded=embedded)])

    def replace_documents(self, *, items: list[DocumentContent]) -> None:
        """Swap in a group of documents in four commits (doc_writes.py)."""
        doc_writes.replace_documents(store=self, lock=self._write_lock, items=items)

    def remove_document(self, *, doc_id: str) -> None:
        self.remove_documents(doc_ids=[doc_id])

    def remove_documents(self, *, doc_ids: Sequence[str]) -> None:
        """Their chunks, pages and journal rows go: one commit per table."""
        if not doc_ids:
            return
        doc_filter = doc_writes.in_filter("doc_id", doc_ids)
        view = self.view
        with doc_writes.disk_full_raised(self.folder), self._write_lock:
            if view is not None:
                for doc_id in doc_ids:
                    view.begin(doc_id=doc_id)
            self.chunks.delete(doc_filter)
            if view is not None:
                for doc_id in doc_ids:
                    view.commit(doc_id=doc_id, path="", ext="", ids=[], vectors=np.zeros(0))
                view.table_version = self.chunks.version
            self.pages.delete(doc_filter)
            self.documents.delete(doc_filter)

    def compact(self) -> None:
        """Fold the small files of many commits together and drop old versions
        of the journal and pages (the index maintainer does the chunks table,
        with its vector index). Writes wait meanwhile; searches do not."""
        with doc_writes.disk_full_raised(self.folder), self._write_lock:
            doc_writes.compact(
                tables=[self.documents, self.pages], keep_versions_s=self.keep_journal_versions_s
            )

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

    def following_text(self, *, chunks: Sequence[ChunkRecord], chars: int) -> dict[str, str]:
        """What follows each chunk on its page, up to `chars` characters, by chunk id
        ("" for a page's last chunk): one read of the pages table for all of them."""
        keys = list(dict.fromkeys(f"{c.doc_id}:{c.page}" for c in chunks))
        if not keys or chars <= 0:
            return {}
        listed = ", ".join(_quote(k) for k in keys)
        rows = (
            self.pages.search()
            .where(f"page_key IN ({listed})")
            .select(["page_key", "text"])
            .limit(len(keys))
            .to_list()
        )
        texts = {r["page_key"]: r["text"] for r in rows}
        out: dict[str, str] = {}
        for c in chunks:
            text = texts.get(f"{c.doc_id}:{c.page}", "")
            out[c.chunk_id] = text[c.char_end : c.char_end + chars]
        return out

    def collection_languages(self) -> tuple[str, ...]:
        """The collection's languages, most text first (engine/rag/ingest/language.py)."""
        return self.words.languages().collection

    def language_shares(self, *, filters: SearchFilters | None = None) -> dict[str, int]:
        """The chunks of the documents written in each language (their main one): of the
        whole collection, or of the documents `filters` let a search reach."""
        languages = self.words.languages()  # read again only when the documents change
        if filters is None or filters.empty:
            return dict(languages.shares)
        return languages.shares_of(lambda path: filters_accept(filters, path=path))

    def counts(self) -> tuple[int, int]:
        chunks = self._chunks.count_rows() if self._chunks is not None else 0
        return self.documents.count_rows("status = 'indexed'"), chunks

    # -- search ----------------------------------------------------------------

    def refresh_fulltext_index(self, *, force: bool = False) -> None:
        """(Re)build BM25 over chunk text, with the collection's language's stemmer
        (engine/rag/store/fulltext.py). Rows added since are still found (LanceDB scans
        unindexed rows), so this only keeps search fast; a changed language builds it
        again. Under the maintainer's lock (one rebuild at a time, too): its
        compaction, committed meanwhile, preempts the index."""
        if self._chunks is None or self.meta is None:
            return
        config = fulltext.fulltext_config(fulltext.language_shares(self.list_documents()))
        file = fulltext.config_file(self.folder, self.meta.chunks_table)
        if fulltext.words_missing(table=self.chunks, file=file, config=config):
            with self._write_lock:
                filled = fulltext.fill_words(self.chunks)
            if filled:
                log.info("cut the words of %d chunks written before the column", filled)
        with self.maintainer.lock:
            fulltext.refresh_index(table=self.chunks, file=file, config=config, force=force)
            self.words.forget_config()

    def _fulltext_file(self) -> Path | None:
        meta = self.meta
        return fulltext.config_file(self.folder, meta.chunks_table) if meta is not None else None

    def holds_word(self, word: str) -> bool:
        """Whether any chunk holds `word`, as the full-text index sees it (its
        stemming). True when there is no index to ask, or when the index leaves the
        word out (a common word of some language): unknown is not absent."""
        return self.word_documents(word) != frozenset()

    def word_documents(self, word: str) -> frozenset[str] | None:
        """`WordIndex.word_documents`."""
        return self.words.word_documents(word)

    def form_documents(self, word: str, *, fixed: int) -> frozenset[str] | None:
        """`WordIndex.form_documents`."""
        return self.words.form_documents(word, fixed=fixed)

    def holds_phrase(self, phrase: str) -> bool:
        """`WordIndex.holds_phrase`."""
        return self.words.holds_phrase(phrase)

    def search_batch(
        self,
        *,
        vectors: np.ndarray,
        texts: Sequence[str],
        k: int,
        filters: SearchFilters | None = None,
        candidates: int = 40,
        not_found_below: float = NOT_FOUND_SIMILARITY,
        made_by: str | None = None,
    ) -> list[SearchResult]:
        """A batch of questions in one call: for question i (vectors[i] with
        texts[i]) its top k chunks, vector and BM25 candidates fused by
        reciprocal rank, and `not_found` when the best similarity is below
        `not_found_below`. `filters` restrict results to folders and file types.
        `made_by`, the id of the embedder that made `vectors`: StaleVectorsError
        when the index is another embedder's (swapped since the embedding)."""
        if len(vectors) != len(texts):
            raise ValueError("search_batch needs one text per vector")
        if self._chunks is None or len(texts) == 0:
            return [SearchResult(hits=(), best_similarity=-1.0, not_found=True) for _ in texts]
        meta = self.meta
        if made_by is not None and meta is not None and meta.embedder_id != made_by:
            raise StaleVectorsError(f"vectors by {made_by}, the index is {meta.embedder_id}'s")
        try:
            results = self._search_batch(
                vectors=vectors,
                texts=texts,
                k=k,
                filters=filters,
                candidates=candidates,
                not_found_below=not_found_below,
            )
        except Exception as e:
            # The swap may land during the search (it drops the old table).
            if made_by is not None and self.meta is not meta:
                raise StaleVectorsError(f"the index was swapped during the search: {e}") from e
            raise
        if made_by is not None and self.meta is not meta:  # which table it read is unknown
            raise StaleVectorsError("the index was swapped during the search")
        return results

    def _search_batch(
        self,
        *,
        vectors: np.ndarray,
        texts: Sequence[str],
        k: int,
        filters: SearchFilters | None,
        candidates: int,
        not_found_below: float,
    ) -> list[SearchResult]:
        # No count or index check per call: ANN settings are ignored by a flat
        # scan, and an empty table returns no rows.
        view = self._view_for_search()
        return _search.search_batch(
            self.chunks,
            vectors=np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1),
            texts=texts,
            k=k,
            filters=filters,
            candidates=candidates,
            params=self.maintainer.policy.search_params,
            not_found_below=not_found_below,
            pool=self._search_pool,
            view=view,
            asked=self.words.asked(texts),
            fts_column=self.words.column(),
        )

    def asked_across(self, *, question: str, doc_ids: Sequence[str]) -> bool:
        """`WordIndex.asked_across`."""
        return self.words.asked_across(question=question, doc_ids=doc_ids)

    def hybrid_search(
        self,
        *,
        vector: np.ndarray,
        text: str,
        k: int,
        candidates: int = 40,
        filters: SearchFilters | None = None,
        made_by: str | None = None,
    ) -> list[SearchHit]:
        """One question: `search_batch` with a batch of one."""
        (result,) = self.search_batch(
            vectors=np.asarray(vector, dtype=np.float32)[None, :],
            texts=[text],
            k=k,
            candidates=candidates,
            filters=filters,
            made_by=made_by,
        )
        return list(result.hits)

    # -- the partitioned index and what of it stays resident ------------------

    def index_state(self) -> IndexState:
        if self._chunks is None:
            return IndexState(
                indexed=False,
                kind=None,
                indexed_rows=0,
                unindexed_rows=0,
                partitions=None,
                index_bytes=0,
            )
        return index_state(self._chunks)

    def maintain_index(self, *, force_optimize: bool = False) -> str:
        """Run one maintenance step now, in this thread (see IndexMaintainer)."""
        return self.maintainer.run_once(force_optimize=force_optimize)

    def ensure_scalar_indices(self) -> None:
        table_upkeep.ensure_scalar_indices(chunks=self._chunks, pages=self.pages)

    def resident_row_bytes(self) -> int | None:
        """What one chunk takes resident in the IVF view's layout (its vector as
        scored, document code and chunk id); None before the view is built."""
        view = self.view
        gen = view.generation if view is not None else None
        if view is None or gen is None or gen.rows == 0:
            return None
        return -(-(view.full_resident_bytes() - gen.metadata_bytes) // gen.rows)

    def resident_bytes(self) -> int:
        """Bytes held in memory for search now: the IVF view's resident partitions,
        centroids and delta, and LanceDB's caches (indices, table metadata)."""
        view = self.view.resident_bytes() if self.view is not None else 0
        return int(self._session.size_bytes) + view

    def set_resident_budget(self, *, resident_bytes: int | None) -> None:
        """Change the memory cap between retrieval batches. The index cache is
        sized when a connection opens, so this reopens the tables on a new one;
        the old cache (and the partitions in it) is released."""
        with self._write_lock:
            self._connect(resident_bytes)
            self._chunks = self._open_chunks()
            if self.view is not None:  # released at once, as LanceDB's caches are
                self.view.cache.clear()
                self.view.cache.set_budget(view_budget(self.resident_budget))

    def apply_placement(self, *, placement: Placement) -> None:
        """Honour the budget for resident index partitions (engine/runtime/planner/owner.py)."""
        self.set_resident_budget(resident_bytes=int(placement.resident_partition_bytes))

    def close(self) -> None:
        self.maintainer.stop()
        self._search_pool.shutdown(wait=False, cancel_futures=True)
