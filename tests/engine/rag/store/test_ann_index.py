from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from engine.rag.store.ann_index import IndexPolicy, index_config
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import SearchFilters

DIM = 32
ROWS = 3_000


def _clustered(rng: np.random.Generator, n: int, centers: np.ndarray) -> np.ndarray:
    v = centers[rng.integers(0, len(centers), n)] + 0.4 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _rows(vectors: np.ndarray, *, start: int) -> list[dict]:
    return [
        {
            "chunk_id": f"c{start + i}",
            "doc_id": f"d{(start + i) // 50}",
            "path": f"/docs/d{(start + i) // 50}.pdf",
            "ordinal": i,
            "page": 1,
            "char_start": 0,
            "char_end": 4,
            "text": f"word{(start + i) % 97} filler",
            "text_hash": f"h{start + i}",
            "vector": v.tolist(),
            "ext": ".pdf",
        }
        for i, v in enumerate(vectors)
    ]


def _store(folder: Path, *, background: bool, resident_bytes: int | None = None) -> LanceStore:
    policy = IndexPolicy(min_rows=ROWS, rows_per_partition=300, optimize_interval_s=3600)
    s = LanceStore(
        folder=folder, index_policy=policy, background=background, resident_bytes=resident_bytes
    )
    s.ensure_embedder(embedder_id="test", dimension=DIM)
    return s


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(40, DIM))
    return _clustered(rng, ROWS, centers), _clustered(rng, 16, centers)


def _recall(store: LanceStore, vectors: np.ndarray, queries: np.ndarray) -> float:
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    results = store.search_batch(vectors=queries, texts=[""] * len(queries), k=10)
    found = [{int(h.chunk.chunk_id[1:]) for h in r.hits} for r in results]
    return float(np.mean([len(f & set(e)) / 10 for f, e in zip(found, exact, strict=True)]))


def test_index_is_built_in_the_background_past_the_threshold(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray]
) -> None:
    vectors, queries = data
    store = _store(tmp_path / "i", background=True)
    try:
        below = ROWS - 100
        store.chunks.add(pa.Table.from_pylist(_rows(vectors[:below], start=0)))
        assert store.maintain_index() == "none" and not store.index_state().indexed
        store.chunks.add(pa.Table.from_pylist(_rows(vectors[below:], start=below)))
        store.maintainer.wake()
        deadline = time.monotonic() + 120
        while not store.index_state().indexed and time.monotonic() < deadline:
            time.sleep(0.2)
        state = store.index_state()
        assert state.indexed and state.kind == "IVF_SQ" and state.indexed_rows == ROWS
        assert store.maintainer.last_error is None
        assert _recall(store, vectors, queries) >= 0.9

        # Rows added after the build are found at once, before any optimize.
        fresh = -vectors[:1]  # far from its own row, so only the new row matches it
        store.chunks.add(pa.Table.from_pylist(_rows(fresh, start=10**6)))
        assert store.index_state().unindexed_rows == 1
        (r,) = store.search_batch(vectors=fresh, texts=[""], k=3)
        assert r.hits[0].chunk.chunk_id == f"c{10**6}"
        assert r.hits[0].similarity == pytest.approx(1.0, abs=1e-4)

        # Filters apply before the ANN search, so they hold on an indexed table too.
        only = SearchFilters(folders=("/docs",), types=("pdf",))
        (r,) = store.search_batch(vectors=queries[:1], texts=[""], k=10, filters=only)
        assert len(r.hits) == 10
        none = SearchFilters(types=("md",))
        (r,) = store.search_batch(vectors=queries[:1], texts=[""], k=10, filters=none)
        assert r.hits == () and r.not_found

        assert store.maintain_index(force_optimize=True) == "optimized"
        assert store.index_state().unindexed_rows == 0
        (r,) = store.search_batch(vectors=fresh, texts=[""], k=3)
        assert r.hits[0].chunk.chunk_id == f"c{10**6}"
    finally:
        store.close()


def test_resident_bytes_stay_within_the_budget(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray]
) -> None:
    vectors, queries = data
    store = _store(tmp_path / "i", background=False)
    store.chunks.add(pa.Table.from_pylist(_rows(vectors, start=0)))
    assert store.maintain_index() == "built"
    assert store.maintainer.last_view_step == "view-built"
    index_bytes = store.index_state().index_bytes
    assert index_bytes > 0

    measured = {}
    for share in (0.25, 4.0):
        budget = int(index_bytes * share)
        store.set_resident_budget(resident_bytes=budget)
        recall = _recall(store, vectors, queries)
        measured[share] = store.resident_bytes()
        assert recall >= 0.9  # a small budget costs time, never answers
    # The planner's Placement sets the budget the same way.
    store.apply_placement(placement=SimpleNamespace(resident_partition_bytes=index_bytes // 4))
    assert store.resident_budget == index_bytes // 4 and store.resident_bytes() < index_bytes // 8
    _recall(store, vectors, queries)
    assert 0 < store.resident_bytes() <= index_bytes // 4
    # The caches grow to what the searches touched, never past the budget.
    assert 0 < measured[0.25] <= int(index_bytes * 0.25)
    assert measured[4.0] <= int(index_bytes * 4.0)
    assert measured[4.0] > measured[0.25]


def test_index_config_kinds() -> None:
    sq = index_config(policy=IndexPolicy(), rows=100_000, dimension=384)
    assert sq.num_partitions == 25
    pq = index_config(policy=IndexPolicy(kind="IVF_PQ"), rows=100_000, dimension=384)
    assert pq.num_partitions == 25 and pq.num_sub_vectors == 48
    hnsw = index_config(policy=IndexPolicy(kind="IVF_HNSW_SQ"), rows=10, dimension=384)
    assert hnsw.num_partitions == 1


def test_small_tables_are_compacted_on_schedule(
    tmp_path: Path, data: tuple[np.ndarray, np.ndarray]
) -> None:
    vectors, _ = data
    store = _store(tmp_path / "i", background=False)
    for start in range(0, 500, 50):  # ten small writes: ten small files
        store.chunks.add(pa.Table.from_pylist(_rows(vectors[start : start + 50], start=start)))
        store.maintainer.wake()
    before = store.chunks.stats()["fragment_stats"]["num_fragments"]
    assert store.maintain_index() == "none"  # not due yet
    store.maintainer.policy = IndexPolicy(min_rows=ROWS, optimize_interval_s=0.0)
    assert store.maintain_index() == "optimized"
    assert store.chunks.stats()["fragment_stats"]["num_fragments"] < before
    assert store.chunks.count_rows() == 500
    assert not store.index_state().indexed
