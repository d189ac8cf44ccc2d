"""Batched hybrid search over a chunks table.

The vector side of a batch is the store's IVF view when it is ready: each
partition the batch probes is scored once for all the questions that probe it
(`ivf_view.py`). Otherwise (a small table, or a view being rebuilt) it is one
LanceDB multi-vector query, which LanceDB runs as one ANN search per question.
Full text (BM25) runs per question
(LanceDB 0.40 takes one text per FTS query: no batch form) and returns ids only;
the two ranked lists are fused by reciprocal rank and the hits' rows read in one
lookup for the batch. Similarities are computed
from the stored vectors, not taken from `_distance`, because each index kind
reports its own distance (IVF-PQ: approximate cosine, HNSW-SQ: squared L2).

A question asked in another language than the documents it is about is searched by
meaning alone (`Asked`): its words can match another language's text only where a name
is spelled alike, so BM25 ranks the chunks of the question's own language first,
whatever they are about. The sign is the vector side's best chunks: when their documents are
written in other languages than the question (both identified with confidence), the
full-text list is left out of that question's fusion. On the blind multilingual set,
questions asked across languages found the right page first 34 -> 37 of 103, in the top
3 49 -> 52; none of the 355 asked in their documents' language moved, nor any turn of
the blind conversations (docs/benchmarks-history.md, "Asked in another language: searched by
meaning").
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine.rag.store.fulltext import ascii_folded, cut_words
from engine.rag.store.records import ChunkRecord, SearchFilters, SearchHit, SearchResult

RRF_K = 60  # the usual reciprocal-rank-fusion constant (Cormack et al.)
# How much each ranked list counts in the fusion (set on the quality benchmark's tune
# split: `ragdoll bench quality`).
VECTOR_WEIGHT = 1.0
TEXT_WEIGHT = 1.0
# all-MiniLM-L6-v2: answerable questions' best chunk scored 0.24-0.75 on the
# fact corpus, unrelated questions' 0.08-0.23 (see engine/service/core.py).
NOT_FOUND_SIMILARITY = 0.2
# How many of the vector side's best chunks must be in documents of other languages for a
# question to be searched by meaning alone (`Asked`). One alone also took a question's
# own-language page from first place (3 of 355 + 170 searches, where the embedding's
# best chunk was another language's page on the topic); two took none (1, 2 and 3 were
# measured, docs/benchmarks.md).
ACROSS_BEST = 2
CHUNK_COLUMNS = list(ChunkRecord.__dataclass_fields__)
_FTS_WORD = re.compile(r"[\w'-]+", re.UNICODE)
_PLAIN_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_FTS_SYNTAX = {"AND", "OR", "NOT"}
_FETCH_IDS = 1024  # chunk ids per `IN (...)` lookup
# The most a float16 copy of a unit vector moves its cosine with a unit
# question: each component's relative error is at most 2**-11, and by
# Cauchy-Schwarz their weighted sum at most that; doubled for safety.
_VIEW_ERROR = 2 * 2.0**-11


@dataclass(frozen=True, kw_only=True)
class Asked:
    """The languages of a batch's questions and of the documents (ISO 639-1 codes, as
    engine/rag/ingest/language.py identifies them)."""

    languages: tuple[str | None, ...]  # each question's, None where not identified
    written_in: Mapping[str, frozenset[str]]  # by document id (missing or empty: unknown)

    def across(self, i: int, *, best: Sequence[dict[str, Any]]) -> bool:
        """Whether question i asks about documents written in other languages: each of
        its vector search's best chunks `best` (rows) is such a document's."""
        asked = self.languages[i] if i < len(self.languages) else None
        if asked is None or not best:
            return False
        for row in best:
            written = self.written_in.get(str(row.get("doc_id", "")), frozenset())
            if not written or asked in written:
                return False
        return True


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
    if filters.paths:
        parts.append("path IN (" + ", ".join(quote(p) for p in sorted(set(filters.paths))) + ")")
    return " AND ".join(parts)


def filters_accept(filters: SearchFilters | None, *, path: str) -> bool:
    """Whether a document at `path` is one `filter_expression` lets through."""
    if filters is None or filters.empty:
        return True
    if filters.folders and not any(path.startswith(folder_prefix(f)) for f in filters.folders):
        return False
    if filters.types and file_type(path) not in {normalise_type(t) for t in filters.types}:
        return False
    return not filters.paths or path in filters.paths


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
    asked: Asked | None = None,
    fts_column: str | None = "text",
) -> list[SearchResult]:
    """For each question i (vectors[i], texts[i]): its top k chunks. With `view`
    (the store's IVF view, `ivf_view.py`) the vector side is its batched scan;
    without, one LanceDB multi-vector query. With `asked`, a question asked about
    documents of another language is searched by its vector alone. `fts_column`: the
    column whose full-text index BM25 reads ("words": the cut words, fulltext.py
    `cut_words`); None: there is none yet, vectors alone."""
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
        pool.submit(_fulltext, table, text=t, limit=limit, where=where, column=fts_column)
        if pool
        else None
        for t in texts
    ]
    rows: dict[str, dict[str, Any]] = {}
    if view is not None:
        nprobes = params.nprobes if params is not None else VectorParams().nprobes
        # Only the top k need the exact order: past them the ranks feed the fusion.
        found = view.search(vectors, limit=limit, nprobes=nprobes, filters=filters, exact=k)
    else:
        vec_lists = _vector_candidates(
            table, vectors=vectors, limit=limit, where=where, params=params
        )
        vec_ids = [[r["chunk_id"] for r in ranked] for ranked in vec_lists]
        for ranked in vec_lists:
            rows.update((r["chunk_id"], r) for r in ranked)
    fts_ids = []
    for i, text in enumerate(texts):
        job = fts[i]
        fts_ids.append(
            job.result()
            if job
            else _fulltext(table, text=text, limit=limit, where=where, column=fts_column)
        )
    if view is not None:
        vec_ids = _exact_order(table, found=found, fts_ids=fts_ids, vectors=vectors, k=k, rows=rows)
    fused = [
        _fuse(vec_ids=v, fts_ids=[] if _across(asked, i, v, rows) else f)
        for i, (v, f) in enumerate(zip(vec_ids, fts_ids, strict=True))
    ]
    _fetch_hits(table, fused=fused, k=k, rows=rows)
    return [
        _result(ranked=ranked, rows=rows, query=q, k=k, not_found_below=not_found_below)
        for ranked, q in zip(fused, vectors, strict=True)
    ]


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


def _exact_order(
    table: Any,
    *,
    found: list[list[tuple[str, float]]],
    fts_ids: list[list[str]],
    vectors: np.ndarray,
    k: int,
    rows: dict[str, dict[str, Any]],
) -> list[list[str]]:
    """The view's candidates in the order of the exact cosine of their stored
    float32 vectors, reading from the table only the rows that can change the
    top k: the view scores float16 copies of unit rows, within `_VIEW_ERROR` of
    the exact cosine, so a candidate scored more than twice that below the
    view's k-th cannot enter the exact top k. Read with them, in the same
    lookup, the hits the fusion is expected to pick. Candidates a concurrent
    write removed since the scan are left out of the order."""
    wanted: set[str] = set()
    near: list[list[str]] = []
    for cands, f_ids in zip(found, fts_ids, strict=True):
        if not cands:
            near.append([])
            continue
        floor = cands[min(k, len(cands)) - 1][1] - 2 * _VIEW_ERROR
        near.append([cid for cid, score in cands if score >= floor])
        wanted.update(near[-1])
        guess = _fuse(vec_ids=[cid for cid, _ in cands], fts_ids=f_ids)[:k]
        wanted.update(cid for cid, _ in guess)
    rows.update(_lookup(table, ids=sorted(wanted - rows.keys())))
    out = []
    for cands, close, q in zip(found, near, vectors, strict=True):
        present = [cid for cid in close if cid in rows]
        if present:
            stored = np.stack([np.asarray(rows[c]["vector"], np.float32) for c in present])
            norms = np.linalg.norm(stored, axis=1)
            sims = stored @ q / np.where(norms > 0, norms, 1.0)
            present = [present[j] for j in np.argsort(-sims, kind="stable")]
        out.append(present + [cid for cid, _ in cands[len(close) :]])
    return out


def _fetch_hits(
    table: Any, *, fused: list[list[tuple[str, float]]], k: int, rows: dict[str, dict[str, Any]]
) -> None:
    """Read from the table the rows of the view's candidates that may be hits:
    each question's best k by fused rank (BM25 candidates came with their rows),
    one lookup for the whole batch. Only those are read, not every candidate:
    the lookup's cost grows with the rows it returns, and a cold one reads each
    from the disk. A candidate a concurrent write removed since the scan is
    missing; the next ones are read in its place."""
    missing: set[str] = set()
    while True:
        wanted: set[str] = set()
        for ranked in fused:
            present = 0
            for cid, _ in ranked:
                if present == k:
                    break
                if cid in missing:
                    continue
                if cid not in rows:
                    wanted.add(cid)
                present += 1
        if not wanted:
            return
        got = _lookup(table, ids=sorted(wanted))
        rows.update(got)
        missing |= wanted - got.keys()


def _lookup(table: Any, *, ids: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), _FETCH_IDS):
        part = ids[start : start + _FETCH_IDS]
        where = "chunk_id IN (" + ", ".join(quote(c) for c in part) + ")"
        got = table.search().where(where).select([*CHUNK_COLUMNS, "vector"]).limit(None)
        out.update((r["chunk_id"], r) for r in _rows(got.to_arrow()))
    return out


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as dicts, the vector as a numpy row: `to_pylist` would make a
    Python float of every component (most of a lookup's time)."""
    if table.num_rows == 0:
        return []
    vectors = _vectors(table.column("vector"))
    out = table.drop_columns(["vector"]).to_pylist()
    for r, v in zip(out, vectors, strict=True):
        r["vector"] = v
    return out


def _vectors(column: pa.ChunkedArray) -> np.ndarray:
    arr = column.combine_chunks()
    dim = arr.type.list_size
    flat = arr.values.to_numpy(zero_copy_only=False)[
        arr.offset * dim : (arr.offset + len(arr)) * dim
    ]
    return np.asarray(flat, dtype=np.float32).reshape(len(arr), dim)


def _split_by_query(table: pa.Table, *, count: int) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    if "query_index" not in table.column_names:
        out[0] = _rows(table)
        return out
    # Rows arrive grouped by query and ordered by distance within each group.
    for row in _rows(table):
        out[row["query_index"]].append(row)
    for rows in out:
        rows.sort(key=lambda r: r["_distance"])
    return out


def plain_words(text: str) -> str:
    """Lower-case words joined by single spaces: "Git-Buildpackage\nsettings" and
    "git buildpackage settings" read alike when a phrase is looked for."""
    return " ".join(_PLAIN_WORD.findall(text.lower()))


def holds_phrase(table: Any, *, phrase: str, look: int = 50) -> bool:
    """Whether one of the `look` chunks BM25 ranks best for `phrase`'s words holds them
    together: within a run one word longer than the phrase, in any order and any of
    their forms ("LuaTeX-spezifischen Makros" in "ein Makro LuaTeX-spezifisch"; case,
    hyphens and line breaks aside). True when there is no index to ask."""
    words = plain_words(phrase).split()
    try:
        query = table.search(" ".join(words), query_type="fts", fts_columns="text")
        texts = query.select(["text"]).limit(look).to_arrow().column("text").to_pylist()
    except (ValueError, RuntimeError, OSError):
        return True
    return any(_together(words, plain_words(t).split()) for t in texts)


# A word's forms differ in at most this many final letters, the rest (this many at
# least) shared: "makro" / "makros", "spezifisch" / "spezifischen".
_FORM_ENDING = 3
_FORM_STEM = 4


def _together(words: list[str], tokens: list[str]) -> bool:
    span = len(words) + 1
    for start in range(max(1, len(tokens) - span + 1)):
        window = tokens[start : start + span]
        if all(any(_same_word(w, t) for t in window) for w in words):
            return True
    return False


def _same_word(a: str, b: str) -> bool:
    if a == b:
        return True
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    ending = max(len(a), len(b)) - shared
    return shared >= _FORM_STEM and ending <= _FORM_ENDING


# The most chunks a word's documents are read from: enough to see it in several
# documents, few enough to stay a quick lookup.
_HOLDERS = 200


def word_documents(table: Any, *, word: str) -> frozenset[str] | None:
    """The documents (paths) whose chunks hold `word` as the full-text index reads words
    (its stemming), from the best `_HOLDERS` chunks; None when the index cannot be
    asked (not known to be absent)."""
    return _documents(lambda: table.search(word, query_type="fts", fts_columns="text"))


def form_documents(table: Any, *, word: str, fixed: int) -> frozenset[str] | None:
    """The documents whose chunks hold a word that shares `word`'s first `fixed` letters
    and differs from it by at most two edits after them, as the full-text index reads
    words (another form of it: "borro" / "borrar", "compruebo" / "comprueba", whatever
    the index's stemmer). Ask `word_documents` first: without an index this scans and
    finds nothing rather than failing. None when the index cannot be asked."""
    from lancedb.query import MatchQuery

    # A fuzzy match meets the stored words as given: fold it as the index folded them,
    # or no accented word ("pripojím", "inštalátora") ever finds its other forms.
    folded = ascii_folded(word)
    fixed = max(0, fixed + len(folded) - len(word))
    match = MatchQuery(folded, "text", fuzziness=2, prefix_length=fixed)
    return _documents(lambda: table.search(match, query_type="fts"))


def _documents(search: Callable[[], Any]) -> frozenset[str] | None:
    try:
        rows = search().select(["path"]).limit(_HOLDERS).to_arrow()
    except (ValueError, RuntimeError, OSError):
        return None
    return frozenset(rows.column("path").to_pylist())


def _fulltext(
    table: Any, *, text: str, limit: int, where: str | None, column: str | None = "text"
) -> list[str]:
    """BM25's best chunk ids for one question. Only the ids: the rows of the
    few that become hits are read once for the batch (`_fetch_hits`), and
    reading 40 rows with their vectors per question took about half of BM25's
    time (64 questions at 200k rows: 520 against 290 ms)."""
    # The FTS parser treats quotes, colons and AND/OR as syntax; a person's
    # question is plain words.
    words = [w for w in _FTS_WORD.findall(text) if w.upper() not in _FTS_SYNTAX]
    if column == "words":
        words = [cut_words(w) for w in words]
    if not words or column is None:
        return []  # no full-text index yet: vector search alone
    try:
        query = table.search(" ".join(words), query_type="fts", fts_columns=column)
        query = query.select(["chunk_id"]).limit(limit)
        if where:
            query = query.where(where, prefilter=True)
        return query.to_arrow().column("chunk_id").to_pylist()
    except (ValueError, RuntimeError, OSError):
        return []  # no FTS index yet on an old table: vector search alone


def _across(
    asked: Asked | None, i: int, vec_ids: list[str], rows: dict[str, dict[str, Any]]
) -> bool:
    if asked is None:
        return False
    best = [rows[c] for c in vec_ids[:ACROSS_BEST] if c in rows]
    return len(best) == min(ACROSS_BEST, len(vec_ids)) and asked.across(i, best=best)


def _fuse(*, vec_ids: list[str], fts_ids: list[str]) -> list[tuple[str, float]]:
    """Chunk ids by reciprocal-rank fusion, best first."""
    fused: dict[str, float] = {}
    for ranked, weight in ((vec_ids, VECTOR_WEIGHT), (fts_ids, TEXT_WEIGHT)):
        for rank, cid in enumerate(ranked):
            fused[cid] = fused.get(cid, 0.0) + weight / (RRF_K + rank + 1)
    # A stable sort: on a tie the vector candidate stays ahead of the BM25 one.
    return sorted(fused.items(), key=lambda c: -c[1])


def _result(
    *,
    ranked: list[tuple[str, float]],
    rows: dict[str, dict[str, Any]],
    query: np.ndarray,
    k: int,
    not_found_below: float,
) -> SearchResult:
    qnorm = float(np.linalg.norm(query)) or 1.0
    hits = []
    for cid, score in ranked:
        if len(hits) == k:
            break
        row = rows.get(cid)
        if row is None:  # removed by a concurrent write since the scan
            continue
        vec = np.asarray(row["vector"], dtype=np.float32)
        sim = float(np.dot(vec, query)) / ((float(np.linalg.norm(vec)) or 1.0) * qnorm)
        chunk = ChunkRecord(**{f: row[f] for f in CHUNK_COLUMNS})
        hits.append(SearchHit(chunk=chunk, similarity=sim, fused=score))
    top = max((h.similarity for h in hits), default=-1.0)
    return SearchResult(hits=tuple(hits), best_similarity=top, not_found=top < not_found_below)
