"""How fast an ingestion job goes and how long it has left, in bytes of its
files: a file's share of the work is its size (a 196-page PDF is not one
twentieth of a folder of twenty files), credited as its chunks are embedded.

The rate is an exponentially weighted average over about `horizon_s` of
working time, so that a burst of work or one slow page moves the estimate by
little: the ETA it gives drifts, it does not jump. Files found unchanged are
`skip`ped, not done: a resumed job skips what it indexed before in no time,
and counting those bytes as work made its first rate (and ETA) many times too
fast.
"""

from __future__ import annotations

import math

WARM_UP_S = 3.0  # no ETA before this much working time: the first file says little


class Pace:
    def __init__(self, *, total_bytes: int, horizon_s: float = 30.0) -> None:
        self.total_bytes = max(0, total_bytes)
        self.horizon_s = horizon_s
        self.done_bytes = 0.0
        self.active_s = 0.0
        self.rate: float | None = None  # bytes per working second

    def advance(self, *, done_bytes: float, dt: float) -> None:
        """`done_bytes` of the work are done now, `dt` working seconds after the last call."""
        dt = max(0.0, dt)
        gained = max(0.0, done_bytes - self.done_bytes)
        self.done_bytes = max(self.done_bytes, done_bytes)
        self.active_s += dt
        if self.active_s < WARM_UP_S:
            return
        if self.rate is None:
            self.rate = self.done_bytes / self.active_s
            return
        # The continuous-time average: a burst of work in no time (unchanged
        # files) adds gained / horizon, not gained / dt.
        weight = 1.0 - math.exp(-dt / self.horizon_s)
        instant_part = gained / self.horizon_s if dt < 1e-9 else gained / dt * weight
        self.rate = self.rate * (1.0 - weight) + instant_part

    def skip(self, *, size: int) -> None:
        """A file of `size` bytes needs no work after all (unchanged since the
        last ingest): it leaves the work instead of adding to the rate."""
        self.total_bytes = max(0, self.total_bytes - max(0, size))

    @property
    def eta_s(self) -> float | None:
        if self.rate is None or self.rate <= 0:
            return None
        return max(0.0, self.total_bytes - self.done_bytes) / self.rate
