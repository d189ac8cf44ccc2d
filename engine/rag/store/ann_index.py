"""The partitioned ANN index of a chunks table, and keeping it fresh.

Below `IndexPolicy.min_rows` a flat scan is fast enough and no index is built.
Past it, the maintainer trains an IVF index in a background thread. Rows added
after the build are still found at once (LanceDB scans unindexed rows flat and
merges them with the index results); when enough of them accumulate, or on a
schedule, `optimize()` folds them into the index and compacts small files.
Neither step takes the store's write lock: LanceDB commits an index or a
compaction as a new table version and resolves it against concurrent writes,
so ingestion and search never wait for maintenance.
"""

from __future__ import annotations

import datetime
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from engine.rag.store.search import VectorParams

log = logging.getLogger(__name__)

IndexKind = Literal["IVF_SQ", "IVF_PQ", "IVF_HNSW_SQ", "IVF_FLAT"]


@dataclass(frozen=True, kw_only=True)
class IndexPolicy:
    """When an index is built, of what kind, and how it is searched.

    Defaults come from `ragdoll bench retrieval` (docs/retrieval.md): IVF with
    int8 scalar-quantised partitions (IVF_SQ) builds in seconds where IVF-PQ takes
    minutes on a 2-core machine, and with exact re-ranking of 10x the candidates
    keeps recall@10 above 0.95; flat scans pass ~100 ms past ~50k rows there."""

    min_rows: int = 50_000
    kind: IndexKind = "IVF_SQ"
    rows_per_partition: int = 4_096
    nprobes: int = 20
    refine_factor: int | None = 10
    ef: int | None = None
    optimize_after_rows: int = 20_000  # unindexed rows that trigger an optimize at once
    optimize_interval_s: float = 300.0  # otherwise fold stragglers in this often
    keep_versions_s: float = 600.0  # old table versions kept for readers in flight

    def __post_init__(self) -> None:
        if self.min_rows < 1 or self.rows_per_partition < 1 or self.nprobes < 1:
            raise ValueError("min_rows, rows_per_partition and nprobes must be at least 1")

    def partitions(self, rows: int) -> int:
        return max(1, min(4096, math.ceil(rows / self.rows_per_partition)))

    @property
    def search_params(self) -> VectorParams:
        return VectorParams(nprobes=self.nprobes, refine_factor=self.refine_factor, ef=self.ef)


@dataclass(frozen=True, kw_only=True)
class IndexState:
    indexed: bool  # a vector index exists
    kind: str | None
    indexed_rows: int
    unindexed_rows: int
    partitions: int | None
    index_bytes: int


