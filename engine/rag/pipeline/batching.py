"""Backlog-aware batch size (RAGDoll §4.4, eq. 4–8).

A batch of B requests takes T(B) = a·B^c seconds (eq. 4). With n requests waiting
(all already there, so their arrival times drop out of the comparison), running them
as one batch gives a mean latency of T(n) (eq. 5); running them as k equal batches one
after the other gives (k+1)/2 · T(n/k) (eq. 6): batch j finishes at j·T(n/k) and
holds n/k of the requests. One batch is no worse exactly when 2·k^c ≤ k+1 (eq. 7),
so for c ≤ log2(3/2) ≈ 0.585 splitting in two never pays (eq. 8).

The candidates are batch sizes 1, 2, 4, … up to the backlog n (and n itself when it
is not a power of two), capped by the Placement's largest batch. A split that does
not divide n evenly is scored by its real schedule (full batches first, then the
remainder), which is eq. 6 exactly when it does divide.

The fit is refitted online from observed (batch, seconds) pairs over a bounded
window; until the window holds enough points at two or more batch sizes the
profiled fit is used, and without one the largest allowed batch is taken (the
paper's observation for retrieval, and the throughput choice when nothing is known).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from engine.runtime.planner.profiling import PowerLawFit, Sample, fit_power_law

DEFAULT_WINDOW = 64
DEFAULT_MIN_SAMPLES = 4
# Fitted latencies are floats: a tie (eq. 7 with equality) must go to the larger
# batch, which is the paper's reading and the better throughput.
_TOLERANCE = 1e-12
# A noisy window can fit a negative or absurd exponent; the scheduler only ever
# compares batch sizes, so clamp to the range where T(B) is a sane cost curve.
_C_RANGE = (0.0, 2.0)


@dataclass(frozen=True, kw_only=True)
class BatchChoice:
    """The size of the next batch and how it compared with the other candidates."""

    size: int
    backlog: int
    cap: int
    mean_latency_s: float | None  # None when no fit was known
    candidates: tuple[tuple[int, float], ...]  # (batch size, predicted mean latency)


@dataclass(frozen=True, kw_only=True)
class FixedBatch:
    """Batches of a fixed size instead of eq. 4-8: min(waiting, size), whatever the fit
    and the cap say (the paper's "without dynamic batch size", a benchmark's ablation)."""

    size: int

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("a batch holds at least one request")


def split_sizes(*, n: int, size: int) -> tuple[int, ...]:
    """The schedule of n requests in batches of at most `size`: full batches first."""
    if n < 1 or size < 1:
        raise ValueError("a backlog and a batch size must be at least 1")
    full, rest = divmod(n, size)
    return (size,) * full + ((rest,) if rest else ())


def mean_latency(*, fit: PowerLawFit, sizes: Sequence[int]) -> float:
    """Mean time to completion of requests run as batches `sizes`, one after the other,
    all waiting from time 0. For k equal batches of n/k this is (k+1)/2 · T(n/k)."""
    n = sum(sizes)
    if n < 1:
        raise ValueError("a schedule needs at least one request")
    clock = 0.0
    total = 0.0
    for s in sizes:
        clock += fit.predict(batch=s)
        total += s * clock
    return total / n


def eq6_latency(*, fit: PowerLawFit, n: float, k: int) -> float:
    """Eq. 6 as printed: (k+1)/2 · T(n/k); k = 1 is eq. 5."""
    return (k + 1) / 2 * fit.predict(batch=n / k)


def one_batch_wins(*, c: float, k: int) -> bool:
    """Eq. 7: one batch of n is no slower on average than k equal batches."""
    return 2 * k**c <= k + 1


def candidate_sizes(*, n: int, cap: int) -> tuple[int, ...]:
    """1, 2, 4, … below min(n, cap), then min(n, cap) itself."""
    top = max(1, min(n, cap))
    sizes = []
    b = 1
    while b < top:
        sizes.append(b)
        b *= 2
    sizes.append(top)
    return tuple(sizes)


def choose_batch(*, n: int, cap: int, fit: PowerLawFit | None) -> BatchChoice:
    """The batch size that minimises the mean latency of the n waiting requests."""
    if n < 1:
        raise ValueError("nothing is waiting")
    if cap < 1:
        raise ValueError("the largest batch must be at least 1")
    sizes = candidate_sizes(n=n, cap=cap)
    if fit is None:
        return BatchChoice(size=sizes[-1], backlog=n, cap=cap, mean_latency_s=None, candidates=())
    scored = tuple((s, mean_latency(fit=fit, sizes=split_sizes(n=n, size=s))) for s in sizes)
    best = min(latency for _, latency in scored)
    size = max(s for s, latency in scored if latency <= best * (1 + _TOLERANCE))
    return BatchChoice(
        size=size,
        backlog=n,
        cap=cap,
        mean_latency_s=dict(scored)[size],
        candidates=scored,
    )


@dataclass(frozen=True, kw_only=True)
class BatchModel:
    """One pipeline's cost curve: the profiled fit, the recent observations, and the
    fit in force (the online one once there are enough points)."""

    profiled: PowerLawFit | None
    samples: tuple[Sample, ...] = ()
    window: int = DEFAULT_WINDOW
    min_samples: int = DEFAULT_MIN_SAMPLES
    online: PowerLawFit | None = None

    @property
    def fit(self) -> PowerLawFit | None:
        """The online fit once there is one, else the profiled one; either with c
        clamped (a noisy profile can fit c < 0, which would always take the cap)."""
        return clamped(self.online if self.online is not None else self.profiled)

    def choose(self, *, n: int, cap: int) -> BatchChoice:
        return choose_batch(n=n, cap=cap, fit=self.fit)


def observe(model: BatchModel, *, batch: int, seconds: float) -> BatchModel:
    """The model after one more timed batch: the window slides, and the online fit is
    redone when it has enough points at two or more batch sizes."""
    if batch < 1 or not math.isfinite(seconds) or seconds <= 0:
        return model  # a batch that was cancelled or timed at zero tells nothing
    samples = (*model.samples, (int(batch), float(seconds)))[-model.window :]
    online = refit(samples=samples, min_samples=model.min_samples)
    return dataclasses.replace(model, samples=samples, online=online)


def refit(*, samples: Sequence[Sample], min_samples: int) -> PowerLawFit | None:
    """fit_power_law over the samples with c clamped; None when too few to trust."""
    if len(samples) < min_samples or len({b for b, _ in samples}) < 2:
        return None
    return clamped(fit_power_law(samples=samples))


def clamped(fit: PowerLawFit | None) -> PowerLawFit | None:
    """`fit` with its exponent within the range of a sane cost curve."""
    if fit is None:
        return None
    c = min(max(fit.c, _C_RANGE[0]), _C_RANGE[1])
    return dataclasses.replace(fit, c=c) if c != fit.c else fit
