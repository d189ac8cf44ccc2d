"""Backlog-aware batch size: the choice matches RAGDoll eq. 4–8 on known a and c."""

from __future__ import annotations

import math

import pytest

from engine.rag.pipeline.batching import (
    BatchModel,
    candidate_sizes,
    choose_batch,
    eq6_latency,
    mean_latency,
    observe,
    one_batch_wins,
    split_sizes,
)
from engine.runtime.planner.profiling import PowerLawFit


def law(*, a: float, c: float) -> PowerLawFit:
    return PowerLawFit(a=a, c=c, r2=1.0, samples=())


def test_schedule_latency_is_eq6_for_equal_batches() -> None:
    fit = law(a=0.3, c=0.7)
    for n, k in [(8, 1), (8, 2), (8, 4), (8, 8), (64, 4), (64, 16)]:
        got = mean_latency(fit=fit, sizes=split_sizes(n=n, size=n // k))
        assert got == pytest.approx(eq6_latency(fit=fit, n=n, k=k), rel=1e-12)
    # k = 1 is eq. 5: T(n)
    assert eq6_latency(fit=fit, n=16, k=1) == pytest.approx(0.3 * 16**0.7)


def test_eq8_threshold() -> None:
    edge = math.log2(1.5)
    assert one_batch_wins(c=edge - 1e-9, k=2)
    assert not one_batch_wins(c=edge + 1e-9, k=2)
    assert one_batch_wins(c=1.0, k=1)


@pytest.mark.parametrize("c", [0.0, 0.3, 0.5, 0.58])
def test_sublinear_below_threshold_takes_the_whole_backlog(c: float) -> None:
    # c ≤ log2(3/2): 2·k^c ≤ k+1 for every k ≥ 1, so one batch of n is best.
    for n in (2, 8, 64):
        assert all(one_batch_wins(c=c, k=k) for k in (2, 4, 8, 16, 32, 64) if k <= n)
        assert choose_batch(n=n, cap=1024, fit=law(a=2.0, c=c)).size == n


def test_choice_is_the_argmin_of_eq6_over_powers_of_two() -> None:
    for a in (0.01, 1.0, 7.0):
        for c in (0.59, 0.7, 0.8, 0.9, 1.0, 1.3):
            n = 64
            fit = law(a=a, c=c)
            expected_k = min(
                (1, 2, 4, 8, 16, 32, 64),
                key=lambda k: (eq6_latency(fit=fit, n=n, k=k), k),  # ties: fewer batches
            )
            choice = choose_batch(n=n, cap=1024, fit=fit)
            assert choice.size == n // expected_k, (a, c)
            assert choice.mean_latency_s == pytest.approx(eq6_latency(fit=fit, n=n, k=expected_k))


def test_known_values() -> None:
    # c = 0.7, n = 8: (k+1)·k^-0.7 is 2, 1.846, 1.894, 2.099 for k = 1, 2, 4, 8 → k = 2
    assert choose_batch(n=8, cap=64, fit=law(a=1.0, c=0.7)).size == 4
    # c = 0.9: it keeps falling to k = 8 → batches of one
    assert choose_batch(n=8, cap=64, fit=law(a=1.0, c=0.9)).size == 1
    # c = 0.5: one batch
    assert choose_batch(n=8, cap=64, fit=law(a=1.0, c=0.5)).size == 8


def test_cap_from_the_placement_bounds_the_batch() -> None:
    choice = choose_batch(n=100, cap=6, fit=law(a=1.0, c=0.2))
    assert choice.size == 6
    assert [s for s, _ in choice.candidates] == [1, 2, 4, 6]
    assert candidate_sizes(n=12, cap=64) == (1, 2, 4, 8, 12)


def test_no_fit_takes_the_largest_allowed_batch() -> None:
    choice = choose_batch(n=10, cap=4, fit=None)
    assert (choice.size, choice.mean_latency_s) == (4, None)


def test_bad_backlog_or_cap_is_refused() -> None:
    with pytest.raises(ValueError):
        choose_batch(n=0, cap=4, fit=None)
    with pytest.raises(ValueError):
        choose_batch(n=3, cap=0, fit=None)


def test_online_refit_replaces_the_profile_once_enough_points() -> None:
    profiled = law(a=1.0, c=0.2)  # says: take the whole backlog
    model = BatchModel(profiled=profiled, min_samples=4, window=8)
    true = law(a=0.5, c=1.0)  # what the machine really does: linear → split
    model = observe(model, batch=1, seconds=true.predict(batch=1))
    model = observe(model, batch=2, seconds=true.predict(batch=2))
    assert model.fit is profiled  # too few points yet
    assert model.choose(n=8, cap=64).size == 8
    model = observe(model, batch=4, seconds=true.predict(batch=4))
    model = observe(model, batch=8, seconds=true.predict(batch=8))
    assert model.fit is not None and model.fit is not profiled
    assert model.fit.c == pytest.approx(1.0)
    assert model.fit.a == pytest.approx(0.5)
    assert model.choose(n=8, cap=64).size == 1


def test_window_is_bounded_and_bad_samples_ignored() -> None:
    model = BatchModel(profiled=None, window=3, min_samples=2)
    for b in (1, 2, 4, 8, 16):
        model = observe(model, batch=b, seconds=float(b))
    assert [b for b, _ in model.samples] == [4, 8, 16]
    before = model
    assert observe(model, batch=4, seconds=0.0) is before
    assert observe(model, batch=0, seconds=1.0) is before
    assert observe(model, batch=2, seconds=float("nan")) is before


def test_one_batch_size_only_keeps_the_profile() -> None:
    model = BatchModel(profiled=law(a=1.0, c=0.5), min_samples=2)
    for _ in range(5):
        model = observe(model, batch=4, seconds=1.0)
    assert model.online is None


def test_noisy_negative_exponent_is_clamped() -> None:
    model = BatchModel(profiled=None, min_samples=2)
    model = observe(model, batch=1, seconds=2.0)
    model = observe(model, batch=8, seconds=1.0)
    assert model.fit is not None and model.fit.c == 0.0


def test_a_profiled_fit_with_an_absurd_exponent_is_clamped_too() -> None:
    # Seen in a noisy quick profile: c = -0.31 would make every larger batch look faster.
    model = BatchModel(profiled=law(a=1.0, c=-0.31))
    assert model.fit is not None and model.fit.c == 0.0
    assert model.choose(n=4, cap=8).size == 4
    steep = BatchModel(profiled=law(a=1.0, c=3.5))
    assert steep.fit is not None and steep.fit.c == 2.0
