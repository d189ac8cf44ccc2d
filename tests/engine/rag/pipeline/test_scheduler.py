"""Value-based ordering with classes and a bound on waiting, on a fake clock."""

from __future__ import annotations

import pytest

from engine.rag.pipeline.scheduler import Pending, SchedulerPolicy, order, select, value

POLICY = SchedulerPolicy(max_wait_s=30.0)


def p(rid: str, priority: str, at: float, cost: float = 0.0) -> Pending:
    return Pending(request_id=rid, priority=priority, enqueued_at=at, cost_s=cost)  # type: ignore[arg-type]


def ids(items: list[Pending]) -> list[str]:
    return [i.request_id for i in items]


def test_interactive_goes_ahead_of_older_background_work() -> None:
    now = 100.0
    items = [
        p("bg1", "background", 95.0),
        p("bg2", "background", 96.0),
        p("chat", "interactive", now),
    ]
    batch, rest = select(items, size=1, now=now, policy=POLICY)
    assert ids(batch) == ["chat"]
    assert ids(rest) == ["bg1", "bg2"]  # background by value: the older first


def test_background_gains_value_as_it_waits() -> None:
    # A background request that has waited long enough outranks a fresh chat even
    # before the bound: 1·(20+1) > 8·(0+1).
    items = [p("chat", "interactive", 50.0), p("bg", "background", 30.0)]
    assert ids(order(items, now=50.0, policy=POLICY)) == ["bg", "chat"]


def test_cost_lowers_value() -> None:
    items = [p("long", "interactive", 0.0, cost=5.0), p("short", "interactive", 0.0, cost=0.5)]
    assert ids(order(items, now=1.0, policy=POLICY)) == ["short", "long"]
    assert value(items[0], now=1.0, policy=POLICY) == pytest.approx(8 * 2 - 5)


def test_background_never_waits_past_the_bound_under_a_stream_of_chats() -> None:
    """One batch of one per second, a new chat every second, a background question
    waiting from t=0: it must be served no later than max_wait_s after it arrived."""
    policy = SchedulerPolicy(max_wait_s=10.0, weights={"interactive": 1000.0, "background": 1.0})
    waiting = [p("bg", "background", 0.0)]
    served_at: dict[str, float] = {}
    for second in range(60):
        now = float(second)
        waiting.append(p(f"chat{second}", "interactive", now))
        batch, waiting = select(waiting, size=1, now=now, policy=policy)
        served_at[batch[0].request_id] = now
    assert served_at["bg"] <= 10.0
    assert served_at["bg"] >= 9.0  # and not before its value or the bound put it first


def test_overdue_requests_go_oldest_first_whatever_their_class() -> None:
    items = [
        p("chat-late", "interactive", 5.0),
        p("bg-later", "background", 1.0),
        p("fresh-chat", "interactive", 40.0),
    ]
    assert ids(order(items, now=40.0, policy=POLICY)) == ["bg-later", "chat-late", "fresh-chat"]


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        p("x", "urgent", 0.0)
    with pytest.raises(ValueError):
        SchedulerPolicy(weights={"interactive": 1.0})
    with pytest.raises(ValueError):
        SchedulerPolicy(max_wait_s=0)
    with pytest.raises(ValueError):
        select([], size=0, now=0.0, policy=POLICY)
