"""The batched scan over a generation of the IVF view (RAGDoll §4.2).

Each question is given its `nprobes` partitions; every probed partition is
taken once from the resident cache or the disk and scored against all the
questions that probe it with one product (`scoring.py`), and each question
keeps its best `limit` candidates.

- Resident partitions are scored first, while the missing ones are read from
  disk by a few threads (`pread`, which releases the GIL), at most
  `_READ_AHEAD` ahead of the scan, so the disk works during the scoring and a
  batch holds at most that many partitions beyond the budget.
- With a scorer that runs in threads of its own (bfloat16: torch on one thread
  each), a few such threads take partitions from a shared queue: one product is
  memory-bound on one core (~0.36 ms per 3 MB partition at 1M rows), and a
  thread the OS does not schedule holds up only its own partition, not an
  OpenMP barrier.
- An approximate scorer's candidates are re-scored exactly, only those within
  its error of the question's `limit`-th best exact score so far.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from engine.store.ivf_files import Generation
from engine.store.partition_cache import PartitionCache
from engine.store.scoring import Scorer, scan_workers

# Partitions read from disk at once, and at most how many ahead of the scan: on
# the development machine's virtio disk 15 partitions of 3.1 MB took 73 ms one
# after another and 42-75 ms issued together.
_READERS = 4
_READ_AHEAD = 8

Found = tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]  # scores, rows, chunk ids


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
    ) -> Found:
        """Each question's best `limit` (unit questions `q`; `keep`: which
        document codes may be returned, None for all)."""
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
        job = _Job(
            scorer=scorer,
            q=q,
            qk=scorer.queries(q),
            limit=limit,
            keep=keep,
            margin=scorer.error(gen.dimension),
        )
        source = self._partitions(gen, askers, scorer)
        results: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
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
        return _merge(gen, askers, results, n=len(q), limit=limit)

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
    """One scan's scoring of partitions; `best` (each question's `limit` best
    exact scores so far, for the re-scoring's cut) is shared by the threads."""

    def __init__(
        self,
        *,
        scorer: Scorer,
        q: np.ndarray,
        qk: Any,
        limit: int,
        keep: np.ndarray | None,
        margin: float,
    ) -> None:
        self.scorer, self.q, self.qk, self.limit, self.keep = scorer, q, qk, limit, keep
        self.margin = margin
        self.best = None if scorer.exact else np.full((len(q), limit), -np.inf, np.float32)
        # bfloat16 rounds the scores to steps of 2**-8 near 1: a partition's
        # `limit`-th exact best may rank lower among them, hence twice as many.
        self.pick = limit if scorer.exact else 2 * limit
        self._lock = threading.Lock()

    def score(
        self, *, p: int, qs: list[int], entry: tuple[Any, ...], lo: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Partition p's candidates for its questions `qs`: scores, rows of the
        generation, chunk ids (one row per question)."""
        kernel, codes, ids = entry[:-2], entry[-2], entry[-1]
        # One product for every question probing p: (questions, rows).
        sims = self.scorer.score(kernel, self.qk, qs)
        if self.keep is not None:
            sims[:, ~self.keep[codes]] = -np.inf
        if sims.shape[1] > self.pick:
            top = np.argpartition(-sims, self.pick - 1, axis=1)[:, : self.pick]
            picked = np.take_along_axis(sims, top, axis=1)
        else:
            top = np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
            picked = sims
        if self.best is not None:
            picked = self._rescore(kernel, qs, top, picked)
        return picked, top + lo, ids[top]

    def _rescore(
        self, kernel: tuple[Any, ...], qs: list[int], top: np.ndarray, approx: np.ndarray
    ) -> np.ndarray:
        """Exact scores of the picked candidates; -inf for those that cannot
        enter their question's best: more than the scorer's error below the
        lowest of its best exact scores so far (a lower bound of the final
        `limit`-th; read under the lock, as a row half rewritten by another
        thread could count one candidate twice and raise it)."""
        best = self.best
        assert best is not None
        with self._lock:
            floor = best[qs].min(axis=1) - self.margin
        jj, cc = np.nonzero((approx >= floor[:, None]) & np.isfinite(approx))
        exact = np.full(approx.shape, -np.inf, np.float32)
        if len(jj):
            exact[jj, cc] = self.scorer.rescore(kernel, top[jj, cc], self.q[np.asarray(qs)[jj]])
            with self._lock:
                merged = np.concatenate([best[qs], exact], axis=1)
                cut = merged.shape[1] - best.shape[1]
                best[qs] = np.partition(merged, cut, axis=1)[:, cut:]
        return exact


def _read_partition(gen: Generation, p: int, scorer: Scorer) -> tuple[Any, ...]:
    rows, codes, ids = gen.load(p)
    return (*scorer.resident(rows), codes, ids)


def _merge(
    gen: Generation,
    askers: dict[int, list[int]],
    results: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    n: int,
    limit: int,
) -> Found:
    """Each question's best `limit` over its partitions, in partition order
    (whichever thread scored them: the same answer every time)."""
    found: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(n)]
    for p, qs in askers.items():
        picked, rows, ids = results[p]
        for j, qi in enumerate(qs):
            found[qi].append((picked[j], rows[j], ids[j]))
    scores, rows_out, chunk_ids = [], [], []
    for parts in found:
        if parts:
            s = np.concatenate([f[0] for f in parts])
            r = np.concatenate([f[1] for f in parts])
            c = np.concatenate([f[2] for f in parts])
        else:
            s, r, c = np.zeros(0, np.float32), np.zeros(0, np.int64), gen.ids[:0]
        valid = np.isfinite(s)
        s, r, c = s[valid], r[valid], c[valid]
        best = np.argsort(-s, kind="stable")[:limit]
        scores.append(s[best])
        rows_out.append(r[best])
        chunk_ids.append(c[best])
    return scores, rows_out, chunk_ids
