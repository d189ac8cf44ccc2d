"""How a resident partition is scored against the questions that probe it.

Two layouts of a resident partition, both 4 bytes per value (so a budget means
the same whichever runs); `RAGDOLL_IVF_SCORER` picks one: `auto` (the default:
a short timing at first use), `float32` or `bfloat16`.
- float32: the rows as float32, scored through numpy (BLAS). Exact (the float32
  cosine of the float16 copies), anywhere.
- bfloat16: a bfloat16 copy of the rows for the products (torch: oneDNN, AMX
  or AVX512-BF16 where the CPU has them) and the float16 rows as on disk. The
  bfloat16 scores only pick candidates: those that can still enter a
  question's best `limit` are re-scored as float32 from the float16 rows, so
  what leaves the view is the same cosine as with float32 and the float16 error
  bound downstream (`search._VIEW_ERROR`) holds.
The product's orientation decides its speed. One 4096 × 384 partition on the
2-core development machine (AMX): float32 0.10 ms for one question, 0.36 ms
for 5, 0.35 for 16; bfloat16 with the rows on the left, `rows @ q` 0.05 ms for
one question and `rows @ Q.T` 0.05 ms for 2-16 (the former `Q @ rows.T`:
0.105 ms for any width). Where bfloat16 has no matrix units torch emulates it
slowly, hence the probe.
"""

from __future__ import annotations

import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)

_PROBE_ROWS, _PROBE_WIDTH = 4096, 5  # ~5 questions share a partition in a batch of 64
_BF16_MIN_GAIN = 1.5  # bfloat16 only when at least this much faster for a batch...
_BF16_MAX_LOSS = 1.25  # ...and at most this much slower for a single question
_MAX_WORKERS = 4  # threads sharing a bfloat16 scan: the products are memory-bound