def index_config(*, policy: IndexPolicy, rows: int, dimension: int) -> Any:
    from lancedb.index import HnswSq, IvfFlat, IvfPq, IvfSq

    partitions = policy.partitions(rows)
    if policy.kind == "IVF_SQ":
        return IvfSq(distance_type="cosine", num_partitions=partitions)
    if policy.kind == "IVF_FLAT":
        return IvfFlat(distance_type="cosine", num_partitions=partitions)
    if policy.kind == "IVF_HNSW_SQ":
        return HnswSq(distance_type="cosine", num_partitions=partitions)
    # 8 dimensions per PQ sub-vector (48 for MiniLM's 384); the dimension must divide.
    sub = max(1, dimension // 8)
    while dimension % sub:
        sub -= 1
    # LanceDB's default PQ training (256 samples per centroid, 50 iterations) took
    # 318 s for 50k vectors on 2 busy cores; an eighth of the samples loses little
    # (recall is restored by exact re-ranking) and trains ~8x faster.
    return IvfPq(
        distance_type="cosine",
        num_partitions=partitions,
        num_sub_vectors=sub,
        sample_rate=32,
        max_iterations=25,
    )


def index_state(table: Any) -> IndexState:
    for info in table.list_indices():
        if list(getattr(info, "columns", [])) == ["vector"]:
            stats = table.index_stats(info.name)
            details = getattr(info, "index_details", None) or {}
            return IndexState(
                indexed=True,
                kind=stats.index_type if stats else info.index_type,
                indexed_rows=stats.num_indexed_rows if stats else 0,
                unindexed_rows=stats.num_unindexed_rows if stats else 0,
                partitions=_partitions_of(details),
                index_bytes=int(getattr(info, "size_bytes", 0) or 0),
            )
    return IndexState(
        indexed=False,
        kind=None,
        indexed_rows=0,
        unindexed_rows=table.count_rows(),
        partitions=None,
        index_bytes=0,
    )


def _partitions_of(details: dict[str, Any]) -> int | None:
    value = details.get("num_partitions") if isinstance(details, dict) else None
    return int(value) if value else None


class IndexMaintainer:
    """One background thread per store: builds the index past the threshold,
    folds new rows in, compacts. `wake()` after a write; `run_once()` runs a
    step in the caller's thread (tests, benchmarks, `ragdoll` commands)."""

    def __init__(
        self,
        *,
        table: Callable[[], Any],
        dimension: Callable[[], int],
        scalar_indices: Callable[[], None],
        policy: IndexPolicy,
        background: bool = True,
        view_step: Callable[..., str | None] | None = None,
    ) -> None:
        self._table = table
        self._view_step = view_step
        self._dimension = dimension
        self._scalar_indices = scalar_indices
        self.policy = policy
        self.lock = threading.Lock()  # one maintenance step at a time
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._last_optimize = time.monotonic()
        self._writes = 0  # since the last optimize
        self.last_error: str | None = None
        self.last_view_step: str | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._wake.set()  # a store opened past the threshold gets its index soon
            self._thread = threading.Thread(
                target=self._loop, name="store-index-maintainer", daemon=True
            )
            self._thread.start()

    def wake(self) -> None:
        """A write happened: check soon whether to build, fold in or compact."""
        self._writes += 1
        self._wake.set()

    def stop(self, *, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=min(60.0, self.policy.optimize_interval_s))
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.run_once()
            except Exception as e:  # a failed step is retried on the next wake
                self.last_error = f"{type(e).__name__}: {e}"
                log.exception("index maintenance failed; it will be retried")

    def run_once(self, *, force_optimize: bool = False) -> str:
        """One maintenance step. Returns what it did to LanceDB's index: 'built',
        'optimized' or 'none'; the IVF view's step ('view-built', 'view-folded' or
        None) is kept in `last_view_step`."""
        table = self._table()
        if table is None:
            return "none"
        with self.lock:
            due = time.monotonic() - self._last_optimize >= self.policy.optimize_interval_s
            done = self._lance_step(table, force_optimize=force_optimize, due=due)
            if self._view_step is not None:
                self.last_view_step = self._view_step(due=due, force=force_optimize)
            return done

    def _lance_step(self, table: Any, *, force_optimize: bool, due: bool) -> str:
        self._scalar_indices()
        state = index_state(table)
        if not state.indexed and state.unindexed_rows >= self.policy.min_rows:
            self.build(table=table, rows=state.unindexed_rows)
            return "built"
        # Below the threshold there is no index to fold rows into, but each
        # document write leaves a small file; compaction keeps scans fast.
        stale = state.unindexed_rows > 0 if state.indexed else self._writes > 0
        if (
            force_optimize
            or (state.indexed and state.unindexed_rows >= self.policy.optimize_after_rows)
            or (due and stale)
        ):
            self._optimize(table)
            return "optimized"
        return "none"

    def build(self, *, table: Any, rows: int) -> None:
        started = time.perf_counter()
        config = index_config(policy=self.policy, rows=rows, dimension=self._dimension())
        table.create_index("vector", config=config, replace=True)
        self._last_optimize = time.monotonic()
        log.info(
            "built a %s index over %d chunks in %.1f s",
            self.policy.kind,
            rows,
            time.perf_counter() - started,
        )

    def _optimize(self, table: Any) -> None:
        started = time.perf_counter()
        writes = self._writes
        table.optimize(cleanup_older_than=datetime.timedelta(seconds=self.policy.keep_versions_s))
        self._last_optimize = time.monotonic()
        self._writes -= writes
        log.info("optimized the chunks table in %.1f s", time.perf_counter() - started)
