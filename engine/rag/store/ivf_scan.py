"""The batched scan over a generation of the IVF view (RAGDoll §4.2).

Each question is given its `nprobes` partitions; every probed partition is
taken once from the resident cache or the disk and scored against all the
questions that probe it with one product (`scoring.py`), and each question
keeps its best `limit` candidates.

- Resident partitions are scored first, while the missing ones are read from
  disk by a few threads (`pread`, which releases the GIL), at most
  `_READ_AHEAD` ahead of the scan, so the disk works during the scoring and a
  batch holds at most that many partitions beyond the budget.
- With a scorer that runs in threads of its own (int8: torch on one thread
  each), a few such threads take partitions from a shared queue: one product is
  memory-bound on one core (~0.12 ms per 1.5 MB partition at 1M rows), and a
  thread the OS does not schedule holds up only its own partition, not an
  OpenMP barrier.
- An approximate scorer's scores come with a bound per row. A row is kept only
  while its upper bound reaches the `limit`-th best lower bound its question
  has seen; after the scan, the rows that can still enter a question's top k
  are re-scored exactly from their float16 vectors, read from disk by row
  (~25 rows a question for a top 10 at 1M rows, nprobes 20).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from engine.rag.store.ivf_files import Generation
from engine.rag.store.partition_cache import PartitionCache
from engine.rag.store.scoring import Scorer, scan_workers

# Partitions read from disk at once, and at most how many ahead of the scan: on
# the development machine's virtio disk 15 partitions of 3.1 MB took 73 ms one
# after another and 42-75 ms issued together.
_READERS = 4
_READ_AHEAD = 8
_NO_FLOOR = -4.0

Found = tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]  # scores, rows, chunk ids
# A question's candidates: scores, their bounds (None when exact), generation
# rows, chunk ids. `Picked`: a partition's, flat, led by each one's question.
Cands = tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]
Picked = tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]


class Scanner:
    """Scans generations whose resident partitions live in `cache`."""

    def __init__(self, *, cache: PartitionCache) -> None:
        self.cache = cache
        self._lock = threading.Lock()
        self._readers: ThreadPoolExecutor | None = None
        self._workers: ThreadPoolExecutor | None = None
        self.workers = scan_workers()

    def scan(
        self,
        gen: Generation,
        q: np.ndarray,
        *,
        scorer: Scorer,
        limit: int,
        nprobes: int,
        keep: np.ndarray | None,
        exact: int | None = None,
    ) -> Found:
        """Each question's best `limit` (unit questions `q`; `keep`: which
        document codes may be returned, None for all), the first `exact` of
        them (all by default) in exact order with exact scores; with an
        approximate scorer the rest are ordered by their approximate scores,
        each below the exact `exact`-th (a hybrid search needs its vector
        side's ranks past the top k only for the fusion)."""
        probes = min(nprobes, gen.partitions)
        if scorer.own_thread:  # torch in the caller's thread would use its OpenMP threads
            coarse = self._worker_pool(scorer).submit(scorer.coarse, q, gen.centroids).result()
        else:
            coarse = scorer.coarse(q, gen.centroids)
        if probes < gen.partitions:
            probe = np.argpartition(-coarse, probes - 1, axis=1)[:, :probes]
        else:
            probe = np.broadcast_to(np.arange(gen.partitions), coarse.shape)
        askers: dict[int, list[int]] = {}
        for qi, parts in enumerate(probe.tolist()):
            for p in parts:
                if gen.offsets[p + 1] > gen.offsets[p]:
                    askers.setdefault(p, []).append(qi)
        job = _Job(scorer=scorer, qk=scorer.queries(q), n=len(q), limit=limit, keep=keep)
        source = self._partitions(gen, askers, scorer)
        results: dict[int, Picked] = {}
        taking = threading.Lock()

        def work() -> None:
            while True:
                with taking:
                    item = next(source, None)
                if item is None:
                    return
                p, entry = item
                results[p] = job.score(p=p, qs=askers[p], entry=entry, lo=int(gen.offsets[p]))

        try:
            if scorer.own_thread:
                pool = self._worker_pool(scorer)
                done, _ = wait([pool.submit(work) for _ in range(self.workers)])
                for f in done:
                    f.result()
            else:
                work()
        finally:
            source.close()
        found = _gather(askers, results, n=len(q))
        if not scorer.exact:
            found = self._rescore(gen, q, found, exact=min(exact or limit, limit))
        return _best(gen, found, limit=limit)

    def _rescore(
        self, gen: Generation, q: np.ndarray, found: list[Cands], *, exact: int
    ) -> list[Cands]:
        """Each question's candidates that can still enter its best `exact`
        (upper bound at least its `exact`-th best lower bound) scored exactly
        from their float16 vectors, read once for the whole batch. The others
        keep their approximate scores: each upper bound is below that lower
        bound, so below the exact `exact`-th best."""
        picked: list[np.ndarray] = []
        for scores, bounds, _, _ in found:
            assert bounds is not None
            lower = scores - bounds
            floor = -np.inf if len(lower) <= exact else np.partition(lower, -exact)[-exact]
            picked.append(np.flatnonzero(scores + bounds >= floor))
        wanted = np.unique(
            np.concatenate([f[2][sel] for f, sel in zip(found, picked, strict=True)] or [[]])
        ).astype(np.int64)
        pool = self._reader_pool() if len(wanted) > 1 else None
        vectors = gen.read_vectors(wanted, pool=pool).astype(np.float32)
        out: list[Cands] = []
        for i, ((scores, _, rows, ids), sel) in enumerate(zip(found, picked, strict=True)):
            scores = scores.copy()
            scores[sel] = vectors[np.searchsorted(wanted, rows[sel])] @ q[i]
            out.append((scores, None, rows, ids))
        return out

    def _partitions(
        self, gen: Generation, askers: dict[int, list[int]], scorer: Scorer
    ) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """Each probed partition with its resident entry: the resident ones
        first, while the missing ones are read from disk in threads."""
        resident = [p for p in askers if (gen.name, p) in self.cache]
        missing = [p for p in askers if (gen.name, p) not in self.cache]
        pending: dict[int, Future] = {}
        pool = self._reader_pool() if len(missing) > 1 else None

        def submit(upto: int) -> None:
            if pool is None:
                return
            for p in missing[len(pending) : upto]:
                pending[p] = pool.submit(_read_partition, gen, p, scorer)

        submit(_READ_AHEAD)
        try:
            for n, p in enumerate(resident + missing):
                entry = self.cache.get((gen.name, p))
                if entry is None:
                    job = pending.get(p)
                    entry = job.result() if job is not None else _read_partition(gen, p, scorer)
                    # Those not resident evict the least recently used.
                    self.cache.put((gen.name, p), entry)
                if n >= len(resident):
                    submit(n - len(resident) + 1 + _READ_AHEAD)
                yield p, entry
        finally:
            for job in pending.values():
                job.cancel()

    def _reader_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._readers is None:
                self._readers = ThreadPoolExecutor(
                    max_workers=_READERS, thread_name_prefix="ivf-read"
                )
            return self._readers

    def _worker_pool(self, scorer: Scorer) -> ThreadPoolExecutor:
        with self._lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(
                    max_workers=self.workers,
                    thread_name_prefix="ivf-scan",
                    initializer=scorer.start_thread,
                )
            return self._workers


class _Job:
    """One scan's scoring of partitions. For an approximate scorer, `floor`
    holds each question's `limit` best lower bounds so far (shared by the
    threads): no row whose upper bound is below the lowest can enter."""

    def __init__(
        self, *, scorer: Scorer, qk: Any, n: int, limit: int, keep: np.ndarray | None
    ) -> None:
        self.scorer, self.qk, self.limit, self.keep = scorer, qk, limit, keep
        self.floor = None if scorer.exact else np.full((n, limit), -np.inf, np.float32)
        self._lock = threading.Lock()

    def score(self, *, p: int, qs: list[int], entry: tuple[Any, ...], lo: int) -> Picked:
        """Partition p's candidates for its questions `qs`."""
        kernel, codes, ids = entry[:-2], entry[-2], entry[-1]
        # One product for every question probing p: (questions, rows).
        sims = self.scorer.score(kernel, self.qk, qs)
        if self.keep is not None:
            sims[:, ~self.keep[codes]] = -np.inf
        asked = np.asarray(qs)
        if self.floor is None:
            return self._top(sims, asked, ids, lo)
        bounds = self.scorer.error(kernel, self.qk)
        lower = sims - bounds
        limit = self.limit
        best = lower if lower.shape[1] <= limit else np.partition(lower, -limit, axis=1)[:, -limit:]
        with self._lock:  # a row half rewritten by another thread could count twice
            merged = np.concatenate([self.floor[asked], best], axis=1)
            self.floor[asked] = np.partition(merged, -limit, axis=1)[:, -limit:]
            floor = self.floor[asked].min(axis=1)
        # A cosine is at least -1: a floor below keeps every finite score and
        # no filtered one (-inf).
        np.maximum(floor, _NO_FLOOR, out=floor)
        jj, cc = np.nonzero(sims + bounds >= floor[:, None])
        return asked[jj], sims[jj, cc], bounds[cc], cc + lo, ids[cc]

    def _top(self, sims: np.ndarray, asked: np.ndarray, ids: np.ndarray, lo: int) -> Picked:
        m, rows = sims.shape
        if rows > self.limit:
            top = np.argpartition(-sims, self.limit - 1, axis=1)[:, : self.limit]
        else:
            top = np.broadcast_to(np.arange(rows), sims.shape)
        picked = np.take_along_axis(sims, top, axis=1).ravel()
        top = top.ravel()
        return np.repeat(asked, top.size // max(m, 1)), picked, None, top + lo, ids[top]


def _read_partition(gen: Generation, p: int, scorer: Scorer) -> tuple[Any, ...]:
    loaded = gen.load(p, form=scorer.form)
    return (*scorer.resident(loaded[:-2]), *loaded[-2:])


def _gather(askers: dict[int, list[int]], results: dict[int, Picked], *, n: int) -> list[Cands]:
    """Each question's candidates from all its partitions, in partition order
    (whichever thread scored them: the same answer every time), as one
    (scores, bounds, rows, ids) per question."""
    parts = [results[p] for p in askers]
    if not parts:
        empty = np.zeros(0, np.float32)
        return [(empty, empty, np.zeros(0, np.int64), np.zeros(0, "S1"))] * n
    asked = np.concatenate([r[0] for r in parts])
    order = np.argsort(asked, kind="stable")
    cuts = np.cumsum(np.bincount(asked, minlength=n))[:-1]

    def each(column: int) -> list[np.ndarray]:
        return np.split(np.concatenate([r[column] for r in parts])[order], cuts)

    scores, rows, ids = each(1), each(3), each(4)
    bounds: list[Any] = [None] * n if parts[0][2] is None else each(2)
    return list(zip(scores, bounds, rows, ids, strict=True))


def _best(gen: Generation, found: list[Cands], *, limit: int) -> Found:
    """Each question's best `limit`, best first (ties in partition order)."""
    scores, rows_out, chunk_ids = [], [], []
    for s, _, r, c in found:
        valid = np.isfinite(s)
        s, r, c = s[valid], r[valid], c[valid]
        best = np.argsort(-s, kind="stable")[:limit]
        scores.append(s[best])
        rows_out.append(r[best])
        chunk_ids.append(c[best] if len(c) else gen.ids[:0])
    return scores, rows_out, chunk_ids
