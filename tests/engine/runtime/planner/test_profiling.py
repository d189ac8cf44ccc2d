"""Active profiling: the power-law fit, the budget, the balance, storage and staleness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.runtime.planner.profiling import (
    EXTRACTIVE_NOTE,
    PROFILE_FILE_NAME,
    ProfileResult,
    choose,
    fit_power_law,
    fit_retrieval,
    load_current_profile,
    load_saved_profile,
    run_active_profile,
    save_profile,
    stale_reason,
)


def test_power_law_recovers_a_and_c_exactly() -> None:
    fit = fit_power_law(samples=[(b, 0.3 * b**0.6) for b in (1, 2, 4, 8, 16)])
    assert fit.a == pytest.approx(0.3, rel=0.05)
    assert fit.c == pytest.approx(0.6, rel=0.05)
    assert fit.r2 > 0.999


def test_power_law_recovers_a_and_c_under_noise() -> None:
    rng = np.random.default_rng(7)
    samples = [(b, 0.12 * b**0.45 * float(rng.lognormal(0, 0.02))) for b in (1, 2, 4, 8, 16, 32)]
    fit = fit_power_law(samples=samples)
    assert fit.a == pytest.approx(0.12, rel=0.05)
    assert fit.c == pytest.approx(0.45, rel=0.05)
    assert fit.predict(batch=8) == pytest.approx(0.12 * 8**0.45, rel=0.05)


def test_power_law_refuses_one_batch_size_and_non_positive_times() -> None:
    with pytest.raises(ValueError):
        fit_power_law(samples=[(4, 1.0), (4, 1.1)])
    with pytest.raises(ValueError):
        fit_power_law(samples=[(1, 1.0), (2, 0.0)])


def test_retrieval_fit_is_a_line_in_resident_partitions() -> None:
    fit = fit_retrieval(samples=[(p, 0.9 - 0.1 * p) for p in (1, 2, 4, 8)])
    assert fit.slope == pytest.approx(-0.1)
    assert fit.intercept == pytest.approx(0.9)
    assert fit.predict(partitions=20) == 0.0  # never negative past the samples


def test_choose_balances_the_pipelines() -> None:
    gen = fit_power_law(samples=[(b, 0.5 * b**0.5) for b in (1, 2, 4, 8)])
    ret = fit_retrieval(samples=[(p, 1.0 - 0.1 * p) for p in (1, 2, 4, 8)])
    # 2 q/s: B/(0.5·√B) = 2√B ≥ 2 → B = 1 keeps up; t_gen(1) = 0.5 → P = 5 matches it.
    batch, parts = choose(
        generation=gen, retrieval=ret, rate_qps=2.0, max_batch=8, max_partitions=8
    )
    assert (batch, parts) == (1, 5)
    # 4 q/s needs 2√B ≥ 4 → B = 4; t_gen(4) = 1.0 → one partition is enough.
    batch, parts = choose(
        generation=gen, retrieval=ret, rate_qps=4.0, max_batch=8, max_partitions=8
    )
    assert (batch, parts) == (4, 1)
    # Too fast for any batch: the highest throughput, B = max.
    batch, _ = choose(generation=gen, retrieval=ret, rate_qps=100, max_batch=8, max_partitions=8)
    assert batch == 8


def test_run_fits_fake_samplers_and_reports_progress() -> None:
    seen: list[tuple[str, float]] = []
    result = run_active_profile(
        sample_generation=lambda b: 0.2 * b**0.7,
        sample_retrieval=lambda p: 0.5 - 0.05 * p,
        progress=lambda message, fraction: seen.append((message, fraction)),
        model_id="tiny",
        hardware_fingerprint="abc",
        collection_chunks=100,
    )
    assert result.generation is not None and result.retrieval is not None
    assert result.generation.c == pytest.approx(0.7, rel=0.01)
    assert len(result.generation.samples) == 4 and len(result.retrieval.samples) == 4
    assert not result.budget_spent
    assert seen[-1] == ("done", 1.0)
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and len(seen) == 9


def test_run_stops_at_the_budget_but_keeps_two_points_each() -> None:
    now = [0.0]

    def slow_generation(batch: int) -> float:
        now[0] += 10.0  # every sample costs 10 s of the budget
        return 0.1 * batch

    result = run_active_profile(
        sample_generation=slow_generation,
        sample_retrieval=lambda p: 1.0 / p,
        batches=(1, 2, 4, 8, 16),
        partitions=(1, 2, 4, 8, 16),
        budget_s=15.0,
        clock=lambda: now[0],
    )
    assert result.budget_spent
    assert result.generation is not None and len(result.generation.samples) == 2
    assert result.retrieval is not None and len(result.retrieval.samples) == 2
    assert any("budget" in n for n in result.notes)


def test_extractive_mode_skips_generation() -> None:
    result = run_active_profile(sample_generation=None, sample_retrieval=lambda p: 0.2 / p)
    assert result.generation is None
    assert EXTRACTIVE_NOTE in result.notes
    assert result.batch == 4  # the planner's default stands
    assert result.t_generation_s is None


def make_result(**changes: object) -> ProfileResult:
    base = run_active_profile(
        sample_generation=lambda b: 0.3 * b**0.5,
        sample_retrieval=lambda p: 0.4 - 0.02 * p,
        model_id="m1",
        hardware_fingerprint="hw1",
        collection_chunks=1000,
    )
    return ProfileResult.from_dict({**base.as_dict(), **changes})


def test_json_round_trip(tmp_path: Path) -> None:
    result = make_result()
    file = save_profile(data_dir=tmp_path, result=result)
    assert file == tmp_path / PROFILE_FILE_NAME
    assert load_saved_profile(data_dir=tmp_path) == result


def test_damaged_file_reads_as_none(tmp_path: Path) -> None:
    (tmp_path / PROFILE_FILE_NAME).write_text("{not json")
    assert load_saved_profile(data_dir=tmp_path) is None


@pytest.mark.parametrize(
    ("model", "hw", "chunks", "stale"),
    [
        ("m1", "hw1", 1000, False),
        ("m1", "hw1", 1900, False),  # under a factor of 2
        ("m1", "hw1", 2000, True),
        ("m1", "hw1", 500, True),
        ("m2", "hw1", 1000, True),
        (None, "hw1", 1000, True),
        ("m1", "hw2", 1000, True),
    ],
)
def test_invalidation(tmp_path: Path, model: str | None, hw: str, chunks: int, stale: bool) -> None:
    result = make_result()
    save_profile(data_dir=tmp_path, result=result)
    reason = stale_reason(
        result=result, model_id=model, hardware_fingerprint=hw, collection_chunks=chunks
    )
    assert (reason is not None) == stale
    current = load_current_profile(
        data_dir=tmp_path, model_id=model, hardware_fingerprint=hw, collection_chunks=chunks
    )
    assert (current is None) == stale
