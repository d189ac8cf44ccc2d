"""The copy thread: loads streamed units ahead of the layer that computes.

RAGDoll §4.3: do not stop at layer i+1; keep loading later layers while memory allows.
The depth (how many units may be loaded ahead of the one computing) comes from the
Placement: shallow in prefill, where activations are large, deep in decode. The thread
cycles over the streamed units in the order a forward pass uses them, so the first layers
of the next decode step load while the last layers of this one compute.

Memory bound: at most `depth + 1` streamed units are loaded at once (the one computing and
`depth` ahead), and never two copies of one unit. The consumer synchronises only when it
needs a unit (`get`), and frees it right after use (`release`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import torch

from engine.runtime.executor.weights import WeightStore


@dataclass(frozen=True, kw_only=True)
class PrefetchStats:
    waits: int  # times the consumer found its unit not yet loaded
    wait_seconds: float  # time the consumer spent waiting for loads
    load_seconds: float  # time the copy thread spent loading


class Prefetcher:
    def __init__(
        self, *, store: WeightStore, units: list[str], depth: int, device: torch.device
    ) -> None:
        if not units:
            raise ValueError("nothing to prefetch")
        self._store = store
        self._units = list(units)
        self._depth = max(0, depth)
        self._device = device
        self._cond = threading.Condition()
        self._ready: dict[int, tuple[dict[str, torch.Tensor], object] | BaseException] = {}
        self._next_load = 0  # position in the endless cycle over units
        self._next_get = 0
        self._held = 0  # units loading or loaded and not yet released
        self._closed = False
        self._waits = 0
        self._wait_s = 0.0
        self._load_s = 0.0
        # Copies on their own CUDA stream so they overlap the compute stream.
        self._copy_stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._thread = threading.Thread(target=self._run, name="ragdoll-prefetch", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        return self._depth

    def set_depth(self, depth: int) -> None:
        """Change how far ahead the thread loads (prefill → decode). A smaller depth takes
        effect as the consumer releases units; nothing already loaded is dropped."""
        with self._cond:
            self._depth = max(0, depth)
            self._cond.notify_all()

    def get(self, unit: str) -> dict[str, torch.Tensor]:
        """The unit's tensors in the compute tier, waiting for the copy thread if needed."""
        with self._cond:
            k = self._next_get
            expected = self._units[k % len(self._units)]
            if unit != expected:
                raise RuntimeError(f"prefetch order broken: asked for {unit}, next is {expected}")
            if k not in self._ready:
                self._waits += 1
                start = time.perf_counter()
                while k not in self._ready and not self._closed:
                    self._cond.wait()
                self._wait_s += time.perf_counter() - start
            if self._closed:
                raise RuntimeError("prefetcher closed")
            item = self._ready.pop(k)
            self._next_get += 1
        if isinstance(item, BaseException):
            raise RuntimeError(f"loading {unit} failed: {item}") from item
        tensors, event = item
        if self._copy_stream is not None:
            compute = torch.cuda.current_stream(self._device)
            compute.wait_event(event)  # type: ignore[arg-type]
            # Tell the caching allocator these blocks are in use on the compute stream,
            # so it does not hand them to the next copy before compute is done.
            for t in tensors.values():
                t.record_stream(compute)
        return tensors

    def release(self, unit: str) -> None:
        """The consumer is done with `unit` (and has dropped its references)."""
        self._store.release(unit)
        with self._cond:
            self._held -= 1
            self._cond.notify_all()

    def stats(self) -> PrefetchStats:
        with self._cond:
            return PrefetchStats(
                waits=self._waits, wait_seconds=self._wait_s, load_seconds=self._load_s
            )

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
        with self._cond:
            for k in list(self._ready):
                self._store.release(self._units[k % len(self._units)])
            self._ready.clear()

    def _limit(self) -> int:
        # Never more than one copy of a unit: with few streamed units and a deep queue
        # the cycle would otherwise load the same layer twice.
        return min(self._depth + 1, len(self._units))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and self._held >= self._limit():
                    self._cond.wait()
                if self._closed:
                    return
                k = self._next_load
                self._next_load += 1
                self._held += 1  # reserved before loading: the bound holds during the copy
            unit = self._units[k % len(self._units)]
            start = time.perf_counter()
            try:
                item: tuple[dict[str, torch.Tensor], object] | BaseException
                if self._copy_stream is not None:
                    with torch.cuda.stream(self._copy_stream):
                        tensors = self._store.fetch(unit)
                        event = torch.cuda.Event()
                        event.record(self._copy_stream)
                    # The copies are queued, not done: wait here, in the copy thread (the
                    # compute stream never waits on the host), so that load_seconds is the
                    # time until the bytes are on the GPU (the benchmark's T_xfer) and a
                    # unit counted as loaded really is. The consumer still orders its
                    # stream after the event: that is what makes the use safe.
                    event.synchronize()
                    item = (tensors, event)
                else:
                    item = (self._store.fetch(unit), None)
            except BaseException as e:  # handed to the consumer, which raises it
                item = e
            with self._cond:
                self._load_s += time.perf_counter() - start
                if self._closed:
                    self._store.release(unit)
                    return
                self._ready[k] = item
                self._cond.notify_all()
