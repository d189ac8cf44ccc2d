"""How a resident partition is scored against the questions that probe it.

Two kernels; `RAGDOLL_IVF_SCORER` picks one: `float32` (the default), `bfloat16`,
or `auto` (a short timing at first use, bfloat16 when ≥ 1.5x faster):
- float32 through numpy (BLAS): anywhere;
- bfloat16 through torch: half the resident bytes and, on CPUs with bf16
  matrix units (AMX, AVX512-BF16), faster products for many questions at once;
  elsewhere torch emulates it slowly. On the 2-core development machine (which
  has AMX) it was slower than float32 for single questions (83 against 35 ms at
  200k rows) and no faster for a batch of 64, hence not the default.
Scores pick a candidate list; with bfloat16 the view re-scores it from the
float16 copies, and the search re-ranks its head by the exact float32 cosine
(`search._exact_order`); bfloat16 gave the same recall@10 at 200k rows.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)

_PROBE_ROWS, _PROBE_QUERIES = 4096, 16
_BF16_MIN_GAIN = 1.5  # bfloat16 only when at least this much faster


class Scorer(Protocol):
    name: str
    bytes_per_value: int

    def resident(self, rows: np.ndarray) -> Any: ...

    def queries(self, q: np.ndarray) -> Any: ...

    def score(self, resident: Any, queries: Any, picked: list[int]) -> np.ndarray:
        """(len(picked), rows) float32 scores."""
        ...


class Float32Scorer:
    name = "float32"
    bytes_per_value = 4

    def resident(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(rows, dtype=np.float32)

    def queries(self, q: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(q, dtype=np.float32)

    def score(self, resident: np.ndarray, queries: np.ndarray, picked: list[int]) -> np.ndarray:
        """(len(picked), rows) cosine scores: one matrix product, each question's
        scores contiguous (its top candidates are then picked along a row). The
        product runs as rows × questions, then is transposed: OpenBLAS took 0.67
        against 1.0 ms for 4096 × 384 rows and 5 questions that way round."""
        return np.ascontiguousarray((resident @ queries[picked].T).T)


class BFloat16Scorer:
    name = "bfloat16"
    bytes_per_value = 2

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def resident(self, rows: np.ndarray) -> Any:
        t = self._torch.from_numpy(np.ascontiguousarray(rows))
        return t.to(self._torch.bfloat16)

    def queries(self, q: np.ndarray) -> Any:
        return self._torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32)).to(
            self._torch.bfloat16
        )

    def score(self, resident: Any, queries: Any, picked: list[int]) -> np.ndarray:
        sims = queries[picked] @ resident.T
        return sims.float().numpy()


def pick_scorer(dimension: int) -> Scorer:
    wanted = os.environ.get("RAGDOLL_IVF_SCORER", "float32").strip().lower()
    if wanted not in {"bfloat16", "auto"}:
        return Float32Scorer()
    try:
        bf16 = BFloat16Scorer()
    except ImportError:
        return Float32Scorer()
    if wanted == "bfloat16":
        return bf16
    f32 = Float32Scorer()
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(_PROBE_ROWS, dimension)).astype(np.float16)
    q = rng.normal(size=(_PROBE_QUERIES, dimension)).astype(np.float32)
    picked = list(range(_PROBE_QUERIES))
    times = {}
    for scorer in (f32, bf16):
        resident, queries = scorer.resident(rows), scorer.queries(q)
        scorer.score(resident, queries, picked)  # warm up
        t0 = time.perf_counter()
        for _ in range(3):
            scorer.score(resident, queries, picked)
        times[scorer.name] = time.perf_counter() - t0
    chosen: Scorer = bf16 if times["float32"] >= _BF16_MIN_GAIN * times["bfloat16"] else f32
    log.info(
        "IVF view scores in %s (probe: float32 %.1f ms, bfloat16 %.1f ms)",
        chosen.name,
        times["float32"] * 1000 / 3,
        times["bfloat16"] * 1000 / 3,
    )
    return chosen
