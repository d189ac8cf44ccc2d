"""Active profiling (RAGDoll §4.4): measure, fit, and balance the two pipelines.

Generation time for a batch of B sequences follows T(B) = a·B^c (c < 1 on a GPU:
a batch shares each weight read; c ≈ 1 once compute-bound). It is fitted by least
squares on log T = log a + c·log B from a handful of timed batches.

Retrieval time is fitted as a straight line in the number of resident index
partitions, t(P) = intercept + slope·P. Why linear rather than 1/x: every
partition that is not resident is read from disk once per retrieval batch, a
fixed cost per partition, so each partition moved into memory removes the same
time; the scan over resident partitions is the intercept. (1/x would describe a
search that spreads over more workers, which ours does not.)

The balance: the two pipelines run concurrently, so a question waits for the
slower one. We pick the smallest batch whose throughput keeps up with the
workload rate (bigger batches only add latency once it does) and then the
fewest resident partitions that make retrieval no slower than generation —
every partition kept resident is memory taken from KV cache and weights.

The result is kept as JSON in the data folder and thrown away when the model,
the hardware fingerprint, or the collection size (by a factor of 2) change.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.json_file import write_json

if TYPE_CHECKING:
    from engine.paths import Paths

log = logging.getLogger(__name__)

PROFILE_FILE_NAME = "active_profile.json"
PROFILE_VERSION = 1
DEFAULT_BATCHES = (1, 2, 4, 8)
DEFAULT_PARTITIONS = (1, 2, 4, 8)
DEFAULT_RATE_QPS = 1.0
DEFAULT_BATCH = 4  # the planner's Workload default, used when nothing was fitted
COLLECTION_CHANGE_FACTOR = 2.0
EXTRACTIVE_NOTE = "extractive mode: nothing to fit"

# Fitted curves are floats: "keeps up" and "no slower" must not flip on rounding.
_TOLERANCE = 1e-9

Progress = Callable[[str, float], None]
Sample = tuple[int, float]


@dataclass(frozen=True, kw_only=True)
class PowerLawFit:
    """T(B) = a·B^c, with the coefficient of determination of the log-log fit."""

    a: float
    c: float
    r2: float
    samples: tuple[Sample, ...]

    def predict(self, *, batch: float) -> float:
        return self.a * batch**self.c

    def as_dict(self) -> dict[str, Any]:
        return {"a": self.a, "c": self.c, "r2": self.r2, "samples": [list(s) for s in self.samples]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PowerLawFit:
        return cls(
            a=float(data["a"]),
            c=float(data["c"]),
            r2=float(data["r2"]),
            samples=tuple((int(b), float(t)) for b, t in data["samples"]),
        )


@dataclass(frozen=True, kw_only=True)
class RetrievalFit:
    """t(P) = intercept + slope·P seconds per retrieval batch with P resident partitions."""

    intercept: float
    slope: float
    r2: float
    samples: tuple[Sample, ...]

    def predict(self, *, partitions: float) -> float:
        # A line fitted to noisy points can dip below zero past the last sample.
        return max(self.intercept + self.slope * partitions, 0.0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "intercept": self.intercept,
            "slope": self.slope,
            "r2": self.r2,
            "samples": [list(s) for s in self.samples],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetrievalFit:
        return cls(
            intercept=float(data["intercept"]),
            slope=float(data["slope"]),
            r2=float(data["r2"]),
            samples=tuple((int(p), float(t)) for p, t in data["samples"]),
        )


@dataclass(frozen=True, kw_only=True)
class ProfileResult:
    generation: PowerLawFit | None  # None in extractive mode or when too few points
    retrieval: RetrievalFit | None
    batch: int  # the chosen generation batch size
    resident_partitions: int  # the chosen number of resident index partitions
    t_generation_s: float | None  # predicted at the chosen batch
    t_retrieval_s: float | None  # predicted at the chosen partitions
    rate_qps: float  # the workload rate the choice was balanced for
    model_id: str | None
    hardware_fingerprint: str
    collection_chunks: int
    measured_at: float  # Unix time
    elapsed_s: float
    budget_spent: bool  # True when the time budget cut the sampling short
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "generation": self.generation.as_dict() if self.generation else None,
            "retrieval": self.retrieval.as_dict() if self.retrieval else None,
            "batch": self.batch,
            "resident_partitions": self.resident_partitions,
            "t_generation_s": self.t_generation_s,
            "t_retrieval_s": self.t_retrieval_s,
            "rate_qps": self.rate_qps,
            "model_id": self.model_id,
            "hardware_fingerprint": self.hardware_fingerprint,
            "collection_chunks": self.collection_chunks,
            "measured_at": self.measured_at,
            "elapsed_s": self.elapsed_s,
            "budget_spent": self.budget_spent,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileResult:
        gen, ret = data.get("generation"), data.get("retrieval")
        return cls(
            generation=PowerLawFit.from_dict(gen) if gen else None,
            retrieval=RetrievalFit.from_dict(ret) if ret else None,
            batch=int(data["batch"]),
            resident_partitions=int(data["resident_partitions"]),
            t_generation_s=data.get("t_generation_s"),
            t_retrieval_s=data.get("t_retrieval_s"),
            rate_qps=float(data["rate_qps"]),
            model_id=data.get("model_id"),
            hardware_fingerprint=str(data["hardware_fingerprint"]),
            collection_chunks=int(data["collection_chunks"]),
            measured_at=float(data["measured_at"]),
            elapsed_s=float(data["elapsed_s"]),
            budget_spent=bool(data["budget_spent"]),
            notes=tuple(data.get("notes", ())),
        )


# -- fitting ---------------------------------------------------------------------


def fit_power_law(*, samples: Sequence[Sample]) -> PowerLawFit:
    """Least squares on log T = log a + c·log B. Needs two distinct batch sizes."""
    points = [(int(b), float(t)) for b, t in samples]
    if any(b < 1 or t <= 0 for b, t in points):
        raise ValueError("batch sizes must be ≥ 1 and times positive")
    if len({b for b, _ in points}) < 2:
        raise ValueError("a power law needs samples at two or more batch sizes")
    x = np.log([b for b, _ in points])
    y = np.log([t for _, t in points])
    c, log_a = np.polyfit(x, y, 1)
    return PowerLawFit(
        a=float(math.exp(log_a)), c=float(c), r2=_r2(y, log_a + c * x), samples=tuple(points)
    )


def fit_retrieval(*, samples: Sequence[Sample]) -> RetrievalFit:
    """Least squares line through (resident partitions, seconds)."""
    points = [(int(p), float(t)) for p, t in samples]
    if any(t < 0 for _, t in points):
        raise ValueError("times must not be negative")
    if len({p for p, _ in points}) < 2:
        raise ValueError("a retrieval fit needs samples at two or more partition counts")
    x = np.array([p for p, _ in points], dtype=float)
    y = np.array([t for _, t in points], dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    return RetrievalFit(
        intercept=float(intercept),
        slope=float(slope),
        r2=_r2(y, intercept + slope * x),
        samples=tuple(points),
    )


def _r2(y: np.ndarray, predicted: np.ndarray) -> float:
    total = float(np.sum((y - y.mean()) ** 2))
    if total == 0.0:
        return 1.0
    return 1.0 - float(np.sum((y - predicted) ** 2)) / total


# -- balancing ---------------------------------------------------------------------


def choose(
    *,
    generation: PowerLawFit | None,
    retrieval: RetrievalFit | None,
    rate_qps: float,
    max_batch: int,
    max_partitions: int,
) -> tuple[int, int]:
    """(batch, resident partitions) that minimise max(t_retrieval, t_generation)
    while the pipelines keep up with `rate_qps` questions per second."""
    if generation is None:
        batch = min(DEFAULT_BATCH, max_batch)
    else:
        batch = _choose_batch(generation=generation, rate_qps=rate_qps, max_batch=max_batch)
    if retrieval is None:
        return batch, max_partitions
    target = generation.predict(batch=batch) if generation else 0.0
    candidates = range(1, max(max_partitions, 1) + 1)
    good = [p for p in candidates if retrieval.predict(partitions=p) <= target * (1 + _TOLERANCE)]
    if good:
        return batch, min(good)
    # Retrieval is the bottleneck whatever we do: the fastest setting.
    return batch, min(candidates, key=lambda p: (retrieval.predict(partitions=p), p))


def _choose_batch(*, generation: PowerLawFit, rate_qps: float, max_batch: int) -> int:
    batches = range(1, max(max_batch, 1) + 1)
    for b in batches:
        if b / generation.predict(batch=b) >= rate_qps * (1 - _TOLERANCE):
            return b
    # Nothing keeps up: the highest throughput at least bounds the queue's growth.
    return max(batches, key=lambda b: (b / generation.predict(batch=b), -b))


# -- orchestration ---------------------------------------------------------------------


def run_active_profile(
    *,
    sample_generation: Callable[[int], float] | None,
    sample_retrieval: Callable[[int], float] | None,
    batches: Sequence[int] = DEFAULT_BATCHES,
    partitions: Sequence[int] = DEFAULT_PARTITIONS,
    progress: Progress | None = None,
    budget_s: float = 120.0,
    rate_qps: float = DEFAULT_RATE_QPS,
    max_batch: int | None = None,
    max_partitions: int | None = None,
    model_id: str | None = None,
    hardware_fingerprint: str = "",
    collection_chunks: int = 0,
    clock: Callable[[], float] = time.monotonic,
) -> ProfileResult:
    """Time the samplers, fit, and choose. The measurements alternate between the
    two pipelines so that a budget cut leaves both with points; the first two of
    each are always taken (a fit needs two), the rest only while budget remains."""
    start = clock()
    notes: list[str] = []
    queue: list[tuple[str, int]] = []
    gen_plan = [("generation", b) for b in batches] if sample_generation else []
    ret_plan = [("retrieval", p) for p in partitions] if sample_retrieval else []
    if sample_generation is None:
        notes.append(EXTRACTIVE_NOTE)
    if sample_retrieval is None:
        notes.append("no index: retrieval not measured")
    for i in range(max(len(gen_plan), len(ret_plan))):
        queue += [step[i] for step in (gen_plan, ret_plan) if i < len(step)]

    gen_samples: list[Sample] = []
    ret_samples: list[Sample] = []
    budget_spent = False
    for done, (kind, x) in enumerate(queue):
        required = (len(gen_samples) if kind == "generation" else len(ret_samples)) < 2
        if clock() - start >= budget_s and not required:
            budget_spent = True
            continue
        what = f"batch of {x}" if kind == "generation" else f"{x} resident partitions"
        _report(progress, f"timing {kind}: {what}", done / max(len(queue), 1))
        if kind == "generation":
            assert sample_generation is not None
            gen_samples.append((x, float(sample_generation(x))))
        else:
            assert sample_retrieval is not None
            ret_samples.append((x, float(sample_retrieval(x))))
    if budget_spent:
        notes.append(f"time budget of {budget_s:.0f} s spent: fitted the points measured")

    generation = _try(fit_power_law, gen_samples, "generation", notes)
    retrieval = _try(fit_retrieval, ret_samples, "retrieval", notes)
    top_batch = max_batch or max(batches, default=DEFAULT_BATCH)
    top_parts = max_partitions or max(partitions, default=1)
    batch, parts = choose(
        generation=generation,
        retrieval=retrieval,
        rate_qps=rate_qps,
        max_batch=top_batch,
        max_partitions=top_parts,
    )
    _report(progress, "done", 1.0)
    return ProfileResult(
        generation=generation,
        retrieval=retrieval,
        batch=batch,
        resident_partitions=parts,
        t_generation_s=generation.predict(batch=batch) if generation else None,
        t_retrieval_s=retrieval.predict(partitions=parts) if retrieval else None,
        rate_qps=rate_qps,
        model_id=model_id,
        hardware_fingerprint=hardware_fingerprint,
        collection_chunks=collection_chunks,
        measured_at=time.time(),
        elapsed_s=clock() - start,
        budget_spent=budget_spent,
        notes=tuple(notes),
    )


def _try(fit: Callable[..., Any], samples: list[Sample], what: str, notes: list[str]) -> Any:
    if not samples:
        return None
    try:
        return fit(samples=samples)
    except ValueError as e:
        notes.append(f"{what} not fitted: {e}")
        return None


def _report(progress: Progress | None, message: str, fraction: float) -> None:
    if progress is not None:
        progress(message, fraction)


# -- storage ------------------------------------------------------------------------


def profile_file(*, data_dir: Path) -> Path:
    return data_dir / PROFILE_FILE_NAME


def save_profile(*, data_dir: Path, result: ProfileResult) -> Path:
    file = profile_file(data_dir=data_dir)
    write_json(file=file, data={"version": PROFILE_VERSION, "profile": result.as_dict()})
    return file


def load_saved_profile(*, data_dir: Path) -> ProfileResult | None:
    """The stored result as written, stale or not; None when missing or unreadable."""
    try:
        data = json.loads(profile_file(data_dir=data_dir).read_text(encoding="utf-8"))
        if data.get("version") != PROFILE_VERSION:
            return None
        return ProfileResult.from_dict(data["profile"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # a damaged file only costs a re-profile


def stale_reason(
    *,
    result: ProfileResult,
    model_id: str | None,
    hardware_fingerprint: str,
    collection_chunks: int,
) -> str | None:
    """Why `result` no longer describes this setup, or None while it still does."""
    if result.model_id != model_id:
        return f"the model changed ({result.model_id or 'none'} → {model_id or 'none'})"
    if result.hardware_fingerprint != hardware_fingerprint:
        return "the hardware changed"
    old, new = max(result.collection_chunks, 1), max(collection_chunks, 1)
    if max(old, new) / min(old, new) >= COLLECTION_CHANGE_FACTOR:
        return (
            f"the collection changed size ({result.collection_chunks} → {collection_chunks} chunks)"
        )
    return None


def load_current_profile(
    *, data_dir: Path, model_id: str | None, hardware_fingerprint: str, collection_chunks: int
) -> ProfileResult | None:
    """The stored result when it still describes this setup, else None."""
    result = load_saved_profile(data_dir=data_dir)
    if result is None:
        return None
    reason = stale_reason(
        result=result,
        model_id=model_id,
        hardware_fingerprint=hardware_fingerprint,
        collection_chunks=collection_chunks,
    )
    return None if reason else result


def stored_generation_fit(*, paths: Paths, model_id: str | None, chunks: int) -> PowerLawFit | None:
    """The generation T(B) of the stored profile when it still describes this setup (the
    model, this machine's hardware, the collection's size); None otherwise or unreadable:
    no fit is a fine start, the generation worker fits observed batches."""
    from engine.runtime.hardware.profile import load_profile

    try:
        result = load_current_profile(
            data_dir=paths.data,
            model_id=model_id,
            hardware_fingerprint=load_profile(paths=paths, measure=False).fingerprint,
            collection_chunks=chunks,
        )
    except Exception:
        log.exception("reading the active profile")
        return None
    return result.generation if result is not None else None
