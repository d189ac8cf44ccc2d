"""Re-planning the placement from the generation backlog: the decision on a fake clock
(grow after a persistent backlog, shrink after a persistent lull, hysteresis, cooldown),
and the governor applying it through the pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.rag.pipeline.governor import (
    GovernorPolicy,
    GovernorState,
    PlacementGovernor,
    decide,
    next_power_of_two,
)

POLICY = GovernorPolicy(
    base_batch=1, max_batch=8, grow_after_s=2.0, shrink_after_s=10.0, cooldown_s=5.0
)


def run(
    observations: list[tuple[float, int]], *, planned: int = 1, policy: GovernorPolicy = POLICY
) -> list[tuple[float, int]]:
    """(time, batch) of every re-plan decided over (time, backlog) observations."""
    state = GovernorState(planned=planned)
    changes = []
    for now, backlog in observations:
        state, target = decide(state, backlog=backlog, now=now, policy=policy)
        if target is not None:
            changes.append((now, target))
    return changes


def test_next_power_of_two() -> None:
    assert [next_power_of_two(n) for n in (0, 1, 2, 3, 4, 5, 8, 9)] == [1, 1, 2, 4, 4, 8, 8, 16]


def test_a_persistent_backlog_plans_for_the_batch_that_holds_it() -> None:
    obs = [(t * 0.5, 3) for t in range(6)]  # 3 waiting for 2.5 s
    assert run(obs) == [(2.0, 4)]


def test_a_short_burst_changes_nothing() -> None:
    # Over the planned batch for 1.5 s, then back: the clock restarts every time.
    obs = [(0.0, 5), (0.5, 5), (1.5, 5), (2.0, 1), (2.5, 6), (4.0, 6), (4.4, 0)]
    assert run(obs) == []


def test_growth_stops_at_the_largest_batch_that_fits() -> None:
    obs = [(0.0, 40), (1.0, 40), (2.0, 40)]
    assert run(obs) == [(2.0, 8)]
    assert run(obs, planned=8) == []  # already there: nothing to apply


def test_idle_goes_back_to_the_base_batch_after_the_lull_and_not_before() -> None:
    lull = [(float(t), 0) for t in range(0, 12)]
    assert run(lull, planned=8) == [(10.0, 1)]
    # A backlog of half the planned batch is a lull too; more than half is not.
    assert run([(float(t), 4) for t in range(12)], planned=8) == [(10.0, 4)]
    assert run([(float(t), 5) for t in range(30)], planned=8) == []


def test_a_busy_moment_in_the_lull_restarts_its_clock() -> None:
    obs = [(float(t), 0) for t in range(9)] + [(9.0, 8)] + [(10.0 + t, 0) for t in range(11)]
    assert run(obs, planned=8) == [(20.0, 1)]


def test_two_changes_are_at_least_the_cooldown_apart() -> None:
    # Grows at 2 s; the backlog then doubles at once, but the next growth waits for
    # the cooldown (5 s after the first change), not only for grow_after_s.
    obs = [(t * 0.5, 3) for t in range(5)] + [(2.5 + t * 0.5, 8) for t in range(12)]
    changes = run(obs)
    assert changes[0] == (2.0, 4)
    assert changes[1][1] == 8 and changes[1][0] >= 7.0


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError):
        GovernorPolicy(base_batch=4, max_batch=2)
    with pytest.raises(ValueError):
        GovernorPolicy(grow_after_s=-1)


@dataclass
class FakeWorker:
    backlog: int = 0


@dataclass
class FakePipeline:
    generation: FakeWorker = field(default_factory=FakeWorker)
    applied: list[Any] = field(default_factory=list)

    def set_placement(self, placement: Any) -> None:
        self.applied.append(placement)


def test_the_governor_applies_the_planners_placement_through_the_pipeline() -> None:
    now = [0.0]
    pipeline = FakePipeline()
    asked: list[int] = []

    def plan_for(batch: int) -> Any:
        asked.append(batch)
        return None if batch > 4 else {"batch": batch}

    governor = PlacementGovernor(
        pipeline=pipeline,
        plan_for=plan_for,
        policy=POLICY,
        planned=1,
        clock=lambda: now[0],
        start=False,
    )
    pipeline.generation.backlog = 3
    for t in (0.0, 1.0, 2.0):
        now[0] = t
        governor.tick()
    assert pipeline.applied == [{"batch": 4}] and governor.planned == 4
    # No placement fits 8: the one in force stays, and the next try waits the cooldown.
    pipeline.generation.backlog = 7
    for t in (8.0, 9.0, 10.0, 11.0):
        now[0] = t
        governor.tick()
    assert asked == [4, 8] and governor.planned == 4 and len(pipeline.applied) == 1
    # Quiet: back to the base batch after the lull.
    pipeline.generation.backlog = 0
    for t in range(16, 30):
        now[0] = float(t)
        governor.tick()
    assert pipeline.applied[-1] == {"batch": 1} and governor.planned == 1
    assert [b for _, b in governor.changes] == [4, 1]
