"""How a resident partition is scored against the questions that probe it.

Two layouts of a resident partition; `RAGDOLL_IVF_SCORER` picks one: `auto`
(the default: a short timing at first use), `float32` or `int8` (read into
`EngineEnviron.ivf_scorer`, engine/environ.py, and handed down by the store).
- float32: the float16 rows as read, held as float32 (4 bytes a value) and
  scored through numpy (BLAS). Exact (the float32 cosine of the float16
  copies), anywhere.
- int8: the generation's int8 codes (one scale per row, 1 byte a value plus 8
  per row), scored with torch's int8 product (oneDNN: AMX or VNNI where the
  CPU has them) against each question written as two int8 vectors (the
  question, then what it misses at a finer scale). Each score comes with its
  bound (the code's error, by Cauchy-Schwarz); the scan re-scores the
  candidates that can still enter a question's best from the float16 rows,
  so what leaves the view is the same cosine as with float32 and the float16
  error bound downstream (`search._VIEW_ERROR`) holds.
One 4096 × 384 partition on the 2-core development machine (Sapphire Rapids,
one thread, partitions spread over the memory of 1M rows): int8 0.12 ms for
one question and 0.13 ms for five, against 0.36 / 0.41 ms for the bfloat16
kernel it replaced and 0.26 / 0.73 ms for float32 on two OpenBLAS threads; and
a partition read from disk is half the bytes of float16.
"""

from __future__ import annotations

import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from engine.rag.store.ivf_files import quantize, unit_rows

log = logging.getLogger(__name__)

_PROBE_ROWS, _PROBE_WIDTH = 4096, 5  # ~5 questions share a partition in a batch of 64
_MIN_GAIN = 1.5  # int8 only when at least this much faster for a batch...
_MAX_LOSS = 1.25  # ...and at most this much slower for a single question
_MAX_WORKERS = 4  # threads sharing an int8 scan: the products are memory-bound
_FLOAT_SLACK = 1e-5  # float32 rounding of an int8 score (int32 dots are exact)


