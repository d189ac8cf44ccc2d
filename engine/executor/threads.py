"""How many torch threads a CPU forward uses: the cores free right now, not all of them.

torch's intra-op pool defaults to one thread per core. On a machine whose cores other
programs keep busy, a thread of the pool gets descheduled and every operator waits for
it at its barrier: the short operators of a reused prefill (a few hundred new tokens on
a cached prefix) and of decode steps suffer most (docs/benchmarks.md, "Conversations",
turn 3 profiled: at load 5 on two cores, one thread ran the reused prefill in half the
time two did). So each CPU forward counts the threads the kernel has runnable at that
moment (/proc/loadavg's fourth field, which includes the thread that reads it) and uses
the cores the others leave, at least one and at most torch's default.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

_LOADAVG = Path("/proc/loadavg")


def fitted_threads(*, default: int, cores: int, others_running: int | None) -> int:
    """Threads for one forward: the `cores` that `others_running` threads leave,
    between 1 and `default`; `default` when the others are not known."""
    if others_running is None:
        return default
    return max(1, min(default, cores - others_running))


def others_running(*, read: Callable[[], str] | None = None) -> int | None:
    """Runnable threads on the machine besides the caller, or None where the kernel
    does not say (not Linux)."""
    try:
        text = read() if read is not None else _LOADAVG.read_text(encoding="ascii")
        runnable = int(text.split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, runnable - 1)  # the count includes the thread reading it


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def fitted_to_free_cores(*, default: int) -> Iterator[int]:
    """torch's intra-op threads set to the cores free now for the block, then put
    back; yields the count used."""
    n = fitted_threads(default=default, cores=usable_cores(), others_running=others_running())
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield n
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
