"""Batched hybrid search over a chunks table.

The vector side of a batch is the store's IVF view when it is ready: each
partition the batch probes is scored once for all the questions that probe it
(`ivf_view.py`). Otherwise (a small table, or a view being rebuilt) it is one
LanceDB multi-vector query, which LanceDB runs as one ANN search per question.
Full text (BM25) runs per question;
the two ranked lists are fused by reciprocal rank. Similarities are computed
from the stored vectors, not taken from `_distance`, because each index kind
reports its own distance (IVF-PQ: approximate cosine, HNSW-SQ: squared L2).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine.store.records import ChunkRecord, SearchFilters, SearchHit, SearchResult

RRF_K = 60  # the usual reciprocal-rank-fusion constant (Cormack et al.)
# all-MiniLM-L6-v2: answerable questions' best chunk scored 0.24-0.75 on the
# fact corpus, unrelated questions' 0.08-0.23 (see engine/core.py).
NOT_FOUND_SIMILARITY = 0.2
CHUNK_COLUMNS = list(ChunkRecord.__dataclass_fields__)
_FTS_WORD = re.compile(r"[\w'-]+", re.UNICODE)
_FTS_SYNTAX = {"AND", "OR", "NOT"}
_FETCH_IDS = 1024  # chunk ids per `IN (...)` lookup


@dataclass(frozen=True, kw_only=True)
class VectorParams:
    """How far an ANN query looks: IVF partitions probed, and how many more
    candidates than asked are re-ranked by exact distance (PQ codes are lossy)."""

    nprobes: int = 20
    refine_factor: int | None = 10
    ef: int | None = None  # HNSW search breadth; None: LanceDB's default


def quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def normalise_type(ext: str) -> str:
    ext = ext.strip().lower()
    return ext if ext.startswith(".") else "." + ext


def file_type(path: str) -> str:
    """The extension a `types` filter matches: lower case, with the dot; '' for none."""
    return os.path.splitext(path)[1].lower()


def filter_expression(filters: SearchFilters | None) -> str | None:
    """A LanceDB `where` for the filters, or None when nothing is filtered."""
    if filters is None or filters.empty:
        return None
    parts = []
    if filters.folders:
        prefixes = [folder_prefix(f) for f in filters.folders]
        parts.append("(" + " OR ".join(f"starts_with(path, {quote(p)})" for p in prefixes) + ")")
    if filters.types:
        exts = sorted({normalise_type(t) for t in filters.types})
        parts.append("ext IN (" + ", ".join(quote(e) for e in exts) + ")")
    return " AND ".join(parts)


def folder_prefix(folder: str) -> str:
    # "/docs/a" must not match "/docs/ab/x.pdf".
    folder = folder.rstrip("/\\") or folder
    return folder if folder.endswith(("/", "\\")) else folder + os.sep


def search_batch(
    table: Any,
    *,
    vectors: np.ndarray,
    texts: Sequence[str],
    k: int,
    filters: SearchFilters | None = None,
    candidates: int = 40,
    params: VectorParams | None = None,
    not_found_below: float = NOT_FOUND_SIMILARITY,
    pool: Executor | None = None,
    view: Any = None,
) -> list[SearchResult]:
    """For each question i (vectors[i], texts[i]): its top k chunks. With `view`
    (the store's IVF view, `ivf_view.py`) the vector side is its batched scan;
    without, one LanceDB multi-vector query."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ValueError("search_batch needs one text per vector, vectors shaped (n, dim)")
    if k < 1:
        raise ValueError("k must be at least 1")
    if len(vectors) == 0:
        return []
    where = filter_expression(filters)
    limit = max(k, candidates)
    # BM25 runs in the pool while the vector query runs here: LanceDB releases
    # the GIL, so on a multi-core machine the two and the questions overlap.
    fts = [
        pool.submit(_fulltext, table, text=t, limit=limit, where=where) if pool else None
        for t in texts
    ]
    if view is not None:
        nprobes = params.nprobes if params is not None else VectorParams().nprobes
        vec_lists = view_candidates(
            table, view=view, vectors=vectors, limit=limit, filters=filters, nprobes=nprobes
        )
    else:
        vec_lists = _vector_candidates(
            table, vectors=vectors, limit=limit, where=where, params=params
        )
    results = []
    for i, text in enumerate(texts):
        job = fts[i]
        fts_rows = job.result() if job else _fulltext(table, text=text, limit=limit, where=where)
        results.append(
            _fuse(
                vec_rows=vec_lists[i],
                fts_rows=fts_rows,
                query=vectors[i],
                k=k,
                not_found_below=not_found_below,
            )
        )
    return results


def _vector_candidates(
    table: Any,
    *,
    vectors: np.ndarray,
    limit: int,
    where: str | None,
    params: VectorParams | None,
) -> list[list[dict[str, Any]]]:
    query = table.search(
        list(vectors) if len(vectors) > 1 else vectors[0], vector_column_name="vector"
    )
    query = query.distance_type("cosine").select([*CHUNK_COLUMNS, "vector"]).limit(limit)
    if params is not None:  # a flat scan (no index yet) ignores these
        query = query.nprobes(params.nprobes)
        if params.refine_factor:
            query = query.refine_factor(params.refine_factor)
        if params.ef:
            query = query.ef(params.ef)
    if where:
        query = query.where(where, prefilter=True)
    return _split_by_query(query.to_arrow(), count=len(vectors))


def view_candidates(
    table: Any,
    *,
    view: Any,
    vectors: np.ndarray,
    limit: int,
    filters: SearchFilters | None,
    nprobes: int,
) -> list[list[dict[str, Any]]]:
    """The view's candidates for every question, their rows read from the table
    in one query for the whole batch and re-ranked by the exact cosine of the
    stored float32 vectors (the view scores half-precision copies)."""
    found = view.search(vectors, limit=limit, nprobes=nprobes, filters=filters)
    wanted = sorted({cid for cands in found for cid, _ in cands})
    rows: dict[str, dict[str, Any]] = {}
    for start in range(0, len(wanted), _FETCH_IDS):
        part = wanted[start : start + _FETCH_IDS]
        where = "chunk_id IN (" + ", ".join(quote(c) for c in part) + ")"
        got = (
            table.search()
            .where(where)
            .select([*CHUNK_COLUMNS, "vector"])
            .limit(None)
            .to_arrow()
            .to_pylist()
        )
        rows.update((r["chunk_id"], r) for r in got)
    out = []
    for q, cands in zip(vectors, found, strict=True):
        # A row a concurrent write removed since the scan is left out.
        present = [rows[cid] for cid, _ in cands if cid in rows]
        if present:
            stored = np.asarray([r["vector"] for r in present], dtype=np.float32)
            norms = np.linalg.norm(stored, axis=1) * (float(np.linalg.norm(q)) or 1.0)
            sims = stored @ q / np.where(norms > 0, norms, 1.0)
            for r, s in zip(present, sims.tolist(), strict=True):
                r["_distance"] = 1.0 - s
            present.sort(key=lambda r: r["_distance"])
        out.append(present)
    return out


def _split_by_query(table: pa.Table, *, count: int) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    if "query_index" not in table.column_names:
        out[0] = table.to_pylist()
        return out
    # Rows arrive grouped by query and ordered by distance within each group.
    for row in table.to_pylist():
        out[row["query_index"]].append(row)
    for rows in out:
        rows.sort(key=lambda r: r["_distance"])
    return out


def _fulltext(table: Any, *, text: str, limit: int, where: str | None) -> list[dict[str, Any]]:
    # The FTS parser treats quotes, colons and AND/OR as syntax; a person's
    # question is plain words.
    words = [w for w in _FTS_WORD.findall(text) if w.upper() not in _FTS_SYNTAX]
    if not words:
        return []
    try:
        query = table.search(" ".join(words), query_type="fts")
        query = query.select([*CHUNK_COLUMNS, "vector"]).limit(limit)
        if where:
            query = query.where(where, prefilter=True)
        return query.to_list()
    except (ValueError, RuntimeError, OSError):
        return []  # no FTS index yet on an old table: vector search alone


def _fuse(
    *,
    vec_rows: list[dict[str, Any]],
    fts_rows: list[dict[str, Any]],
    query: np.ndarray,
    k: int,
    not_found_below: float,
) -> SearchResult:
    fused: dict[str, float] = {}
    rows: dict[str, dict[str, Any]] = {}
    for ranked in (vec_rows, fts_rows):
        for rank, r in enumerate(ranked):
            cid = r["chunk_id"]
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank + 1)
            rows.setdefault(cid, r)
    # A stable sort: on a tie the vector candidate stays ahead of the BM25 one.
    best = sorted(fused, key=lambda c: -fused[c])[:k]
    qnorm = float(np.linalg.norm(query)) or 1.0
    hits = []
    for cid in best:
        vec = np.asarray(rows[cid]["vector"], dtype=np.float32)
        sim = float(np.dot(vec, query)) / ((float(np.linalg.norm(vec)) or 1.0) * qnorm)
        chunk = ChunkRecord(**{f: rows[cid][f] for f in CHUNK_COLUMNS})
        hits.append(SearchHit(chunk=chunk, similarity=sim, fused=fused[cid]))
    top = max((h.similarity for h in hits), default=-1.0)
    return SearchResult(hits=tuple(hits), best_similarity=top, not_found=top < not_found_below)
