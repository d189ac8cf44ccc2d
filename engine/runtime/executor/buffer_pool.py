"""Reused CPU buffers for the weight store's reads and decodes (engine/runtime/executor/weights.py,
packed.py): a streamed layer's tensors go back at release and the next layer takes them."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable

import torch


class BufferPool:
    """Free CPU tensors by (shape, dtype), handed out again instead of allocating.

    Only tensors the pool made come back into it: a layer's tensors are given back
    whole at release, and some of them are fresh (a decoded GGUF tensor whose heads
    are permuted, a bf16 read converted to float32) under a key no later `take`
    asks for, so pooling them kept every streamed layer in RAM."""

    def __init__(self) -> None:
        self._free: dict[tuple[tuple[int, ...], torch.dtype], list[torch.Tensor]] = {}
        self._made: dict[int, weakref.ref[torch.Tensor]] = {}
        # Re-entrant: a tensor dropped while the lock is held (clear(), a list's
        # pop) runs its weakref callback, `_forget`, in the same thread.
        self._lock = threading.RLock()

    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        with self._lock:
            free = self._free.get((tuple(shape), dtype))
            if free:
                return free.pop()
        t = torch.empty(shape, dtype=dtype)
        key = id(t)
        with self._lock:
            self._made[key] = weakref.ref(t, lambda _ref, key=key: self._forget(key))
        return t

    def give(self, tensors: Iterable[torch.Tensor]) -> None:
        with self._lock:
            for t in tensors:
                ref = self._made.get(id(t))
                if ref is not None and ref() is t:
                    self._free.setdefault((tuple(t.shape), t.dtype), []).append(t)

    def _forget(self, key: int) -> None:
        with self._lock:
            ref = self._made.get(key)
            if ref is not None and ref() is None:
                del self._made[key]

    def held_bytes(self) -> int:
        with self._lock:
            return sum(t.numel() * t.element_size() for ts in self._free.values() for t in ts)

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
