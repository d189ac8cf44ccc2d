"""A 10 ms timer on the GUI thread whose gaps show any stall of it, each gap less
the time the process waited for a CPU in it (tests/support/stalls.py): a stall
the window made, not one a busy machine made.

Nor one the test process's heap made: it holds torch, transformers and every test's
modules (200,000 to 600,000 objects against the window's 52,000), and a full pass of
Python's collector over 200,000 took 135 ms of CPU here (40 ms over the window's). While a ticker
runs, what existed before it is frozen out of collection (`gc.freeze`): a collection
then walks what the code under test made, as it would in the window."""

from __future__ import annotations

import gc
import time

from PySide6.QtCore import QTimer

from tests.support.stalls import CpuWait, Took

# The longest the GUI thread may stall before a person notices the window freeze.
MAX_GAP_S = 0.1


class Ticker:
    def __init__(self, *, start: bool = True) -> None:
        self.ticks: list[float] = []
        self.gaps: list[Took] = []
        self._last: float | None = None
        self._wait = CpuWait()
        self.timer = QTimer()
        self.timer.setInterval(10)
        self.timer.timeout.connect(self._tick)
        gc.collect()
        gc.freeze()
        if start:
            self.start()

    def start(self) -> None:
        """Ticks again; the time it was stopped is no gap."""
        self._last = None
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def _tick(self) -> None:
        now = time.monotonic()
        waited = self._wait.take()
        if self._last is not None:
            self.gaps.append(Took(wall_s=now - self._last, machine_s=waited))
        self._last = now
        self.ticks.append(now)

    def longest(self) -> Took:
        """The longest stall the window made (the timer stops)."""
        self.stop()
        self._wait.close()
        gc.unfreeze()
        return max(self.gaps, key=lambda gap: gap.own_s)
