"""The machine as the planner sees it: capacities, and budgets after the margins."""

import dataclasses
import math

from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.planner.machine import (
    CGROUP_RAM_MARGIN_FRACTION,
    DISK_MARGIN,
    RAM_MARGIN,
    machine_of,
)

GIB = 2**30


def test_a_cpu_only_machine_computes_in_ram_with_its_margins_kept_back() -> None:
    m = machine_of(synthetic_profile(gpu_bytes=0, ram_bytes=16 * GIB, disk_bytes=100 * GIB))
    assert (m.memory_model, m.compute, m.host) == ("cpu_only", "cpu", None)
    assert m.capacities.cpu == 16 * GIB
    assert m.budgets.cpu == 16 * GIB - max(math.ceil(16 * GIB * RAM_MARGIN[0]), RAM_MARGIN[1])
    assert m.budgets.disk == 100 * GIB - max(math.ceil(100 * GIB * DISK_MARGIN[0]), DISK_MARGIN[1])


def test_under_a_cgroup_a_tenth_of_the_limit_is_kept_back() -> None:
    limit = 909 * 2**20
    hw = dataclasses.replace(
        synthetic_profile(gpu_bytes=0, ram_bytes=16 * GIB, disk_bytes=100 * GIB),
        ram_available_bytes=454 * 2**20,
        ram_limit_bytes=limit,
    )
    m = machine_of(hw)
    assert m.budgets.cpu == 454 * 2**20 - math.ceil(limit * CGROUP_RAM_MARGIN_FRACTION)


def test_a_discrete_gpu_computes_with_ram_as_its_host_tier() -> None:
    m = machine_of(synthetic_profile(gpu_bytes=8 * GIB, ram_bytes=16 * GIB, disk_bytes=100 * GIB))
    tiers = (m.memory_model, m.compute, m.host, m.partition_tier)
    assert tiers == ("discrete", "gpu", "cpu", "cpu")
    assert 0 < m.budgets.gpu < m.capacities.gpu
