"""Placements one step lower than the one in force: what an out-of-memory recovery runs
under (RAGDoll §5: KV down a tier first, then weights), and how a later re-plan is kept
from undoing it.

These are the only places besides `plan()` that decide a tensor's home; the executor
applies what they return and hands it to the PlacementOwner (owner.py), which reports it.
"""

from __future__ import annotations

import dataclasses
import math

from engine.runtime.planner.model_spec import ModelSpec
from engine.runtime.planner.placement import Placement, Tier, TierBytes

# Higher rank, farther from the compute units.
_RANK: dict[Tier, int] = {"gpu": 0, "cpu": 1, "disk": 2}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Demotion:
    """The placement to run under after an out-of-memory, and the number of layers
    whose KV lives on the host under it."""

    placement: Placement
    kv_host_layers: int


def demoted(placement: Placement, *, kv_host_layers: int, kv_first: bool) -> Demotion | None:
    """One step down: with `kv_first` (a discrete GPU), half of the KV layers still on
    the compute tier move to the host while any are left; then the later half of the
    resident layers move one tier down. None when nothing is left to move."""
    layers = len(placement.layer_tiers)
    if kv_first and kv_host_layers < layers:
        more = min(layers, kv_host_layers + max(1, (layers - kv_host_layers + 1) // 2))
        return Demotion(placement=with_host_kv(placement, host_layers=more), kv_host_layers=more)
    smaller = demoted_placement(placement)
    if smaller is None:
        return None
    return Demotion(placement=smaller, kv_host_layers=kv_host_layers)


def demoted_placement(placement: Placement) -> Placement | None:
    """`placement` with the later half (at least one) of its compute-tier layers one tier
    down; None when no layer is on the compute tier."""
    compute = placement.compute_tier
    lower: Tier = "cpu" if compute == "gpu" and placement.memory_model == "discrete" else "disk"
    resident = [i for i, t in enumerate(placement.layer_tiers) if t == compute]
    if not resident:
        return None
    move = set(resident[len(resident) // 2 :])
    tiers = tuple(lower if i in move else t for i, t in enumerate(placement.layer_tiers))
    depth = max(placement.prefetch_depth_decode, 1)
    return dataclasses.replace(
        placement,
        layer_tiers=tiers,
        prefetch_depth_prefill=min(placement.prefetch_depth_prefill, 1),
        prefetch_depth_decode=depth,
    )


def with_host_kv(placement: Placement, *, host_layers: int) -> Placement:
    """`placement` with the KV of `host_layers` layers (the last ones) off the compute
    tier: the KV bytes split so that the executor's whole-layer rounding
    (engine/runtime/executor/kv.py `host_kv_layers`) gives exactly `host_layers`."""
    kv, layers = placement.kv, len(placement.layer_tiers)
    if kv.total <= 0 or layers == 0:
        return placement
    off = min(kv.total, math.ceil(kv.total * host_layers / layers))
    disk = min(kv.disk, off)
    return dataclasses.replace(
        placement, kv=TierBytes(gpu=kv.total - off, cpu=off - disk, disk=disk)
    )


def host_kv_share(placement: Placement) -> float:
    kv = placement.kv
    return (kv.cpu + kv.disk) / kv.total if kv.total > 0 else 0.0


def no_higher_than(planned: Placement, *, floor: Placement) -> Placement:
    """`planned`, with no weight unit on a higher tier than under `floor` and no less
    KV off the compute tier: a re-plan after an out-of-memory keeps what the recovery
    moved down (the planner's estimate was what ran out)."""
    if len(planned.layer_tiers) != len(floor.layer_tiers):
        raise ValueError("placements of different models")

    def lower(a: Tier, b: Tier) -> Tier:
        return a if _RANK[a] >= _RANK[b] else b

    out = dataclasses.replace(
        planned,
        layer_tiers=tuple(
            lower(a, b) for a, b in zip(planned.layer_tiers, floor.layer_tiers, strict=True)
        ),
        embed_tier=lower(planned.embed_tier, floor.embed_tier),
        head_tier=lower(planned.head_tier, floor.head_tier),
        prefetch_depth_prefill=min(planned.prefetch_depth_prefill, floor.prefetch_depth_prefill),
    )
    share = host_kv_share(floor)
    if share > host_kv_share(out):
        out = with_host_kv(out, host_layers=round(share * len(out.layer_tiers)))
    return out


def priced(placement: Placement, *, model: ModelSpec) -> Placement:
    """`placement` with its weight bytes per tier recomputed from where each unit lives
    now (a demotion moves units but not the plan's sums)."""
    sums = {"gpu": 0, "cpu": 0, "disk": 0}
    sums[placement.embed_tier] += model.embed_bytes
    sums[placement.head_tier] += model.head_bytes + model.final_norm_bytes
    for tier, size in zip(placement.layer_tiers, model.layer_bytes, strict=True):
        sums[tier] += size
    return dataclasses.replace(placement, weights=TierBytes(**sums))
