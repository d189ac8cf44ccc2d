"""What this machine has: GPUs, RAM, the data folder's disk, CPU cores — and how fast
bytes move between them.

Counting is cheap (a snapshot on every call); measuring bandwidth is not, so the
measurements are cached as JSON in the data folder and reused while the machine's
fingerprint (GPU names and total memory, RAM total, core count, disk device) stays
the same. Free memory and free disk are always fresh because they change by the
minute.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import psutil

from engine.json_file import write_json
from engine.paths import Paths
from engine.runtime.hardware import bandwidth, gpus
from engine.runtime.hardware.cgroup import cgroup_memory
from engine.runtime.hardware.gpus import GpuInfo

CACHE_FILE_NAME = "hardware_profile.json"
CACHE_VERSION = 1
# Large enough to leave the drive's own cache behind, small enough to finish in a
# few seconds on a slow laptop disk (the measure also stops at its time budget).
DEFAULT_DISK_PROBE_BYTES = 256 * 2**20
DEFAULT_DISK_TIME_BUDGET_S = 3.0

MemoryModel = Literal["discrete", "unified", "cpu_only"]


@dataclass(frozen=True, kw_only=True)
class DiskInfo:
    path: str  # the folder measured (the data folder)
    device: str  # what the fingerprint knows the disk by
    total_bytes: int
    free_bytes: int
    read_bytes_per_s: float | None = None  # cold sequential read
    read_cold: bool = False  # True when the page cache was evicted before reading


@dataclass(frozen=True, kw_only=True)
class HardwareProfile:
    gpus: tuple[GpuInfo, ...]
    ram_total_bytes: int
    ram_available_bytes: int
    cpu_cores_logical: int
    cpu_cores_physical: int | None
    disk: DiskInfo
    platform: str
    fingerprint: str
    measured_at: float  # Unix time of the bandwidth measurements; 0.0 when not measured
    hypothetical: bool = False  # True for a machine described by flags, not this one
    # The memory cgroup's limit when it is below the machine's RAM (systemd, containers):
    # the RAM figures above are then the cgroup's. None: the machine's RAM.
    ram_limit_bytes: int | None = None
    # Reading RAM once (bandwidth.measure_ram_read); None: not measured yet.
    ram_read_bytes_per_s: float | None = None

    @property
    def gpu(self) -> GpuInfo | None:
        """The GPU the engine computes on (the first); multi-GPU is not planned for."""
        return self.gpus[0] if self.gpus else None

    @property
    def memory_model(self) -> MemoryModel:
        gpu = self.gpu
        if gpu is None:
            return "cpu_only"
        return "unified" if gpu.unified_memory else "discrete"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def profile_from_dict(data: dict[str, Any]) -> HardwareProfile:
    fields = dict(data)
    fields["gpus"] = tuple(GpuInfo(**g) for g in fields.get("gpus", ()))
    fields["disk"] = DiskInfo(**fields["disk"])
    return HardwareProfile(**fields)


def load_profile(
    *,
    paths: Paths,
    refresh: bool = False,
    measure: bool = True,
    disk_probe_bytes: int = DEFAULT_DISK_PROBE_BYTES,
    disk_time_budget_s: float = DEFAULT_DISK_TIME_BUDGET_S,
) -> HardwareProfile:
    """This machine's profile. Bandwidths come from the cache in the data folder when
    its fingerprint matches this machine and `refresh` is False; otherwise they are
    measured (when `measure`) and the cache is rewritten."""
    current = snapshot(data_dir=paths.data)
    cache_file = paths.data / CACHE_FILE_NAME
    if not refresh:
        cached = _read_cache(cache_file)
        if cached is not None and cached.fingerprint == current.fingerprint:
            if cached.ram_read_bytes_per_s is None and measure:
                # A profile cached before RAM was measured: that one figure (0.2 s).
                cached = replace(cached, ram_read_bytes_per_s=bandwidth.measure_ram_read())
                _write_cache(cache_file, cached)
            return _with_measurements(current, source=cached)
    if not measure:
        return current
    measured = measure_bandwidths(
        profile=current, disk_probe_bytes=disk_probe_bytes, disk_time_budget_s=disk_time_budget_s
    )
    _write_cache(cache_file, measured)
    return measured


def snapshot(*, data_dir: Path) -> HardwareProfile:
    """Counts only: no bandwidth measurement, nothing written. Under a memory cgroup
    limit below the machine's RAM, the RAM is the limit's (total) and what is left of it
    (available, never more than the machine's)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    memory = psutil.virtual_memory()
    ram_total, ram_available, ram_limit = memory.total, memory.available, None
    limited = cgroup_memory()
    if limited is not None and limited.limit_bytes < memory.total:
        ram_total, ram_limit = limited.limit_bytes, limited.limit_bytes
        ram_available = min(memory.available, limited.available_bytes)
    usage = shutil.disk_usage(data_dir)
    found = gpus.detect_gpus(ram_total_bytes=memory.total)
    disk = DiskInfo(
        path=str(data_dir),
        device=_disk_device(data_dir),
        total_bytes=usage.total,
        free_bytes=usage.free,
    )
    profile = HardwareProfile(
        gpus=found,
        ram_total_bytes=ram_total,
        ram_available_bytes=ram_available,
        cpu_cores_logical=os.cpu_count() or 1,
        cpu_cores_physical=psutil.cpu_count(logical=False),
        disk=disk,
        platform=f"{platform.system()} {platform.machine()}",
        fingerprint="",
        measured_at=0.0,
        ram_limit_bytes=ram_limit,
    )
    return replace(profile, fingerprint=fingerprint_of(profile))


def fingerprint_of(profile: HardwareProfile) -> str:
    """Changes when the hardware does, not when free memory does."""
    identity = {
        "gpus": [(g.name, g.backend, g.total_bytes) for g in profile.gpus],
        "ram_total": profile.ram_total_bytes,
        "cores": profile.cpu_cores_logical,
        "disk": profile.disk.device,
        "platform": profile.platform,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def measure_bandwidths(
    *,
    profile: HardwareProfile,
    disk_probe_bytes: int = DEFAULT_DISK_PROBE_BYTES,
    disk_time_budget_s: float = DEFAULT_DISK_TIME_BUDGET_S,
) -> HardwareProfile:
    """`profile` with host↔device (only when a GPU exists), cold disk read and RAM read
    measured."""
    measured_gpus = tuple(
        replace(g, **gpus.measure_transfer(index=g.index, backend=g.backend)) for g in profile.gpus
    )
    disk_result = bandwidth.measure_disk_read(
        folder=Path(profile.disk.path),
        probe_bytes=disk_probe_bytes,
        time_budget_s=disk_time_budget_s,
    )
    disk = replace(
        profile.disk,
        read_bytes_per_s=disk_result.bytes_per_s,
        read_cold=disk_result.cold,
    )
    return replace(
        profile,
        gpus=measured_gpus,
        disk=disk,
        ram_read_bytes_per_s=bandwidth.measure_ram_read(),
        measured_at=time.time(),
    )


def hypothetical_profile(
    *,
    base: HardwareProfile,
    gpu_bytes: int | None = None,
    ram_bytes: int | None = None,
    disk_bytes: int | None = None,
    unified: bool | None = None,
) -> HardwareProfile:
    """`base` with the memory the flags name: `gpu_bytes=0` removes the GPU; a GPU on a
    machine without one is a CUDA card of that size. Bandwidths are dropped for a
    changed GPU since they were measured on another card."""
    profile = base
    if gpu_bytes is not None:
        if gpu_bytes <= 0:
            profile = replace(profile, gpus=())
        else:
            old = profile.gpu
            is_unified = unified if unified is not None else bool(old and old.unified_memory)
            gpu = GpuInfo(
                index=0,
                name=f"hypothetical {gpu_bytes / 2**30:.0f} GiB GPU",
                backend="mps" if is_unified else "cuda",
                total_bytes=gpu_bytes,
                free_bytes=gpu_bytes,
                unified_memory=is_unified,
            )
            profile = replace(profile, gpus=(gpu, *profile.gpus[1:]))
    if ram_bytes is not None:
        profile = replace(
            profile, ram_total_bytes=ram_bytes, ram_available_bytes=ram_bytes, ram_limit_bytes=None
        )
    if disk_bytes is not None:
        profile = replace(
            profile, disk=replace(profile.disk, total_bytes=disk_bytes, free_bytes=disk_bytes)
        )
    if profile is base:
        return base
    return replace(profile, hypothetical=True, fingerprint=fingerprint_of(profile))


def synthetic_profile(
    *,
    gpu_bytes: int,
    ram_bytes: int,
    disk_bytes: int,
    unified: bool = False,
    cpu_cores: int = 8,
    gpu_name: str | None = None,
) -> HardwareProfile:
    """A described machine (tests, what-if plans): nothing is read from this one."""
    gpu_list: tuple[GpuInfo, ...] = ()
    if gpu_bytes > 0:
        gpu_list = (
            GpuInfo(
                index=0,
                name=gpu_name or f"{gpu_bytes / 2**30:.0f} GiB GPU",
                backend="mps" if unified else "cuda",
                total_bytes=gpu_bytes,
                free_bytes=gpu_bytes,
                unified_memory=unified,
            ),
        )
    profile = HardwareProfile(
        gpus=gpu_list,
        ram_total_bytes=ram_bytes,
        ram_available_bytes=ram_bytes,
        cpu_cores_logical=cpu_cores,
        cpu_cores_physical=cpu_cores,
        disk=DiskInfo(path="", device="synthetic", total_bytes=disk_bytes, free_bytes=disk_bytes),
        platform="synthetic",
        fingerprint="",
        measured_at=0.0,
        hypothetical=True,
    )
    return replace(profile, fingerprint=fingerprint_of(profile))


def _with_measurements(current: HardwareProfile, *, source: HardwareProfile) -> HardwareProfile:
    """Fresh counts from `current`, bandwidths from `source` (same fingerprint)."""
    by_index = {g.index: g for g in source.gpus}
    merged = []
    for g in current.gpus:
        old = by_index.get(g.index)
        if old is not None:
            g = replace(g, h2d_bytes_per_s=old.h2d_bytes_per_s, d2h_bytes_per_s=old.d2h_bytes_per_s)
        merged.append(g)
    disk = replace(
        current.disk, read_bytes_per_s=source.disk.read_bytes_per_s, read_cold=source.disk.read_cold
    )
    return replace(
        current,
        gpus=tuple(merged),
        disk=disk,
        ram_read_bytes_per_s=source.ram_read_bytes_per_s,
        measured_at=source.measured_at,
    )


def _read_cache(cache_file: Path) -> HardwareProfile | None:
    try:
        data = json.loads(cache_file.read_text(encoding="utf-8"))
        if data.get("version") != CACHE_VERSION:
            return None
        return profile_from_dict(data["profile"])
    except (OSError, ValueError, KeyError, TypeError):
        # A missing, old or damaged cache only costs a re-measure.
        return None


def _write_cache(cache_file: Path, profile: HardwareProfile) -> None:
    write_json(file=cache_file, data={"version": CACHE_VERSION, "profile": profile.as_dict()})


def _disk_device(folder: Path) -> str:
    """The device holding `folder`: the mount's device name where psutil finds it,
    else the st_dev number."""
    st_dev = os.stat(folder).st_dev
    try:
        best = None
        resolved = str(folder.resolve())
        for part in psutil.disk_partitions(all=False):
            mount = part.mountpoint
            inside = resolved == mount or resolved.startswith(mount.rstrip(os.sep) + os.sep)
            if inside and (best is None or len(mount) > len(best.mountpoint)):
                best = part
        if best is not None:
            return f"{best.device} ({best.fstype})"
    except (OSError, RuntimeError):
        pass
    return f"dev:{st_dev}"
