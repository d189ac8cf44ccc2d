"""How a resident budget is shared between LanceDB's caches and the IVF view."""

from __future__ import annotations

from engine.rag.store.resident_memory import (
    LANCE_CACHE_MAX,
    LANCE_CACHE_SHARE,
    resident_budget,
    view_budget,
)


def test_the_caches_get_an_eighth_each_at_most_64_mib_and_the_view_the_rest() -> None:
    assert view_budget(None) is None  # no cap
    small = 8 * 2**20
    assert view_budget(small) == small - 2 * (small // LANCE_CACHE_SHARE)
    large = 4 * 2**30
    assert view_budget(large) == large - 2 * LANCE_CACHE_MAX
    assert view_budget(-5) == 0


def test_a_share_of_the_view_comes_with_room_for_the_caches() -> None:
    view = 3 * 2**20
    budget = resident_budget(view_bytes=view, share=1.0)
    got = view_budget(budget)
    assert got is not None and got >= view  # at 100% every partition stays resident
    assert resident_budget(view_bytes=0, share=0.5) == 1
