"""Which waiting requests go into the next batch: value-based ordering with a bound.

In the spirit of Apt-Serve (its Eq. 5): the value of scheduling a request now is the
pending time it would stop accruing, less the cost it adds to the batch. Here the
pending time (plus a grace, so that two fresh requests differ) is weighted by class:
the chat a person is watching ("interactive") counts more than a batch of questions
or an API client ("background"). A fresh chat overtakes background work, while
background work still gains value the longer it waits. The bound (Apt-Serve's SLO
fallback, turned round for a single user): a request that has waited `max_wait_s`
goes ahead of everything that has not, oldest first, so no class starves another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.wire import Priority

PRIORITIES: tuple[Priority, ...] = ("interactive", "background")


def _default_weights() -> Mapping[str, float]:
    return {"interactive": 8.0, "background": 1.0}


@dataclass(frozen=True, kw_only=True)
class SchedulerPolicy:
    weights: Mapping[str, float] = field(default_factory=_default_weights)
    cost_weight: float = 1.0  # seconds of weighted waiting one second of added cost is worth
    # Every request counts as having waited this long already, so that the class weight
    # separates two fresh requests (at zero wait every weight times zero is zero).
    grace_s: float = 1.0
    max_wait_s: float = 30.0  # no request waits longer than this for a batch (if one runs)

    def __post_init__(self) -> None:
        if set(self.weights) != set(PRIORITIES) or any(w <= 0 for w in self.weights.values()):
            raise ValueError(f"weights must give a positive weight to each of {PRIORITIES}")
        if self.max_wait_s <= 0:
            raise ValueError("max_wait_s must be positive")


@dataclass(frozen=True, kw_only=True)
class Pending:
    """One waiting request as the scheduler sees it."""

    request_id: str
    priority: Priority
    enqueued_at: float  # clock seconds
    cost_s: float = 0.0  # estimated seconds this request adds to a batch (e.g. its prompt)

    def __post_init__(self) -> None:
        if self.priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, not {self.priority!r}")


def value(item: Pending, *, now: float, policy: SchedulerPolicy) -> float:
    waited = max(0.0, now - item.enqueued_at)
    return policy.weights[item.priority] * (waited + policy.grace_s) - (
        policy.cost_weight * item.cost_s
    )


def overdue(item: Pending, *, now: float, policy: SchedulerPolicy) -> bool:
    return now - item.enqueued_at >= policy.max_wait_s


def order(items: Sequence[Pending], *, now: float, policy: SchedulerPolicy) -> list[Pending]:
    """Overdue requests first (oldest first), then by value, highest first; ties go
    to the older request, then to the interactive one."""

    def key(item: Pending) -> tuple[int, float, float, int]:
        late = overdue(item, now=now, policy=policy)
        rank = PRIORITIES.index(item.priority)
        if late:
            return (0, item.enqueued_at, 0.0, rank)
        return (1, -value(item, now=now, policy=policy), item.enqueued_at, rank)

    return sorted(items, key=key)


def select(
    items: Sequence[Pending], *, size: int, now: float, policy: SchedulerPolicy
) -> tuple[list[Pending], list[Pending]]:
    """(the next batch of at most `size`, what stays waiting), both in scheduling order."""
    if size < 1:
        raise ValueError("a batch holds at least one request")
    ranked = order(items, now=now, policy=policy)
    return ranked[:size], ranked[size:]
