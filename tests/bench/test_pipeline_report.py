"""The repeats of `bench pipeline` together: medians as the headline, per-run lists."""

from __future__ import annotations

import pytest

from bench.pipeline_report import over_repeats


def _repeat(ragdoll: float, serial: float, no_pipe: float, fixed: float) -> dict:
    mean = {
        "ragdoll": ragdoll,
        "serial_accelerate": serial,
        "no_pipeline": no_pipe,
        "fixed_batch": fixed,
    }
    return {
        "systems": {name: {"mean_latency_s": v} for name, v in mean.items()},
        "mean_latency_s": mean,
        "speedup_vs_serial_accelerate": serial / ragdoll,
        "speedup_vs_no_pipeline": no_pipe / ragdoll,
        "speedup_vs_fixed_batch": fixed / ragdoll,
        "all_finished": True,
    }


def test_headline_ratios_are_medians_of_the_runs_not_ratios_of_medians() -> None:
    runs = [_repeat(1.0, 4.0, 2.0, 1.0), _repeat(2.0, 4.0, 2.0, 3.0), _repeat(4.0, 4.0, 2.0, 2.0)]
    f = over_repeats(runs)
    assert f["speedup_vs_serial_accelerate_runs"] == [4.0, 2.0, 1.0]
    assert f["speedup_vs_serial_accelerate"] == 2.0
    assert f["speedup_vs_no_pipeline_runs"] == [2.0, 1.0, 0.5]
    assert f["speedup_vs_no_pipeline"] == 1.0
    assert f["speedup_vs_fixed_batch_runs"] == [1.0, 1.5, 0.5]
    assert f["speedup_vs_fixed_batch"] == 1.0
    assert f["mean_latency_s"]["ragdoll"] == 2.0
    assert f["mean_latency_s_runs"]["fixed_batch"] == [1.0, 3.0, 2.0]
    assert f["systems"] is runs[0]["systems"] and f["all_finished"] is True


def test_ratio_median_differs_from_the_ratio_of_median_latencies() -> None:
    runs = [_repeat(1.0, 10.0, 1, 1), _repeat(10.0, 20.0, 1, 1), _repeat(3.0, 3.3, 1, 1)]
    f = over_repeats(runs)
    assert f["speedup_vs_serial_accelerate"] == pytest.approx(2.0)  # median of 10, 2, 1.1
    assert f["mean_latency_s"]["serial_accelerate"] / f["mean_latency_s"]["ragdoll"] != 2.0


def test_a_missing_ratio_stays_missing_and_no_repeat_is_an_error() -> None:
    run = _repeat(1.0, 2.0, 2.0, 2.0) | {"speedup_vs_fixed_batch": None}
    f = over_repeats([run])
    assert f["speedup_vs_fixed_batch"] is None and f["speedup_vs_fixed_batch_runs"] == [None]
    with pytest.raises(ValueError):
        over_repeats([])
