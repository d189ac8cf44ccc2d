"""`ragdoll bench retrieval`: partitioned search at scale, side by side in one run.

Builds a chunks table of `--rows` synthetic chunks (clustered unit vectors, as
sentence embeddings are, and text from a made-up vocabulary) in a temporary
folder on the data folder's disk, through the real LanceStore. Exact top 10 by
brute force over every row is the ground truth for a sample of questions.

Measures, in one process:
- flat-scan latency as the table grows (where an index starts to pay);
- each LanceDB index kind asked for (build time, size, recall@10, p50/p95);
- the store's IVF view (what `search_batch` uses once built): build time, size,
  and p50/p95 and recall@10 under resident budgets of about 5%, 25% and 100% of
  its partitions, with the bytes the store holds (view partitions, centroids,
  delta and LanceDB's caches) and the growth of the process RSS; with `--cold`
  (the default on Linux) the store's files leave the OS page cache before every
  query, so partitions outside the budget come from the disk itself;
- one batch of 64 questions against the same 64 asked one at a time: vector
  only and hybrid (vector + BM25) through the view, vector only through
  LanceDB's multi-vector query, and the 64 BM25 queries alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.synthetic_chunks import SyntheticChunks as _Synthetic
from bench.synthetic_chunks import arrow_block as _arrow_block
from engine.environ import EngineEnviron
from engine.rag.store.ann_index import IndexPolicy
from engine.rag.store.lance_store import LanceStore, chunks_schema
from engine.rag.store.resident_memory import resident_budget

FULL_ROWS = 1_000_000
QUICK_ROWS = 50_000
BUDGETS = (0.05, 0.25, 1.0)
BATCH = 64
FLAT_CHECKPOINTS = (10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000)
_BLOCK = 50_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rows", type=int, help=f"chunks (default {FULL_ROWS:,}; quick {QUICK_ROWS:,})"
    )
    parser.add_argument("--dim", type=int, default=384, help="vector dimension (MiniLM: 384)")
    parser.add_argument(
        "--queries", type=int, help="questions timed per setting (default 200; quick 64)"
    )
    parser.add_argument(
        "--kinds",
        default=None,
        help="index kinds to compare, the first is used for the budget sweep "
        "(default IVF_SQ,IVF_PQ,IVF_HNSW_SQ; quick IVF_SQ)",
    )
    parser.add_argument(
        "--dir", type=Path, help="where to build the table (default: a temp dir on the data disk)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the table afterwards")
    parser.add_argument(
        "--cold",
        action=argparse.BooleanOptionalAction,
        default=hasattr(os, "posix_fadvise"),
        help="evict the table from the page cache before each query (default where supported)",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    rows = args.rows or (QUICK_ROWS if quick else FULL_ROWS)
    queries = args.queries or (64 if quick else 200)
    queries = max(queries, BATCH)
    kinds = (args.kinds or ("IVF_SQ" if quick else "IVF_SQ,IVF_PQ,IVF_HNSW_SQ")).split(",")
    say = (lambda *_: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    root = Path(tempfile.mkdtemp(prefix="ragdoll-bench-retrieval-", dir=_bench_parent(args.dir)))
    try:
        return _measure(
            root=root,
            rows=rows,
            dim=args.dim,
            queries=queries,
            kinds=kinds,
            cold=args.cold,
            say=say,
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def _bench_parent(explicit: Path | None) -> Path:
    if explicit is not None:
        explicit.mkdir(parents=True, exist_ok=True)
        return explicit
    from engine.paths import resolve_paths

    parent = resolve_paths().data / "bench"
    parent.mkdir(parents=True, exist_ok=True)
    return parent


def _measure(
    *, root: Path, rows: int, dim: int, queries: int, kinds: list[str], cold: bool, say: Callable
) -> dict[str, Any]:
    started = time.perf_counter()
    default = IndexPolicy()
    store = LanceStore(
        scorer=EngineEnviron.from_environ().ivf_scorer,
        folder=root / "index",
        background=False,
        index_policy=replace(default, min_rows=1, kind=kinds[0]),  # type: ignore[arg-type]
    )
    store.ensure_embedder(embedder_id="synthetic", dimension=dim)
    data = _Synthetic(dim=dim, rows=rows, seed=0)
    qvec, qtext = data.queries(queries)
    say(f"building {rows:,} chunks of {dim} dims in {root} ...")
    build = _fill(store=store, data=data, qvec=qvec, cold=cold, say=say)
    say(f"  written in {build['write_seconds']:.1f} s; flat ms by rows {build['flat_ms_by_rows']}")
    store.refresh_fulltext_index(force=True)
    store.ensure_scalar_indices()  # as the maintainer does: chunk ids are looked up by index

    files = lambda: [p for p in (root / "index").rglob("*") if p.is_file()]  # noqa: E731
    evict = (lambda: _evict(files())) if cold else (lambda: None)
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in reversed(kinds):  # the default kind last: it stays for the sweeps
        store.maintainer.policy = replace(default, kind=kind)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        store.maintainer.build(table=store.chunks, rows=rows)
        build_s = time.perf_counter() - t0
        state = store.index_state()
        store.set_resident_budget(resident_bytes=None)
        timing = _single_queries(store=store, qvec=qvec, evict=evict)
        by_kind[kind] = {
            "build_seconds": round(build_s, 1),
            "index_bytes": state.index_bytes,
            "recall_at_10": _recall(timing["results"], build["exact"]),
            "p50_ms": timing["p50_ms"],
            "p95_ms": timing["p95_ms"],
        }
        say(f"  {kind}: {by_kind[kind]}")

    index_bytes = store.index_state().index_bytes
    store.set_resident_budget(resident_bytes=None)
    t0 = time.perf_counter()
    view_built = store.build_view()
    view = _view_figures(store, seconds=time.perf_counter() - t0, built=view_built)
    say(f"  IVF view: {view}")
    sweep = {}
    for share in BUDGETS:
        sweep[_pct(share)] = _budget_point(
            store=store,
            share=share,
            view_bytes=view["bytes"],
            qvec=qvec,
            exact=build["exact"],
            evict=evict,
        )
        say(f"  resident {_pct(share)}: {sweep[_pct(share)]}")
    store.set_resident_budget(resident_bytes=None)
    batch = _batch_vs_single(store=store, qvec=qvec[:BATCH], qtext=qtext[:BATCH])
    batch.update(
        _batch_under_budget(
            store=store,
            qvec=qvec[:BATCH],
            budget=resident_budget(view_bytes=view["bytes"], share=0.25),
            evict=evict,
        )
    )
    store.set_resident_budget(resident_bytes=None)
    say(f"  batch of {BATCH}: {batch}")
    full = sweep[_pct(1.0)]
    return {
        "rows": rows,
        "dim": dim,
        "queries": queries,
        "cold_page_cache": cold,
        "index_kind": kinds[0],
        "index_kinds": by_kind,
        "index_bytes": index_bytes,
        "view": view,
        "recall_at_10": full["recall_at_10"],
        "recall_at_10_by_budget": {k: v["recall_at_10"] for k, v in sweep.items()},
        "p50_ms_by_budget": {k: v["p50_ms"] for k, v in sweep.items()},
        "p95_ms_by_budget": {k: v["p95_ms"] for k, v in sweep.items()},
        "resident_bytes_by_budget": {k: v["resident_bytes"] for k, v in sweep.items()},
        "budget_bytes_by_budget": {k: v["budget_bytes"] for k, v in sweep.items()},
        "rss_delta_bytes_by_budget": {k: v["rss_delta_bytes"] for k, v in sweep.items()},
        "p95_ratio_25_vs_100": round(sweep["25%"]["p95_ms"] / max(full["p95_ms"], 1e-9), 2),
        "batch64_speedup": batch["vector_speedup"],
        "batch64_speedup_hybrid": batch["hybrid_speedup"],
        "batch64_speedup_lancedb": batch["lancedb_vector_speedup"],
        "batch64": batch,
        "flat_ms_by_rows": build["flat_ms_by_rows"],
        "write_seconds": build["write_seconds"],
        "total_seconds": round(time.perf_counter() - started, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()]
        if hasattr(os, "getloadavg")
        else None,
        "cpus": os.cpu_count(),
    }


def _fill(
    *, store: LanceStore, data: _Synthetic, qvec: np.ndarray, cold: bool, say: Callable
) -> dict[str, Any]:
    schema = chunks_schema(data.dim)
    best_sim = np.full((len(qvec), 10), -np.inf, dtype=np.float32)
    best_id = np.zeros((len(qvec), 10), dtype=np.int64)
    flat: dict[str, float] = {}
    checkpoints = [c for c in FLAT_CHECKPOINTS if c <= data.rows]
    if data.rows not in checkpoints:
        checkpoints.append(data.rows)
    write_s, done = 0.0, 0
    while done < data.rows:
        n = min(_BLOCK, data.rows - done, checkpoints[0] - done if checkpoints else _BLOCK)
        vectors = data.vectors(n)
        # Running exact top 10 per question: ground truth without holding every row.
        sims = qvec @ vectors.T
        ids = np.arange(done, done + n)
        all_sim = np.concatenate([best_sim, sims], axis=1)
        all_id = np.concatenate([best_id, np.broadcast_to(ids, sims.shape)], axis=1)
        top = np.argsort(-all_sim, axis=1)[:, :10]
        best_sim = np.take_along_axis(all_sim, top, axis=1)
        best_id = np.take_along_axis(all_id, top, axis=1)
        table = _arrow_block(data=data, start=done, vectors=vectors, schema=schema)
        t0 = time.perf_counter()
        store.chunks.add(table)
        write_s += time.perf_counter() - t0
        done += n
        if checkpoints and done == checkpoints[0]:
            checkpoints.pop(0)
            flat[str(done)] = _flat_ms(store=store, qvec=qvec[:8])
            say(f"  {done:,} rows: flat scan {flat[str(done)]} ms")
    return {"exact": best_id, "flat_ms_by_rows": flat, "write_seconds": round(write_s, 1)}


def _flat_ms(*, store: LanceStore, qvec: np.ndarray) -> float:
    times = []
    for q in qvec:
        t0 = time.perf_counter()
        store.search_batch(vectors=q[None, :], texts=[""], k=10, candidates=10)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 1)


def _single_queries(
    *, store: LanceStore, qvec: np.ndarray, evict: Callable[[], None]
) -> dict[str, Any]:
    store.search_batch(vectors=qvec[:1], texts=[""], k=10, candidates=10)  # open files, warm code
    results, times = [], []
    for q in qvec:
        evict()
        t0 = time.perf_counter()
        (r,) = store.search_batch(vectors=q[None, :], texts=[""], k=10, candidates=10)
        times.append((time.perf_counter() - t0) * 1000)
        results.append(r)
    return {"results": results, **_percentiles(times)}


def _view_figures(store: LanceStore, *, seconds: float, built: dict[str, Any]) -> dict[str, Any]:
    view = store.view
    assert view is not None and view.ready and view.generation is not None
    gen = view.generation
    on_disk = sum(f.stat().st_size for f in gen.folder.iterdir() if f.is_file())
    return {
        "build_seconds": round(seconds, 1),
        "rows": built["rows"],
        "partitions": gen.partitions,
        "bytes": view.full_resident_bytes(),  # resident when every partition is
        "disk_bytes": on_disk,
        "nprobes": store.maintainer.policy.nprobes,
        "scorer": view.scorer.name,
    }


def _budget_point(
    *,
    store: LanceStore,
    share: float,
    view_bytes: int,
    qvec: np.ndarray,
    exact: np.ndarray,
    evict: Callable[[], None],
) -> dict[str, Any]:
    import psutil

    budget = resident_budget(view_bytes=view_bytes, share=share)
    store.set_resident_budget(resident_bytes=budget)
    rss0 = psutil.Process().memory_info().rss
    # A first pass loads what fits; the timed pass then sees the steady state.
    _single_queries(store=store, qvec=qvec, evict=lambda: None)
    timing = _single_queries(store=store, qvec=qvec, evict=evict)
    return {
        "budget_bytes": budget,
        "resident_bytes": store.resident_bytes(),
        "rss_delta_bytes": psutil.Process().memory_info().rss - rss0,
        "recall_at_10": _recall(timing["results"], exact),
        "p50_ms": timing["p50_ms"],
        "p95_ms": timing["p95_ms"],
    }


def _batch_vs_single(*, store: LanceStore, qvec: np.ndarray, qtext: list[str]) -> dict[str, Any]:
    from engine.rag.store.search import _fulltext

    out: dict[str, Any] = {}
    modes = (("vector", True, [""] * len(qvec)), ("hybrid", True, qtext))
    for mode, use_view, texts in (*modes, ("lancedb_vector", False, [""] * len(qvec))):
        store.use_view = use_view
        store.search_batch(vectors=qvec, texts=texts, k=10)  # warm both paths alike
        t0 = time.perf_counter()
        for q, t in zip(qvec, texts, strict=True):
            store.search_batch(vectors=q[None, :], texts=[t], k=10)
        single = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.search_batch(vectors=qvec, texts=texts, k=10)
        batch = time.perf_counter() - t0
        out[f"{mode}_single64_ms"] = round(single * 1000, 1)
        out[f"{mode}_batch64_ms"] = round(batch * 1000, 1)
        out[f"{mode}_speedup"] = round(single / batch, 2)
    store.use_view = True
    # What BM25 alone costs for the 64 texts, one query each (LanceDB has no batch form).
    t0 = time.perf_counter()
    for t in qtext:
        _fulltext(store.chunks, text=t, limit=40, where=None)
    out["fts64_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return out


def _batch_under_budget(
    *, store: LanceStore, qvec: np.ndarray, budget: int, evict: Callable[[], None]
) -> dict[str, Any]:
    """The same comparison with a quarter of the view resident and the page cache
    evicted before each search: partitions outside the budget come from the disk,
    once per single question that probes them, once per batch."""
    store.set_resident_budget(resident_bytes=budget)
    texts = [""] * len(qvec)
    store.search_batch(vectors=qvec, texts=texts, k=10)  # fill what the budget keeps
    single = 0.0
    for q in qvec:
        evict()
        t0 = time.perf_counter()
        store.search_batch(vectors=q[None, :], texts=[""], k=10)
        single += time.perf_counter() - t0
    evict()
    t0 = time.perf_counter()
    store.search_batch(vectors=qvec, texts=texts, k=10)
    batch = time.perf_counter() - t0
    return {
        "vector_budget25_single64_ms": round(single * 1000, 1),
        "vector_budget25_batch64_ms": round(batch * 1000, 1),
        "vector_budget25_speedup": round(single / batch, 2),
    }


def _recall(results: list[Any], exact: np.ndarray) -> float:
    scores = []
    for r, truth in zip(results, exact, strict=False):
        found = {int(h.chunk.chunk_id[1:]) for h in r.hits}
        scores.append(len(found & set(truth.tolist())) / 10)
    return round(float(np.mean(scores)), 4)


def _percentiles(times_ms: list[float]) -> dict[str, float]:
    arr = np.asarray(times_ms)
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 2),
        "p95_ms": round(float(np.percentile(arr, 95)), 2),
    }


def _pct(share: float) -> str:
    return f"{round(share * 100)}%"


def _evict(files: list[Path]) -> None:
    for file in files:
        try:
            fd = os.open(file, os.O_RDONLY)
        except OSError:
            continue  # a file compaction removed meanwhile
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
