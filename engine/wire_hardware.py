"""The wire shapes of /v1/hardware: the machine, where the model and the index live
(the planner's placement), the stored active-profile fit, and what the index takes now.

Part of the wire contract (engine/wire.py): frozen dataclasses, turned into JSON with
`to_json_dict` and back with `from_json_dict`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class GpuSummary:
    index: int
    name: str
    backend: str  # "cuda" or "mps"
    total_bytes: int
    free_bytes: int
    unified_memory: bool
    h2d_bytes_per_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class HardwareSummary:
    platform: str
    gpus: list[GpuSummary]
    ram_total_bytes: int
    ram_available_bytes: int
    cpu_cores_logical: int
    cpu_cores_physical: int | None
    disk_path: str
    disk_total_bytes: int
    disk_free_bytes: int
    disk_read_bytes_per_s: float | None  # None until measured
    fingerprint: str


@dataclass(frozen=True, kw_only=True)
class TierSizes:
    """Bytes per tier: "gpu" (the GPU, or the unified pool), "cpu" (RAM), "disk"."""

    gpu: int = 0
    cpu: int = 0
    disk: int = 0


@dataclass(frozen=True, kw_only=True)
class PlacementSummary:
    model: str
    fits: bool
    message: str
    memory_model: str  # "discrete" | "unified" | "cpu_only"
    batch: int
    weights: TierSizes
    kv: TierSizes
    workspace: TierSizes  # H(B) on the compute tier
    partitions: TierSizes  # resident index partitions (RAM, or the unified pool)
    resident_partitions: int
    capacities: TierSizes
    budgets: TierSizes
    used: TierSizes


@dataclass(frozen=True, kw_only=True)
class FitSummary:
    """The stored active profile: T(B) = a·B^c over the timed (B, seconds) points."""

    a: float | None  # None when generation was not fitted (extractive mode)
    c: float | None
    r2: float | None
    samples: list[list[float]]  # [[batch, seconds], ...]
    retrieval_samples: list[list[float]]  # [[resident partitions, seconds], ...]
    batch: int
    resident_partitions: int
    model: str | None
    measured_at: float
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class IndexUsage:
    """What the collection's index takes now, measured (not planned)."""

    chunks: int
    disk_bytes: int  # the index folder's files (LanceDB tables, IVF view, full-text index)
    resident_bytes: int  # held in memory for search: resident partitions and LanceDB caches


@dataclass(frozen=True, kw_only=True)
class HardwareInfo:
    profile: HardwareSummary
    placement: PlacementSummary | None  # None in extractive mode
    fit: FitSummary | None  # None until `ragdoll profile --active` has run
    note: str | None = None  # why there is no placement, in words
    index: IndexUsage | None = None  # None from an engine that does not say
