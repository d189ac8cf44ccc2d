"""The machine as the planner sees it (engine/runtime/planner/planner.py): each tier's
capacity, and its budget once the safety margins are kept back."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.runtime.hardware.profile import HardwareProfile
from engine.runtime.planner.placement import Tier, TierBytes

MIB = 2**20
GIB = 2**30

# Safety margins: (fraction of capacity, at least). The GPU loses memory to the CUDA
# context and allocator fragmentation; RAM to the OS, the app and the page cache
# that keeps disk reads fast; the disk to everything else that writes there.
GPU_MARGIN = (0.05, 512 * MIB)
RAM_MARGIN = (0.10, 1 * GIB)
# Under a memory cgroup's limit the OS and other programs live outside it (no 1 GiB
# floor), and the interpreter is already counted as used; a tenth of the limit is kept
# for the page cache of streamed reads and the allocator's slack, which the limit counts.
CGROUP_RAM_MARGIN_FRACTION = 0.10
DISK_MARGIN = (0.05, 2 * GIB)


@dataclass(frozen=True, kw_only=True)
class Machine:
    """What the planner may use of a machine: its tiers' capacities and budgets (the
    capacities less the safety margins), and which tier computes."""

    memory_model: str
    compute: Tier
    host: Tier | None  # the tier between compute and disk; None when compute is RAM/pool
    partition_tier: Tier
    capacities: TierBytes
    budgets: TierBytes


def _ram_budget(hardware: HardwareProfile, ram: int) -> int:
    limit = hardware.ram_limit_bytes
    if limit is None:
        return _less_margin(ram, RAM_MARGIN)
    return max(0, ram - math.ceil(limit * CGROUP_RAM_MARGIN_FRACTION))


def machine_of(hardware: HardwareProfile) -> Machine:
    ram = hardware.ram_available_bytes
    disk = hardware.disk.free_bytes
    gpu = hardware.gpu
    if gpu is None:
        caps = TierBytes(gpu=0, cpu=ram, disk=disk)
        budgets = TierBytes(
            gpu=0, cpu=_ram_budget(hardware, ram), disk=_less_margin(disk, DISK_MARGIN)
        )
        return Machine(
            memory_model="cpu_only",
            compute="cpu",
            host=None,
            partition_tier="cpu",
            capacities=caps,
            budgets=budgets,
        )
    if gpu.unified_memory:
        # One pool: the GPU's cap, but never more than the RAM free for it; the OS
        # lives in the same pool, so the RAM margin applies.
        pool = min(gpu.free_bytes, ram)
        caps = TierBytes(gpu=pool, cpu=0, disk=disk)
        budgets = TierBytes(
            gpu=_less_margin(pool, RAM_MARGIN), cpu=0, disk=_less_margin(disk, DISK_MARGIN)
        )
        return Machine(
            memory_model="unified",
            compute="gpu",
            host=None,
            partition_tier="gpu",
            capacities=caps,
            budgets=budgets,
        )
    caps = TierBytes(gpu=gpu.free_bytes, cpu=ram, disk=disk)
    budgets = TierBytes(
        gpu=_less_margin(gpu.free_bytes, GPU_MARGIN),
        cpu=_ram_budget(hardware, ram),
        disk=_less_margin(disk, DISK_MARGIN),
    )
    return Machine(
        memory_model="discrete",
        compute="gpu",
        host="cpu",
        partition_tier="cpu",
        capacities=caps,
        budgets=budgets,
    )


def _less_margin(capacity: int, margin: tuple[float, int]) -> int:
    fraction, at_least = margin
    # Round the margin up so that a budget never exceeds capacity·(1 − fraction).
    return max(0, capacity - max(math.ceil(capacity * fraction), at_least))