class Scorer(Protocol):
    name: str
    form: str  # what is read of a partition: "float16" rows or "int8" codes
    exact: bool  # scores are the float32 cosine of the float16 rows
    own_thread: bool  # scans run in a thread of their own, set up by `start_thread`

    def start_thread(self) -> None: ...

    def row_bytes(self, dimension: int) -> int:
        """Resident bytes of one row as scored."""
        ...

    def resident(self, rows: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """What is held of a partition's rows as read in `form`."""
        ...

    def from_rows(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """What is held of float16 `rows` (for the probe and tests)."""
        ...

    def queries(self, q: np.ndarray) -> Any: ...

    def coarse(self, q: np.ndarray, centroids: np.ndarray) -> np.ndarray: ...

    def score(
        self, resident: tuple[np.ndarray, ...], queries: Any, picked: list[int]
    ) -> np.ndarray:
        """(len(picked), rows) float32 scores, each question's contiguous."""
        ...

    def error(self, resident: tuple[np.ndarray, ...], queries: Any) -> np.ndarray:
        """Per row, the most a score can differ from the float32 cosine of the
        float16 row (zeros for an exact scorer)."""
        ...


class Float32Scorer:
    name = "float32"
    form = "float16"
    exact = True
    own_thread = False

    def start_thread(self) -> None:
        pass

    def row_bytes(self, dimension: int) -> int:
        return 4 * dimension

    def resident(self, rows: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        return (np.asarray(rows[0], dtype=np.float32),)

    def from_rows(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        return self.resident((rows,))

    def queries(self, q: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(q, dtype=np.float32)

    def score(
        self, resident: tuple[np.ndarray, ...], queries: np.ndarray, picked: list[int]
    ) -> np.ndarray:
        # Rows × questions, then transposed: OpenBLAS took 0.67 against 1.0 ms
        # for 4096 × 384 rows and 5 questions that way round.
        rows = resident[0]
        if len(picked) == 1:
            return (rows @ queries[picked[0]])[None, :]
        return np.ascontiguousarray((rows @ queries[picked].T).T)

    def coarse(self, q: np.ndarray, centroids: np.ndarray) -> np.ndarray:
        """(questions, partitions) float32: which partitions each question probes."""
        return q @ centroids.T

    def error(self, resident: tuple[np.ndarray, ...], queries: Any) -> np.ndarray:
        return np.zeros(len(resident[0]), np.float32)


class Int8Scorer:
    name = "int8"
    form = "int8"
    exact = False
    # Scans run in a thread of their own where torch uses one thread: a
    # product of ~0.1 ms split over OpenMP threads waits at their barrier for a
    # thread the OS has not scheduled; with the machine shared (load 4-5 on 2
    # cores) the p95 of one product was 12-28 ms on 2 threads, 0.3 ms on one.
    own_thread = True

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def start_thread(self) -> None:
        self._torch.set_num_threads(1)  # this thread's OpenMP setting only

    def row_bytes(self, dimension: int) -> int:
        return dimension + 8  # the codes, their scale and error

    def resident(self, rows: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        codes, meta = rows  # meta: (rows, 2) scale and error, held as two columns
        return (
            np.ascontiguousarray(codes, dtype=np.int8),
            np.ascontiguousarray(meta[:, 0], dtype=np.float32),
            np.ascontiguousarray(meta[:, 1], dtype=np.float32),
        )

    def from_rows(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        return self.resident(quantize(rows))

    def queries(self, q: np.ndarray) -> Int8Queries:
        """Each question as two int8 vectors: its code, and the code of what
        the first misses (so the question's own rounding is ~1/127 of the
        rows', and the bound is the rows' error)."""
        q = np.asarray(q, dtype=np.float32)
        first, meta1 = quantize(q)
        rest = q - first * meta1[:, :1]
        second, meta2 = quantize(rest)
        both = np.stack([first, second], axis=1).reshape(2 * len(q), q.shape[1])
        return Int8Queries(
            codes=self._torch.from_numpy(both),
            scales=np.stack([meta1[:, 0], meta2[:, 0]], axis=1),
            slack=float(meta2[:, 1].max(initial=0.0)),
            norm=float(np.linalg.norm(q, axis=1).max(initial=0.0)),
        )

    def score(
        self, resident: tuple[np.ndarray, ...], queries: Int8Queries, picked: list[int]
    ) -> np.ndarray:
        torch = self._torch
        codes, scale = resident[0], resident[1]
        asked, weights = queries.columns(picked)
        dots = torch._int_mm(torch.from_numpy(codes), asked).float()  # exact below 2**24
        # Each question's two dot products weighted by their scales, in one
        # small product that also turns the result question-major (numpy's
        # int32 × float32 would go through float64).
        sims = weights @ dots.T
        sims *= torch.from_numpy(scale)
        return sims.numpy()

    def coarse(self, q: np.ndarray, centroids: np.ndarray) -> np.ndarray:
        # float32 through torch: an OpenBLAS product here would leave its
        # threads spinning against the torch products that follow (a 1 ms
        # product took 4-13 ms right after one on the 2-core machine).
        torch = self._torch
        return (torch.from_numpy(q) @ torch.from_numpy(centroids).T).numpy()

    def error(self, resident: tuple[np.ndarray, ...], queries: Int8Queries) -> np.ndarray:
        """Per row, the most its score can differ from the float32 cosine of
        its float16 row: |q·(x - x̂)| ≤ |q|·error, plus the question's own
        rounding against |x̂| ≤ 1 + error, plus float32 rounding."""
        bounds = resident[2] * (queries.norm + queries.slack)
        bounds += queries.slack + _FLOAT_SLACK
        return bounds


@dataclass(frozen=True, kw_only=True, eq=False)
class Int8Queries:
    codes: Any  # torch int8 (2 × questions, dim): each question's code, then its remainder's
    scales: np.ndarray  # (questions, 2) float32
    slack: float  # the largest norm of what both codes miss
    norm: float  # the largest question norm
    cached: dict[tuple[int, ...], tuple[Any, Any]] = field(default_factory=dict)  # per question

    def columns(self, picked: list[int]) -> tuple[Any, Any]:
        """The codes of questions `picked` as a (dim, 2 × m) torch int8 matrix,
        and (m, 2 × m) float32 weights whose row j sums question picked[j]'s
        two dot products, each times its scale. Kept for single questions:
        one asks the same of every partition it probes."""
        key = tuple(picked)
        got = self.cached.get(key)
        if got is None:
            import torch

            m = len(picked)
            cols = torch.as_tensor([c for j in picked for c in (2 * j, 2 * j + 1)])
            w = np.zeros((m, 2 * m), np.float32)
            w[np.repeat(np.arange(m), 2), np.arange(2 * m)] = self.scales[picked].ravel()
            got = (self.codes.index_select(0, cols).T.contiguous(), torch.from_numpy(w))
            if m == 1:
                self.cached[key] = got
        return got


def scan_workers() -> int:
    """Threads that share a scan's partitions, for a scorer with `own_thread`."""
    return max(1, min(_MAX_WORKERS, os.cpu_count() or 1))


def choose(times: dict[str, dict[int, float]], *, workers: int) -> str:
    """The layout from a probe's times ({scorer: {questions: seconds}}, each
    scorer as it scans: float32 on BLAS's threads, int8 on one thread of the
    `workers` that share a scan's partitions)."""
    f32, i8 = times["float32"], times["int8"]
    wide = max(f32)
    batch_gain = f32[wide] >= _MIN_GAIN * i8[wide]
    single_ok = i8[1] / workers <= _MAX_LOSS * f32[1]
    return "int8" if batch_gain and single_ok else "float32"


def probe(
    scorers: list[Scorer], *, dimension: int, rounds: int = 3, repeats: int = 3
) -> dict[str, dict[int, float]]:
    """Best time for one question and for a batch's width on one
    partition-sized block, each scorer in the thread it scans in (a few ms; at
    first use, never at import). The scorers take turns, `rounds` times:
    OpenBLAS's and OpenMP's threads spin for a while after a product and slow
    the other library's next ones."""
    rng = np.random.default_rng(0)
    rows = unit_rows(rng.normal(size=(_PROBE_ROWS, dimension))).astype(np.float16)
    q = unit_rows(rng.normal(size=(_PROBE_WIDTH, dimension)))
    times: dict[str, dict[int, float]] = {
        s.name: {1: math.inf, _PROBE_WIDTH: math.inf} for s in scorers
    }
    threads = {
        s.name: ThreadPoolExecutor(max_workers=1, initializer=s.start_thread)
        for s in scorers
        if s.own_thread
    }
    try:
        held = [(s, s.from_rows(rows), s.queries(q)) for s in scorers]
        for _ in range(rounds):
            for scorer, resident, queries in held:
                thread = threads.get(scorer.name)
                if thread is None:
                    got = _time(scorer, resident, queries, repeats=repeats)
                else:
                    got = thread.submit(_time, scorer, resident, queries, repeats=repeats).result()
                for width, t in got.items():
                    times[scorer.name][width] = min(times[scorer.name][width], t)
    finally:
        for thread in threads.values():
            thread.shutdown()
    return times


def _time(scorer: Scorer, resident: Any, queries: Any, *, repeats: int) -> dict[int, float]:
    out = {}
    for width in (1, _PROBE_WIDTH):
        picked = list(range(width))
        scorer.score(resident, queries, picked)  # warm up
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            scorer.score(resident, queries, picked)
            best = min(best, time.perf_counter() - t0)
        out[width] = best
    return out


def pick_scorer(dimension: int, *, wanted: str = "auto") -> Scorer:
    """The layout `wanted` asks for ("auto": the faster here, by a short timing);
    float32 for anything else, or where int8 products are missing."""
    if wanted not in {"int8", "auto"}:
        return Float32Scorer()
    try:
        i8 = Int8Scorer()
    except ImportError:
        return Float32Scorer()
    if wanted == "int8":
        return i8
    f32 = Float32Scorer()
    try:
        times = probe([i8, f32], dimension=dimension)
    except (RuntimeError, AttributeError, NotImplementedError) as e:  # no CPU int8 products
        log.info("IVF view scores in float32 (int8 failed: %s)", e)
        return f32
    chosen: Scorer = i8 if choose(times, workers=scan_workers()) == "int8" else f32
    log.info(
        "IVF view scores in %s (probe, ms for 1 / %d questions: float32 %s, int8 %s)",
        chosen.name,
        _PROBE_WIDTH,
        " / ".join(f"{t * 1000:.2f}" for t in times["float32"].values()),
        " / ".join(f"{t * 1000:.2f}" for t in times["int8"].values()),
    )
    return chosen
