"""What `GET /v1/hardware` answers: the profile, the placement for the chosen model,
and the stored active-profile fit, as wire values.

Kept apart from the server so that the conversion from planner values to wire values
is testable without HTTP, and the wire module needs no planner import.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.paths import Paths
from engine.runtime.hardware.profile import HardwareProfile, load_profile
from engine.runtime.planner.placement import (
    DEFAULT_PARTITION_COUNT,
    DEFAULT_VECTOR_DIM,
    Placement,
    StoreSpec,
    TierBytes,
    Workload,
)
from engine.runtime.planner.profiling import ProfileResult, load_current_profile
from engine.wire_hardware import (
    FitSummary,
    GpuSummary,
    HardwareInfo,
    HardwareSummary,
    IndexUsage,
    PlacementSummary,
    TierSizes,
)


def hardware_info(
    *,
    paths: Paths,
    model: str | None,
    chunks: int,
    vector_dim: int | None = None,
    in_force: Placement | None = None,
    index: IndexUsage | None = None,
) -> HardwareInfo:
    """The first call on a machine measures disk bandwidth (seconds); later ones
    reuse the cached measurements. `in_force`: the placement the loaded model runs
    under (its owner's), shown instead of a fresh plan."""
    hardware = load_profile(paths=paths)
    fit = load_current_profile(
        data_dir=paths.data,
        model_id=model,
        hardware_fingerprint=hardware.fingerprint,
        collection_chunks=chunks,
    )
    store = store_spec(chunks=chunks, vector_dim=vector_dim or DEFAULT_VECTOR_DIM)
    placement, note = None, None
    if model is None:
        note = "Extractive answers: no language model to place."
    else:
        if chunks <= 0:
            note = "No documents yet: the index is planned at a default size."
        try:
            if in_force is not None:
                placement = placement_summary(in_force, model=Path(model).name or model)
            else:
                placement = _plan_for(model=model, hardware=hardware, store=store, fit=fit)
        except (OSError, ValueError) as e:  # UnsupportedArchitectureError is a ValueError
            note = f"No placement for {model}: {e}"
    return HardwareInfo(
        profile=hardware_summary(hardware),
        placement=placement,
        fit=fit_summary(fit) if fit else None,
        note=note,
        index=index,
    )


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under `folder` (0 when it is missing); a file that
    vanishes while counting (LanceDB compacts in the background) counts 0."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def store_spec(*, chunks: int, vector_dim: int, row_bytes: int | None = None) -> StoreSpec:
    """The index as the planner sees it, in the default partition count: each
    chunk `row_bytes` resident (the store's IVF view says, once built), else a
    float32 vector."""
    if chunks <= 0:
        return StoreSpec.default()
    per_row = row_bytes or vector_dim * 4
    return StoreSpec.from_index(
        index_bytes=chunks * per_row,
        partition_count=DEFAULT_PARTITION_COUNT,
        vector_dim=vector_dim,
        row_bytes=per_row,
    )


def _plan_for(
    *, model: str, hardware: HardwareProfile, store: StoreSpec, fit: ProfileResult | None
) -> PlacementSummary:
    from engine.runtime.models.resolve import resolve_model_path
    from engine.runtime.planner.owner import PlacementRequest, plan_model
    from engine.runtime.planner.stored import load_held_spec

    spec = load_held_spec(source=resolve_model_path(model=model))
    # The fitted batch when there is one: that is the batch the engine will run.
    workload = Workload(batch=fit.batch) if fit and fit.generation else Workload()
    placement = plan_model(
        PlacementRequest(
            model=spec,
            hardware=hardware,
            store=store,
            batch=workload.batch,
            context_tokens=workload.context_tokens,
        )
    )
    return placement_summary(placement, model=Path(model).name or model)


def placement_summary(p: Placement, *, model: str) -> PlacementSummary:
    pool = "gpu" if p.memory_model == "unified" else "cpu"
    return PlacementSummary(
        model=model,
        fits=p.fits,
        message=p.message,
        memory_model=p.memory_model,
        batch=p.batch,
        weights=_sizes(p.weights),
        kv=_sizes(p.kv),
        workspace=TierSizes(**{p.compute_tier: p.workspace_bytes}),
        partitions=TierSizes(**{pool: p.resident_partition_bytes}),
        resident_partitions=p.resident_partitions,
        capacities=_sizes(p.capacities),
        budgets=_sizes(p.budgets),
        used=_sizes(p.used),
    )


def hardware_summary(h: HardwareProfile) -> HardwareSummary:
    return HardwareSummary(
        platform=h.platform,
        gpus=[
            GpuSummary(
                index=g.index,
                name=g.name,
                backend=g.backend,
                total_bytes=g.total_bytes,
                free_bytes=g.free_bytes,
                unified_memory=g.unified_memory,
                h2d_bytes_per_s=g.h2d_bytes_per_s,
            )
            for g in h.gpus
        ],
        ram_total_bytes=h.ram_total_bytes,
        ram_available_bytes=h.ram_available_bytes,
        cpu_cores_logical=h.cpu_cores_logical,
        cpu_cores_physical=h.cpu_cores_physical,
        disk_path=h.disk.path,
        disk_total_bytes=h.disk.total_bytes,
        disk_free_bytes=h.disk.free_bytes,
        disk_read_bytes_per_s=h.disk.read_bytes_per_s,
        fingerprint=h.fingerprint,
    )


def fit_summary(r: ProfileResult) -> FitSummary:
    g = r.generation
    return FitSummary(
        a=g.a if g else None,
        c=g.c if g else None,
        r2=g.r2 if g else None,
        samples=[[float(b), t] for b, t in g.samples] if g else [],
        retrieval_samples=[[float(p), t] for p, t in r.retrieval.samples] if r.retrieval else [],
        batch=r.batch,
        resident_partitions=r.resident_partitions,
        model=r.model_id,
        measured_at=r.measured_at,
        notes=list(r.notes),
    )


def _sizes(t: TierBytes) -> TierSizes:
    return TierSizes(gpu=t.gpu, cpu=t.cpu, disk=t.disk)
