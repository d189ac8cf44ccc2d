"""The resident partitions of the store's IVF view, under a byte budget.

Partitions a batch needs are loaded from disk, scored and offered to the cache;
the least recently used leave first when the budget is reached, and a partition
larger than the whole budget is used for its batch and released at once
(RAGDoll §4.2: partitions are loaded and released between retrieval batches).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np


class PartitionCache:
    """LRU of loaded partitions; `budget_bytes` None means no cap. `overhead`
    is what else of the budget is in use now (centroids, the delta)."""

    def __init__(
        self, *, budget_bytes: int | None, overhead: Callable[[], int] | None = None
    ) -> None:
        self._overhead = overhead or (lambda: 0)
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[np.ndarray, ...]] = OrderedDict()
        self._bytes = 0
        self.budget_bytes = budget_bytes
        self.loads = 0  # partitions read from disk since the cache was made
        self.hits = 0

    @property
    def resident_bytes(self) -> int:
        return self._bytes

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def get(self, key: Hashable) -> tuple[np.ndarray, ...] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return entry

    def put(self, key: Hashable, entry: tuple[np.ndarray, ...]) -> None:
        size = sum(a.nbytes for a in entry)
        with self._lock:
            self.loads += 1
            budget = self._budget()
            if budget is not None and size > budget:
                return  # used for this batch only
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= sum(a.nbytes for a in old)
            while self._entries and budget is not None:
                if self._bytes + size <= budget:
                    break
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= sum(a.nbytes for a in evicted)
            self._entries[key] = entry
            self._bytes += size

    def _budget(self) -> int | None:
        if self.budget_bytes is None:
            return None
        return max(0, self.budget_bytes - self._overhead())

    def set_budget(self, budget_bytes: int | None) -> None:
        with self._lock:
            self.budget_bytes = budget_bytes
            budget = self._budget()
            while self._entries and budget is not None and self._bytes > budget:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= sum(a.nbytes for a in evicted)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
