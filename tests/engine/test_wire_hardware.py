"""The /v1/hardware shapes cross the wire and come back equal."""

from __future__ import annotations

from engine.wire import from_json_dict, to_json_dict
from engine.wire_hardware import (
    FitSummary,
    GpuSummary,
    HardwareInfo,
    HardwareSummary,
    IndexUsage,
    PlacementSummary,
    TierSizes,
)


def test_hardware_info_round_trips() -> None:
    tiers = TierSizes(gpu=1, cpu=2, disk=3)
    info = HardwareInfo(
        profile=HardwareSummary(
            platform="linux",
            gpus=[
                GpuSummary(
                    index=0,
                    name="g",
                    backend="cuda",
                    total_bytes=8,
                    free_bytes=4,
                    unified_memory=False,
                )
            ],
            ram_total_bytes=16,
            ram_available_bytes=8,
            cpu_cores_logical=2,
            cpu_cores_physical=None,
            disk_path="/",
            disk_total_bytes=100,
            disk_free_bytes=50,
            disk_read_bytes_per_s=None,
            fingerprint="f",
        ),
        placement=PlacementSummary(
            model="m",
            fits=True,
            message="",
            memory_model="cpu_only",
            batch=2,
            weights=tiers,
            kv=tiers,
            workspace=tiers,
            partitions=tiers,
            resident_partitions=3,
            capacities=tiers,
            budgets=tiers,
            used=tiers,
        ),
        fit=FitSummary(
            a=1.0,
            c=0.5,
            r2=0.9,
            samples=[[1.0, 0.2]],
            retrieval_samples=[],
            batch=2,
            resident_partitions=3,
            model="m",
            measured_at=0.0,
        ),
        index=IndexUsage(chunks=5, disk_bytes=6, resident_bytes=7),
    )
    assert from_json_dict(HardwareInfo, to_json_dict(info)) == info
