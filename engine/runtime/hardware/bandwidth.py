"""Cold sequential read bandwidth of the disk under a folder.

Offloaded weights and paged index partitions are read from disk once per use, so
the figure that matters is a read that misses the page cache. We write a probe
file, fsync it, ask the kernel to drop its pages (POSIX_FADV_DONTNEED; F_NOCACHE on
macOS), then time reading it back. Where neither exists the result says `cold=False`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_CHUNK = 4 * 2**20
# Fewer bytes than this make the timing meaningless (one request, one seek).
_MIN_MEASURED_BYTES = 4 * 2**20


@dataclass(frozen=True, kw_only=True)
class DiskRead:
    bytes_per_s: float | None
    cold: bool  # the page cache was evicted before reading
    bytes_read: int
    seconds: float


def measure_disk_read(*, folder: Path, probe_bytes: int, time_budget_s: float) -> DiskRead:
    """Write `probe_bytes` (rounded to 4 MiB) under `folder` and time reading them cold.

    Writing and reading each stop at half of `time_budget_s`, so a slow disk is
    measured on fewer bytes rather than holding the caller up. The probe file is
    always removed. An unwritable folder gives `bytes_per_s=None`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd, name = tempfile.mkstemp(prefix=".ragdoll-disk-probe-", dir=folder)
    except OSError:
        return DiskRead(bytes_per_s=None, cold=False, bytes_read=0, seconds=0.0)
    path = Path(name)
    try:
        written = _write_probe(fd, probe_bytes=probe_bytes, time_budget_s=time_budget_s / 2)
        os.fsync(fd)
        cold = _drop_cache(fd)
        os.close(fd)
        fd = -1
        return _read_probe(path, limit=written, time_budget_s=time_budget_s / 2, cold=cold)
    except OSError:
        return DiskRead(bytes_per_s=None, cold=False, bytes_read=0, seconds=0.0)
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()


def _write_probe(fd: int, *, probe_bytes: int, time_budget_s: float) -> int:
    # Random bytes defeat compressing and deduplicating filesystems; one random
    # chunk written repeatedly costs no CPU time per byte.
    block = os.urandom(_CHUNK)
    written = 0
    deadline = time.perf_counter() + time_budget_s
    target = max(probe_bytes, _CHUNK)
    while written < target and (written < _MIN_MEASURED_BYTES or time.perf_counter() < deadline):
        written += os.write(fd, block)
    return written


def _drop_cache(fd: int) -> bool:
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    return False


def _read_probe(path: Path, *, limit: int, time_budget_s: float, cold: bool) -> DiskRead:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        if cold:
            # Drop again from the reading descriptor: some kernels keep pages that
            # were dirty at the first call.
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        else:
            cold = _set_no_cache(fd)
        read = 0
        start = time.perf_counter()
        deadline = start + time_budget_s
        while read < limit:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            read += len(chunk)
            if read >= _MIN_MEASURED_BYTES and time.perf_counter() > deadline:
                break
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
    rate = read / seconds if seconds > 0 and read else None
    return DiskRead(bytes_per_s=rate, cold=cold, bytes_read=read, seconds=seconds)


def _set_no_cache(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:
        return False
    no_cache = getattr(fcntl, "F_NOCACHE", None)
    if no_cache is None:
        return False
    try:
        fcntl.fcntl(fd, no_cache, 1)
    except OSError:
        return False
    return True


def measure_ram_read(*, probe_bytes: int = 256 * 2**20, repeats: int = 3) -> float:
    """Bytes/s of reading `probe_bytes` of RAM once (float32 sums, one slice per physical
    core, as many as the executor's torch threads), best of `repeats`: what a decode step
    that reads every weight once from RAM can go at. About 0.1 s. numpy's sums let go of
    the GIL, so the threads read their slices at once; torch is not imported for this
    (1.2 CPU-s and 180 MB of an engine's first start, which may not need it). On this
    project's 2-core machine, five runs each alternated with torch's sum of the same
    bytes (the figure before): medians 13.6 against 16.4 GB/s, and 27.5 against 21.4 at
    a lighter load: the same figure within the machine's noise."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import psutil

    probe = np.ones(max(1, probe_bytes // 4), dtype=np.float32)  # pages faulted in here
    slices = np.array_split(probe, max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1))
    best = float("inf")
    with ThreadPoolExecutor(max_workers=len(slices)) as pool:
        list(pool.map(np.sum, slices))  # the threads started before timing
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            list(pool.map(np.sum, slices))
            best = min(best, time.perf_counter() - start)
    return probe.size * 4 / best