class Scorer(Protocol):
    name: str
    bytes_per_value: int
    exact: bool  # scores are the float32 cosine of the float16 rows
    own_thread: bool  # scans run in a thread of their own, set up by `start_thread`

    def start_thread(self) -> None: ...

    def resident(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """What is held of a partition's float16 rows."""
        ...

    def queries(self, q: np.ndarray) -> Any: ...

    def coarse(self, q: np.ndarray, centroids: np.ndarray) -> np.ndarray: ...

    def score(
        self, resident: tuple[np.ndarray, ...], queries: Any, picked: list[int]
    ) -> np.ndarray:
        """(len(picked), rows) float32 scores, each question's contiguous."""
        ...

    def error(self, dimension: int) -> float:
        """The most a score can differ from the float32 cosine of the float16 rows."""
        ...

    def rescore(
        self, resident: tuple[np.ndarray, ...], rows: np.ndarray, q: np.ndarray
    ) -> np.ndarray:
        """Exact scores of partition rows `rows` against questions `q` (one each)."""
        ...


class Float32Scorer:
    name = "float32"
    bytes_per_value = 4
    exact = True
    own_thread = False

    def start_thread(self) -> None:
        pass

    def resident(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        return (np.asarray(rows, dtype=np.float32),)

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

    def error(self, dimension: int) -> float:
        return 0.0

    def rescore(
        self, resident: tuple[np.ndarray, ...], rows: np.ndarray, q: np.ndarray
    ) -> np.ndarray:
        return np.einsum("md,md->m", resident[0][rows], q)


class BFloat16Scorer:
    name = "bfloat16"
    bytes_per_value = 4  # 2 for the bfloat16 copy, 2 for the float16 rows
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

    def resident(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        half = np.ascontiguousarray(rows, dtype=np.float16)
        return (bfloat16_bits(half), half)

    def queries(self, q: np.ndarray) -> Any:
        torch = self._torch
        return torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32)).to(torch.bfloat16)

    def score(
        self, resident: tuple[np.ndarray, ...], queries: Any, picked: list[int]
    ) -> np.ndarray:
        torch = self._torch
        rows = torch.from_numpy(resident[0]).view(torch.bfloat16)
        if len(picked) == 1:
            return (rows @ queries[picked[0]]).float().numpy()[None, :]
        asked = queries.index_select(0, torch.as_tensor(picked))
        sims = rows @ asked.T  # (rows, questions): the fast orientation
        return np.ascontiguousarray(sims.float().numpy().T)

    def coarse(self, q: np.ndarray, centroids: np.ndarray) -> np.ndarray:
        # float32 through torch too: an OpenBLAS product here would leave its
        # threads spinning against the bfloat16 products that follow (a 1 ms
        # product took 4-13 ms right after one on the 2-core machine).
        torch = self._torch
        return (torch.from_numpy(q) @ torch.from_numpy(centroids).T).numpy()

    def error(self, dimension: int) -> float:
        # Rows and questions rounded to 8 significant bits (2**-8 each, relative),
        # the product rounded once more; float16 subnormals (below 2**-14) become 0.
        return 3 * 2.0**-8 + math.sqrt(dimension) * 2.0**-14

    def rescore(
        self, resident: tuple[np.ndarray, ...], rows: np.ndarray, q: np.ndarray
    ) -> np.ndarray:
        return np.einsum("md,md->m", resident[1][rows].astype(np.float32), q)


def bfloat16_bits(half: np.ndarray) -> np.ndarray:
    """The bfloat16 (as uint16 bits) nearest each float16, from the bits: as
    fast as a float32 conversion and half the bytes. Subnormals become zero."""
    h = half.view(np.uint16)
    b = _aligned(h.shape)
    np.bitwise_and(h, 0x7FFF, out=b)
    tiny = b < 0x0400
    b += 4  # round half up into the 7 kept mantissa bits (a carry bumps the exponent)
    b >>= 3
    b += 112 << 7  # exponent bias 15 -> 127
    b[tiny] = 0
    b |= h & 0x8000
    return b


def scan_workers() -> int:
    """Threads that share a scan's partitions, for a scorer with `own_thread`."""
    return max(1, min(_MAX_WORKERS, os.cpu_count() or 1))


def _aligned(shape: tuple[int, ...]) -> np.ndarray:
    """A uint16 array at a 64-byte boundary: oneDNN's bfloat16 products ran
    5-50x slower on numpy's 16-byte aligned memory (0.64 against 0.05 ms)."""
    size = int(np.prod(shape)) * 2
    raw = np.empty(size + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + size].view(np.uint16).reshape(shape)


def choose(times: dict[str, dict[int, float]], *, workers: int) -> str:
    """The layout from a probe's times ({scorer: {questions: seconds}}, each
    scorer as it scans: float32 on BLAS's threads, bfloat16 on one thread of
    the `workers` that share a scan's partitions)."""
    f32, bf16 = times["float32"], times["bfloat16"]
    wide = max(f32)
    batch_gain = f32[wide] >= _BF16_MIN_GAIN * bf16[wide]
    single_ok = bf16[1] / workers <= _BF16_MAX_LOSS * f32[1]
    return "bfloat16" if batch_gain and single_ok else "float32"


def probe(
    scorers: list[Scorer], *, dimension: int, rounds: int = 3, repeats: int = 3
) -> dict[str, dict[int, float]]:
    """Best time for one question and for a batch's width on one
    partition-sized block, each scorer in the thread it scans in (a few ms; at
    first use, never at import). The scorers take turns, `rounds` times:
    OpenBLAS's and OpenMP's threads spin for a while after a product and slow
    the other library's next ones."""
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(_PROBE_ROWS, dimension)).astype(np.float16)
    q = rng.normal(size=(_PROBE_WIDTH, dimension)).astype(np.float32)
    times: dict[str, dict[int, float]] = {
        s.name: {1: math.inf, _PROBE_WIDTH: math.inf} for s in scorers
    }
    threads = {
        s.name: ThreadPoolExecutor(max_workers=1, initializer=s.start_thread)
        for s in scorers
        if s.own_thread
    }
    try:
        held = [(s, s.resident(rows), s.queries(q)) for s in scorers]
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


def pick_scorer(dimension: int) -> Scorer:
    wanted = os.environ.get("RAGDOLL_IVF_SCORER", "auto").strip().lower()
    if wanted not in {"bfloat16", "auto"}:
        return Float32Scorer()
    try:
        bf16 = BFloat16Scorer()
    except ImportError:
        return Float32Scorer()
    if wanted == "bfloat16":
        return bf16
    f32 = Float32Scorer()
    try:
        times = probe([bf16, f32], dimension=dimension)
    except RuntimeError as e:  # a torch build without bfloat16 products
        log.info("IVF view scores in float32 (bfloat16 failed: %s)", e)
        return f32
    chosen: Scorer = bf16 if choose(times, workers=scan_workers()) == "bfloat16" else f32
    log.info(
        "IVF view scores in %s (probe, ms for 1 / %d questions: float32 %s, bfloat16 %s)",
        chosen.name,
        _PROBE_WIDTH,
        " / ".join(f"{t * 1000:.2f}" for t in times["float32"].values()),
        " / ".join(f"{t * 1000:.2f}" for t in times["bfloat16"].values()),
    )
    return chosen
