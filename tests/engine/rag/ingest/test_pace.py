"""The ETA of an ingestion job: from bytes of work and a smoothed rate."""

from __future__ import annotations

import itertools

from engine.rag.ingest.pace import WARM_UP_S, Pace


def _run(pace: Pace, steps: list[tuple[float, float]]) -> list[float]:
    """(seconds, bytes) steps; the ETAs after each one, once there is one."""
    done, etas = 0.0, []
    for seconds, gained in steps:
        done += gained
        pace.advance(done_bytes=done, dt=seconds)
        if pace.eta_s is not None:
            etas.append(pace.eta_s)
    return etas


def test_no_eta_until_there_is_working_time_to_go_by() -> None:
    pace = Pace(total_bytes=1000)
    pace.advance(done_bytes=500, dt=WARM_UP_S / 2)
    assert pace.eta_s is None
    pace.advance(done_bytes=600, dt=WARM_UP_S)
    assert pace.eta_s is not None


def test_a_steady_job_gets_the_plain_estimate() -> None:
    pace = Pace(total_bytes=100_000)
    etas = _run(pace, [(1.0, 500.0)] * 60)  # 500 bytes/s
    assert abs(etas[-1] - (100_000 - 30_000) / 500) < 1.0


def test_a_mixed_folder_does_not_swing_the_eta_tenfold() -> None:
    # Small files read fast, then a big PDF's chunks trickle in, then a burst
    # of unchanged files done in no time: the ETA went 58 -> 2 minutes.
    steps = [(0.2, 4_000.0)] * 50  # 20 kB/s
    steps += [(1.0, 2_000.0)] * 60  # 2 kB/s while a big file is embedded
    steps += [(0.001, 50_000.0)] * 10  # unchanged files: half a MB in 10 ms
    steps += [(1.0, 2_000.0)] * 30
    pace = Pace(total_bytes=2_000_000)
    etas = _run(pace, steps)
    worst = max(max(a, b) / min(a, b) for a, b in itertools.pairwise(etas))
    assert worst < 1.5, f"the ETA jumped by {worst:.1f}x between two updates"
    assert max(etas) / min(etas) < 10
