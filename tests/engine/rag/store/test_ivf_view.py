"""The store's IVF view: the batched scan against brute force, staying in step
with the table through writes and crashes, filters, and the resident budget."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from engine.rag.store.ann_index import IndexPolicy
from engine.rag.store.ivf_files import Generation, open_generation, unit_rows, write_generation
from engine.rag.store.ivf_view import IvfView
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.partition_cache import PartitionCache
from engine.rag.store.records import (
    ChunkRecord,
    DocumentRecord,
    EmbeddedChunks,
    PageRecord,
    SearchFilters,
)
from engine.rag.store.scoring import Float32Scorer, Int8Scorer
from engine.rag.store.search import _VIEW_ERROR, _fetch_hits, _result

DIM = 32
DOCS = 40
PER_DOC = 50  # 2,000 rows in 20 partitions of ~100


def _clustered(rng: np.random.Generator, n: int) -> np.ndarray:
    centers = np.random.default_rng(7).normal(size=(30, DIM))
    v = centers[rng.integers(0, len(centers), n)] + 0.5 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _path(d: int) -> str:
    return f"/docs/{'a' if d % 2 else 'b'}/d{d}.{'pdf' if d % 4 < 2 else 'md'}"


def _rows(d: int, vectors: np.ndarray) -> list[dict]:
    path = _path(d)
    return [
        {
            "chunk_id": f"d{d}:{i}",
            "doc_id": f"d{d}",
            "path": path,
            "ordinal": i,
            "page": 1,
            "char_start": 0,
            "char_end": 4,
            "text": f"word{i % 13} doc{d}",
            "text_hash": f"h{d}:{i}",
            "vector": v.tolist(),
            "ext": "." + path.rsplit(".", 1)[1],
        }
        for i, v in enumerate(vectors)
    ]


def _replace(store: LanceStore, d: int, vectors: np.ndarray) -> None:
    path = _path(d)
    chunks = [
        ChunkRecord(
            chunk_id=f"d{d}:{i}",
            doc_id=f"d{d}",
            path=path,
            ordinal=i,
            page=1,
            char_start=0,
            char_end=4,
            text=f"fresh{i} doc{d}",
            text_hash=f"n{d}:{i}",
        )
        for i in range(len(vectors))
    ]
    doc = DocumentRecord(
        doc_id=f"d{d}",
        path=path,
        size=1,
        mtime=1.0,
        content_hash="h",
        status="indexed",
        error=None,
        pages=1,
        chunks=len(vectors),
    )
    store.replace_document(
        doc=doc,
        pages=[PageRecord(doc_id=f"d{d}", page=1, text="x")],
        embedded=EmbeddedChunks(chunks=chunks, vectors=vectors),
    )


def _open(folder: Path, *, nprobes: int = 4, resident_bytes: int | None = None) -> LanceStore:
    policy = IndexPolicy(
        min_rows=1_000, rows_per_partition=100, nprobes=nprobes, optimize_interval_s=3600
    )
    store = LanceStore(
        folder=folder, index_policy=policy, background=False, resident_bytes=resident_bytes
    )
    store.ensure_embedder(embedder_id="test", dimension=DIM)
    return store


@pytest.fixture
def built(tmp_path: Path) -> tuple[LanceStore, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    store = _open(tmp_path / "i")
    truth: dict[str, np.ndarray] = {}
    rows: list[dict] = []
    for d in range(DOCS):
        vectors = _clustered(rng, PER_DOC)
        rows += _rows(d, vectors)
        truth.update((f"d{d}:{i}", v) for i, v in enumerate(vectors))
    store.chunks.add(pa.Table.from_pylist(rows))
    assert store.maintain_index() == "built"
    assert store.maintainer.last_view_step == "view-built"
    assert store.view is not None and store.view.ready and store.view.generation is not None
    assert store.view.generation.partitions == 20
    return store, truth


def _exact(truth: dict[str, np.ndarray], q: np.ndarray, k: int) -> list[str]:
    ids = list(truth)
    sims = np.stack([truth[i] for i in ids]) @ q
    return [ids[j] for j in np.argsort(-sims)[:k]]


def _ids(store: LanceStore, queries: np.ndarray, **kw: object) -> list[list[str]]:
    results = store.search_batch(vectors=queries, texts=[""] * len(queries), k=10, **kw)
    return [[h.chunk.chunk_id for h in r.hits] for r in results]


def test_probing_every_partition_is_brute_force(built: tuple) -> None:
    store, truth = built
    queries = _clustered(np.random.default_rng(1), 16)
    store.maintainer.policy = IndexPolicy(min_rows=1_000, rows_per_partition=100, nprobes=20)
    assert _ids(store, queries) == [_exact(truth, q, 10) for q in queries]
    # A handful of probes over clustered data still finds nearly all of them.
    store.maintainer.policy = IndexPolicy(min_rows=1_000, rows_per_partition=100, nprobes=3)
    found = _ids(store, queries)
    recall = np.mean(
        [len(set(f) & set(_exact(truth, q, 10))) / 10 for f, q in zip(found, queries, strict=True)]
    )
    assert recall >= 0.9
    # The batch answers as the questions asked one at a time do.
    assert [_ids(store, q[None, :])[0] for q in queries] == found


def test_writes_stay_consistent_with_the_table(built: tuple) -> None:
    store, truth = built
    rng = np.random.default_rng(2)
    fresh = _clustered(rng, 7)
    _replace(store, 3, fresh)  # replaced: 50 rows become 7
    store.remove_document(doc_id="d5")
    _replace(store, 99, _clustered(rng, 4))  # a new document
    view = store.view
    assert view is not None and view.ready
    assert view.live_rows() == store.chunks.count_rows() == 2_000 - 50 - 43 + 4
    for i, v in enumerate(fresh):
        (hits,) = _ids(store, v[None, :])
        assert hits[0] == f"d3:{i}"
    for old in ("d3:20", "d5:0", "d5:1"):  # gone from the table, so from the answers
        (hits,) = _ids(store, truth[old][None, :])
        assert old not in hits
    # Folding the delta into a new generation changes no answer.
    queries = _clustered(rng, 8)
    before = _ids(store, queries)
    store.maintain_index(force_optimize=True)
    assert store.maintainer.last_view_step == "view-folded"
    assert view.delta_rows == 0 and view.live_rows() == store.chunks.count_rows()
    assert _ids(store, queries) == before
    # Reopened from disk: the same view, the same answers.
    again = _open(store.folder)
    assert again.view is not None and again.view.ready
    assert _ids(again, queries) == before


def test_a_crash_between_table_write_and_view_update_is_repaired(
    built: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = built
    fresh = _clustered(np.random.default_rng(3), 5)
    # Killed after the table write, before the view heard of it: the intent stays.
    monkeypatch.setattr(IvfView, "commit", lambda self, **kw: None)
    _replace(store, 8, fresh)
    store.remove_document(doc_id="d9")
    monkeypatch.undo()
    assert len(list((store.view.folder / "pending").glob("*.json"))) == 2  # type: ignore[union-attr]
    # Killed after the intent, before the table write: nothing changed.
    store.view.begin(doc_id="d10")  # type: ignore[union-attr]
    # Killed mid-build: a half-written generation.
    (store.view.folder / "g999999").mkdir()  # type: ignore[union-attr]

    reopened = _open(store.folder)
    view = reopened.view
    assert view is not None and view.ready
    assert not list((view.folder / "pending").glob("*.json"))
    assert not (view.folder / "g999999").exists()
    assert view.live_rows() == reopened.chunks.count_rows() == 2_000 - 50 - 50 + 5
    for i, v in enumerate(fresh):
        (hits,) = _ids(reopened, v[None, :])
        assert hits[0] == f"d8:{i}"
    everything = _ids(reopened, _clustered(np.random.default_rng(4), 32))
    assert not any(h.startswith("d9:") for hits in everything for h in hits)
    # d8 now has 5 chunks: its old rows 5..49 are hidden in the generation.
    assert not any(h.startswith("d8:") and int(h[3:]) >= 5 for hits in everything for h in hits)


def test_a_write_from_elsewhere_makes_lancedb_answer_until_rebuilt(built: tuple) -> None:
    store, _ = built
    far = -np.ones((1, DIM), np.float32) / np.sqrt(DIM)
    store.chunks.add(pa.Table.from_pylist(_rows(77, far)))  # not journalled
    (hits,) = _ids(store, far)
    assert hits[0] == "d77:0" and store.view is not None and store.view.stale
    store.maintain_index()
    assert store.maintainer.last_view_step == "view-built" and store.view.ready
    (hits,) = _ids(store, far)
    assert hits[0] == "d77:0"


def test_filters_and_fusion_hold_on_the_view(built: tuple) -> None:
    store, _ = built
    queries = _clustered(np.random.default_rng(5), 6)
    only = SearchFilters(folders=("/docs/a",), types=("PDF",))
    results = store.search_batch(vectors=queries, texts=[""] * 6, k=10, filters=only)
    for r in results:
        assert len(r.hits) == 10  # ten chunks match, so ten come back
        assert all(
            h.chunk.path.startswith("/docs/a/") and h.chunk.path.endswith(".pdf") for h in r.hits
        )
    # A filter matching one document: every partition is looked at for it.
    one = SearchFilters(folders=("/docs/b",), types=("md",))
    (r,) = store.search_batch(vectors=queries[:1], texts=[""], k=10, filters=one)
    assert len(r.hits) == 10 and all(
        h.chunk.doc_id in {f"d{d}" for d in range(0, DOCS, 2) if d % 4 >= 2} for h in r.hits
    )
    (r,) = store.search_batch(
        vectors=queries[:1], texts=[""], k=10, filters=SearchFilters(types=("txt",))
    )
    assert r.hits == () and r.not_found
    # BM25 candidates are fused with the view's: a word only one document has.
    store.refresh_fulltext_index(force=True)
    far = -queries[:1]
    (r,) = store.search_batch(vectors=far, texts=["doc17"], k=5)
    assert any(h.chunk.doc_id == "d17" for h in r.hits)


def test_the_resident_budget_is_honoured(built: tuple) -> None:
    store, _ = built
    view = store.view
    assert view is not None and view.generation is not None
    row_bytes = view.scorer.row_bytes(DIM)
    partition = max(view.generation.partition_bytes(p, row_bytes=row_bytes) for p in range(20))
    # What the planner is told one chunk takes: its row as scored, code and id.
    per_chunk = store.resident_row_bytes()
    assert per_chunk is not None and row_bytes < per_chunk <= row_bytes + 4 + 16
    queries = _clustered(np.random.default_rng(6), 64)
    full = _ids(store, queries)
    for budget in (4 * partition, 12 * partition):
        store.set_resident_budget(resident_bytes=budget)
        for start in range(0, 64, 16):  # batches load and release partitions
            got = _ids(store, queries[start : start + 16])
            assert got == full[start : start + 16]  # the budget costs time, never answers
            assert 0 < store.resident_bytes() <= budget
    loads = view.cache.loads
    store.set_resident_budget(resident_bytes=None)  # no cap: everything stays
    _ids(store, queries)
    _ids(store, queries)
    assert view.cache.loads - loads <= 20


def test_the_partition_cache_evicts_least_recently_used() -> None:
    cache = PartitionCache(budget_bytes=300)
    block = (np.zeros(100, np.uint8),)
    for key in "abc":
        cache.put(key, block)
    cache.get("a")
    cache.put("d", block)  # "b" is the least recently used
    assert "b" not in cache and "a" in cache and cache.resident_bytes == 300
    cache.put("big", (np.zeros(400, np.uint8),))  # larger than the budget: not kept
    assert "big" not in cache and cache.resident_bytes == 300
    cache.set_budget(150)
    assert cache.resident_bytes == 100


def test_the_view_error_bound_covers_float16_copies() -> None:
    # The exact re-rank reads only candidates within twice this bound of the
    # view's k-th score: a copy that moved further would be missed.
    rng = np.random.default_rng(3)
    v = _clustered(rng, 4000).astype(np.float64) * rng.uniform(0.5, 3.0, size=(4000, 1))
    q = _clustered(rng, 8).astype(np.float64)
    exact = (v / np.linalg.norm(v, axis=1, keepdims=True)) @ q.T
    unit16 = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)
    viewed = unit16.astype(np.float32) @ q.T.astype(np.float32)
    assert float(np.abs(viewed - exact).max()) <= _VIEW_ERROR


def test_hits_a_concurrent_write_removed_are_replaced_by_the_next(built: tuple) -> None:
    store, _ = built
    fused = [[("gone:1", 0.9), ("d0:0", 0.8), ("gone:2", 0.7), ("d0:1", 0.6), ("d0:2", 0.5)]]
    rows: dict = {}
    _fetch_hits(store.chunks, fused=fused, k=2, rows=rows)
    assert {"d0:0", "d0:1"} <= rows.keys() and "gone:1" not in rows
    (result,) = [
        _result(ranked=r, rows=rows, query=np.ones(DIM, np.float32), k=2, not_found_below=-2.0)
        for r in fused
    ]
    assert [h.chunk.chunk_id for h in result.hits] == ["d0:0", "d0:1"]
    assert [h.fused for h in result.hits] == [0.8, 0.6]


def _generation(folder: Path, *, rows: int = 3000, partitions: int = 12) -> Generation:
    vectors = _clustered(np.random.default_rng(11), rows)
    batch = pa.RecordBatch.from_pydict(
        {
            "chunk_id": [f"c{i}" for i in range(rows)],
            "doc_id": [f"d{i // 30}" for i in range(rows)],
            "path": [f"/docs/d{i // 30}.md" for i in range(rows)],
            "ext": [".md"] * rows,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )
    write_generation(
        folder=folder, batches=[batch], rows_hint=rows, dimension=DIM, partitions=partitions
    )
    return open_generation(folder, seq=0)


def _scan_view(folder: Path, scorer: object, *, budget_bytes: int | None = None) -> IvfView:
    view = IvfView(folder=folder, dimension=DIM, budget_bytes=budget_bytes)  # not journalling
    view._scorer = scorer  # type: ignore[assignment]
    return view


@pytest.mark.parametrize("budget_parts", [None, 2])
def test_int8_scan_finds_what_float32_finds(tmp_path: Path, budget_parts: int | None) -> None:
    # Resident, and with most partitions read from disk during the scan.
    pytest.importorskip("torch")
    gen = _generation(tmp_path / "g000001")
    queries = unit_rows(_clustered(np.random.default_rng(12), 24))
    f32 = _scan_view(tmp_path / "a", Float32Scorer())
    i8 = Int8Scorer()
    budget = None
    if budget_parts is not None:
        budget = budget_parts * max(
            gen.partition_bytes(p, row_bytes=i8.row_bytes(DIM)) for p in range(gen.partitions)
        )
    int8 = _scan_view(tmp_path / "b", i8, budget_bytes=budget)
    keep = np.arange(len(gen.doc_ids)) % 2 == 0  # a filter: every other document
    for limit, nprobes, mask in [(10, 3, None), (40, 12, None), (10, 4, keep), (1, 2, None)]:
        s1, r1, _ = f32._scan(gen, queries, limit=limit, nprobes=nprobes, keep=mask)
        s2, r2, c2 = int8._scan(gen, queries, limit=limit, nprobes=nprobes, keep=mask)
        for i in range(len(queries)):
            # The same rows in the same order, with the float32 scores.
            assert r2[i].tolist() == r1[i].tolist()
            np.testing.assert_allclose(s2[i], s1[i], rtol=0, atol=1e-5)
            assert np.array_equal(c2[i], np.asarray(gen.ids)[r2[i]])  # ids match rows
            if mask is not None:  # nothing filtered out comes back
                assert mask[np.asarray(gen.docs)[r2[i]]].all()
    # Only the top 5 asked exact (a hybrid search's k): those match, the rest
    # rank below them, by approximate scores.
    s1, r1, _ = f32._scan(gen, queries, limit=40, nprobes=6, keep=None)
    s2, r2, _ = int8._scan(gen, queries, limit=40, nprobes=6, keep=None, exact=5)
    for i in range(len(queries)):
        assert r2[i][:5].tolist() == r1[i][:5].tolist() and len(set(r2[i].tolist())) == 40
        np.testing.assert_allclose(s2[i][:5], s1[i][:5], rtol=0, atol=1e-5)
        assert (s2[i][5:] <= s1[i][4]).all()
    if budget is not None:
        assert int8.cache.resident_bytes <= budget


def test_vectors_are_read_by_row_in_runs(tmp_path: Path) -> None:
    gen = _generation(tmp_path / "g000001", rows=2000)
    rows = np.array([0, 1, 5, 70, 900, 901, 1999])  # near ones share a read
    with ThreadPoolExecutor(2) as pool:
        for p in (None, pool):
            assert np.array_equal(gen.read_vectors(rows, pool=p), gen.vectors[rows])
    assert gen.read_vectors(np.zeros(0, np.int64)).shape == (0, DIM)


def test_a_scan_on_a_generation_a_rebuild_removed_still_reads(tmp_path: Path) -> None:
    # finish_build removes the folder of the generation it replaces while a
    # search may still be scanning it (reading cold partitions, re-scoring).
    gen = _generation(tmp_path / "g000001", rows=1000, partitions=4)
    want_rows, want_codes = np.array(gen.vectors[:3]), np.array(gen.codes[:250])
    shutil.rmtree(tmp_path / "g000001")
    assert np.array_equal(gen.read_vectors(np.array([0, 1, 2])), want_rows)
    codes = gen.load(0, form="int8")[0]
    assert np.array_equal(codes, want_codes[: len(codes)])


def test_a_generation_without_codes_gains_them_on_open(tmp_path: Path) -> None:
    gen = _generation(tmp_path / "g000001", rows=500, partitions=4)
    want = np.array(gen.codes)
    for name in ("codes.npy", "code_meta.npy"):
        (tmp_path / "g000001" / name).unlink()
    again = open_generation(tmp_path / "g000001", seq=0)
    assert np.array_equal(again.codes, want)
    # Each code is within its stated error of the float16 row.
    x = np.asarray(again.vectors, np.float32)
    scale, error = again.code_meta[:, 0], again.code_meta[:, 1]
    miss = np.linalg.norm(x - again.codes * scale[:, None], axis=1)
    np.testing.assert_allclose(miss, error, rtol=1e-4, atol=1e-6)
    assert float(error.max()) < 0.02  # 8 bits per value of a unit row


def test_partitions_read_ahead_give_the_same_answers_within_the_budget(tmp_path: Path) -> None:
    gen = _generation(tmp_path / "g000001", rows=4000, partitions=16)
    lo, hi = int(gen.offsets[3]), int(gen.offsets[4])
    vectors, codes, ids = gen.load(3, form="float16")  # pread gives what the memmap holds
    assert np.array_equal(vectors, gen.vectors[lo:hi]) and np.array_equal(ids, gen.ids[lo:hi])
    assert np.array_equal(codes, gen.docs[lo:hi])
    int8, meta, _, _ = gen.load(3, form="int8")
    assert np.array_equal(int8, gen.codes[lo:hi]) and np.array_equal(meta, gen.code_meta[lo:hi])
    queries = unit_rows(_clustered(np.random.default_rng(13), 32))
    resident = _scan_view(tmp_path / "a", Float32Scorer())
    want = resident._scan(gen, queries, limit=10, nprobes=6, keep=None)
    partition = max(gen.partition_bytes(p, row_bytes=4 * DIM) for p in range(gen.partitions))
    budget = 3 * partition
    view = _scan_view(tmp_path / "b", Float32Scorer(), budget_bytes=budget)
    probed = {int(p) for p in np.argsort(-(queries @ gen.centroids.T), axis=1)[:, :6].ravel()}
    for _ in range(2):  # the second time a few partitions are resident, the rest read
        held = sum((gen.name, p) in view.cache for p in probed)
        loads = view.cache.loads
        got = view._scan(gen, queries, limit=10, nprobes=6, keep=None)
        for a, b in zip(got, want, strict=True):
            assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        assert 0 < view.cache.resident_bytes <= budget
        assert view.cache.loads - loads == len(probed) - held  # each missing one read once
    assert view._scanner._readers is not None  # read in threads
