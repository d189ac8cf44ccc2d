"""What the store holds in memory for search, and how a resident budget is shared out.

A budget (the planner's Placement, `LanceStore.apply_placement`) caps the IVF view's
resident partitions (least recently used out first) and LanceDB's two caches.
"""

from __future__ import annotations

import lancedb

# Of a resident budget, LanceDB's metadata cache and its index cache (full-text
# and scalar indices; the vector index only while the IVF view is rebuilt) get
# an eighth each, at most 64 MiB; the IVF view's partitions the rest.
LANCE_CACHE_SHARE = 8
LANCE_CACHE_MAX = 64 * 2**20


def lance_session(resident_bytes: int | None) -> lancedb.Session:
    """LanceDB's session for a budget: its caches sized from it (None: LanceDB's own)."""
    if resident_bytes is None:
        return lancedb.Session()
    lance = _lance_cache(resident_bytes)
    return lancedb.Session(index_cache_size_bytes=lance, metadata_cache_size_bytes=lance)


def view_budget(resident_bytes: int | None) -> int | None:
    """What of a budget the IVF view's partitions get (None: no cap)."""
    if resident_bytes is None:
        return None
    return max(0, resident_bytes) - 2 * _lance_cache(resident_bytes)


def resident_budget(*, view_bytes: int, share: float) -> int:
    """The store's budget for `share` of the IVF view's partitions: that share
    plus what LanceDB's caches may take of a budget (a quarter at most: an
    eighth each, `LANCE_CACHE_SHARE`), so that at 100% every partition stays resident."""
    return max(1, int(view_bytes * share * 4 / 3))


def _lance_cache(resident_bytes: int) -> int:
    return min(LANCE_CACHE_MAX, max(0, resident_bytes) // LANCE_CACHE_SHARE)
