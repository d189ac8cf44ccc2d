"""Wall-time bounds judged against the machine's own stalls at that moment.

A test that bounds a wall time ("the GUI thread never stalls for 100 ms", "a redraw
takes under 100 ms") must not fail because the machine was busy: at load 4 on two
cores a thread that is ready to run waits for a CPU for tens of milliseconds at a
time. Linux counts that wait for each thread (/proc/self/task/TID/schedstat, its
second field, in ns). What a bound is checked against here is the wall time less
the time this process's threads waited for a CPU in it: what the code under test
spent computing or blocked (a sleep, a lock, a synchronous call), which is the same
on a quiet machine and a busy one. On a quiet machine the wait is near 0, so the
bound is as strict as a plain wall-time one. Where the counts cannot be read (not
Linux) the wait is taken as 0: the plain wall time."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass


class CpuWait:
    """The time this process's threads waited for a CPU since the last `take()`.

    Summed over threads: a GUI thread also stalls while a worker that holds the GIL
    waits for a CPU. A thread that started since is counted from its start; one that
    ended loses its last few milliseconds (the check errs strict). Each thread's file
    stays open and is read again in place: a GUI timer takes this every 10 ms, and
    opening 30 files each time cost a millisecond of the GUI thread on a busy machine."""

    def __init__(self, *, also: Sequence[int] = ()) -> None:
        """`also`: other processes whose threads count too (an engine the test waits on)."""
        self._tasks = [f"/proc/{pid}/task" for pid in (os.getpid(), *also)]
        self._files: dict[str, int] = {}
        self._last = self._waits_ns()

    def _waits_ns(self) -> dict[str, int]:
        """Each thread's total wait for a CPU so far (ns), by its /proc folder."""
        tids = []
        for tasks in self._tasks:
            with contextlib.suppress(OSError):  # a process that ended
                tids += [f"{tasks}/{tid}" for tid in os.listdir(tasks)]
        for gone in self._files.keys() - set(tids):
            os.close(self._files.pop(gone))
        waits: dict[str, int] = {}
        for tid in tids:
            try:
                fd = self._files.get(tid)
                if fd is None:
                    fd = self._files[tid] = os.open(f"{tid}/schedstat", os.O_RDONLY)
                waits[tid] = int(os.pread(fd, 128, 0).split()[1])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended as it was read
        return waits

    def take(self) -> float:
        """Seconds waited since the last call (or since made)."""
        now = self._waits_ns()
        waited = sum(max(0, ns - self._last.get(tid, 0)) for tid, ns in now.items())
        self._last = now
        return waited / 1e9

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


@dataclass(frozen=True, kw_only=True)
class Took:
    wall_s: float
    machine_s: float  # of it, this process's threads waiting for a CPU

    @property
    def own_s(self) -> float:
        """The wall time the code itself made."""
        return max(0.0, self.wall_s - self.machine_s)

    def __str__(self) -> str:
        return (
            f"{self.own_s * 1000:.0f} ms ({self.wall_s * 1000:.0f} ms wall, "
            f"{self.machine_s * 1000:.0f} ms of it waiting for a CPU)"
        )


class Stopwatch:
    """`with Stopwatch() as watch: ...`, then `watch.took`; `also` as for CpuWait."""

    def __init__(self, *, also: Sequence[int] = ()) -> None:
        self._also = also

    def __enter__(self) -> Stopwatch:
        self._wait = CpuWait(also=self._also)
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._started
        self.took = Took(wall_s=wall, machine_s=self._wait.take())
        self._wait.close()
