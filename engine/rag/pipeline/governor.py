"""Re-planning the placement as the generation backlog grows or shrinks (RAGDoll §4.2).

A Placement is sized for one generation batch (`Placement.batch`: the KV and workspace
it reserves, hence how many layers the compute tier can hold). When more questions keep
waiting than that batch, the planner is asked for a placement sized for a larger batch
(the next power of two that holds the backlog, up to the largest that fits); when the
engine goes quiet again, for the base batch. The new placement is applied with
`Pipeline.set_placement`, between batches, without stopping service.

Hysteresis, so that one burst does not move weights back and forth: the backlog must
stay above the planned batch for `grow_after_s` (and at most half of it for
`shrink_after_s`) on every observation in between, and two changes are at least
`cooldown_s` apart. `decide` is the whole decision, a pure function of what was
observed; `PlacementGovernor` observes a pipeline on a thread and applies it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from engine.runtime.planner.placement import Placement

log = logging.getLogger(__name__)


class _Backlog(Protocol):
    @property
    def backlog(self) -> int: ...


class Governed(Protocol):
    """What the governor needs of a pipeline (workers.py's Pipeline): the generation
    queue's backlog, and a way to put a new placement in force between batches."""

    @property
    def generation(self) -> _Backlog: ...

    def set_placement(self, placement: Placement) -> None: ...


@dataclass(frozen=True, kw_only=True)
class GovernorPolicy:
    base_batch: int = 1  # what an idle engine is planned for
    max_batch: int = 8  # never plan beyond this (the largest batch that fits)
    grow_after_s: float = 2.0
    shrink_after_s: float = 20.0
    cooldown_s: float = 5.0

    def __post_init__(self) -> None:
        if not 1 <= self.base_batch <= self.max_batch:
            raise ValueError("need 1 <= base_batch <= max_batch")
        if min(self.grow_after_s, self.shrink_after_s, self.cooldown_s) < 0:
            raise ValueError("times must not be negative")


@dataclass(frozen=True, kw_only=True)
class GovernorState:
    planned: int  # the batch the placement in force is sized for
    over_since: float | None = None  # backlog above `planned` since (None: not now)
    under_since: float | None = None  # backlog at most planned // 2 since
    changed_at: float | None = None


def next_power_of_two(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def decide(
    state: GovernorState, *, backlog: int, now: float, policy: GovernorPolicy
) -> tuple[GovernorState, int | None]:
    """(the state after this observation, the batch to plan for now or None)."""
    planned = state.planned
    over = backlog > planned
    under = planned > policy.base_batch and backlog <= planned // 2
    over_since = (state.over_since if state.over_since is not None else now) if over else None
    under_since = (state.under_since if state.under_since is not None else now) if under else None
    target = None
    cooling = state.changed_at is not None and now - state.changed_at < policy.cooldown_s
    if not cooling:
        if over_since is not None and now - over_since >= policy.grow_after_s:
            target = min(policy.max_batch, next_power_of_two(backlog))
        elif under_since is not None and now - under_since >= policy.shrink_after_s:
            target = max(policy.base_batch, next_power_of_two(backlog))
    if target is not None and target != planned:
        return GovernorState(planned=target, changed_at=now), target
    return dataclasses.replace(state, over_since=over_since, under_since=under_since), None


class PlacementGovernor:
    """Watches the generation backlog of a pipeline and re-plans its placement.

    `plan_for(batch)` returns a placement sized for that batch, or None when none fits
    (the placement in force then stays, and the next try waits for the cooldown);
    `in_force()` is the placement in force (its owner's: after an out-of-memory
    recovery, the demoted one)."""

    def __init__(
        self,
        *,
        pipeline: Governed,
        plan_for: Callable[[int], Placement | None],
        policy: GovernorPolicy,
        planned: int,
        in_force: Callable[[], Placement | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = 0.25,
        start: bool = True,
    ) -> None:
        self._pipeline = pipeline
        self._plan_for = plan_for
        self._in_force = in_force
        self._policy = policy
        self._clock = clock
        self._interval_s = interval_s
        self._state = GovernorState(planned=planned)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.changes: list[tuple[float, int]] = []  # (clock, batch) of each applied change
        if start:
            self._thread = threading.Thread(
                target=self._loop, name="pipeline-governor", daemon=True
            )
            self._thread.start()

    @property
    def planned(self) -> int:
        return self._state.planned

    @property
    def placement(self) -> Placement | None:
        """The placement in force, as its owner reports it."""
        return self._in_force()

    def tick(self) -> int | None:
        """One observation; the batch the placement was re-planned for, if it was."""
        now = self._clock()
        before = self._state
        self._state, target = decide(
            before, backlog=self._pipeline.generation.backlog, now=now, policy=self._policy
        )
        if target is None:
            return None
        try:
            placement = self._plan_for(target)
            if placement is None:
                raise ValueError(f"no placement fits a batch of {target}")
            self._pipeline.set_placement(placement)
        except Exception as e:  # keep the placement in force; try again after the cooldown
            log.warning("re-planning for a batch of %d failed: %s", target, e)
            self._state = GovernorState(planned=before.planned, changed_at=now)
            return None
        log.info("generation backlog: placement re-planned for a batch of %d", target)
        self.changes.append((now, target))
        return target

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.tick()
            except Exception:  # never take the engine down over a re-plan
                log.exception("placement governor")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
