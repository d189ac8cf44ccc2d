"""The model side of `ragdoll bench pipeline`: which random model, where its layers live.

- CPU (the default): a small random Llama in float32 with every other layer on disk (the
  page cache dropped after each read of one), computed in RAM: retrieval and generation
  then share the same cores and the same disk;
- GPU (`--device cuda`): the paper's setting, retrieval on the CPU while generation runs
  on the GPU. The model has Llama-3-8B's layer shape in bfloat16 (8 layers, 3.3 GiB of
  layers; quick: 4) split as `bench offload --device cuda` splits it
  (bench/offload_gpu.py): half the layer weights off the GPU, a quarter in pinned
  RAM and a quarter on disk, interleaved, under the planner's Placement for this machine;
  the serial Accelerate baseline gets the same layers on 0 / "cpu" / "disk".
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench import offload_systems as offload
from bench.offload_gpu import GPU_FULL, gpu_plan
from engine.runtime.executor.checkpoint import index_checkpoint, layer_unit
from engine.runtime.hardware.profile import snapshot, synthetic_profile
from engine.runtime.planner.model_spec import load_model_spec
from engine.runtime.planner.placement import Placement, Tier

CPU_FULL = offload.Size(layers=8, hidden=512, intermediate=1408, heads=8, kv_heads=2)
CPU_QUICK = offload.Size(layers=4, hidden=256, intermediate=704, heads=4, kv_heads=2)
GPU_BENCH_FULL = dataclasses.replace(GPU_FULL, layers=8)
GPU_BENCH_QUICK = dataclasses.replace(GPU_FULL, layers=4)
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True, kw_only=True)
class BenchModel:
    """The model every system of the benchmark runs, and where its layers are."""

    model_dir: Path
    size: offload.Size
    dtype: str  # what the executor and Accelerate compute in
    device: torch.device  # where generation computes
    tiers: tuple[Tier, ...]  # per layer: "gpu" / "cpu" (RAM) / "disk"
    disk_sources: list[Any]  # the disk layers' tensors (evicted after each read)
    placement: Placement  # the executor's: the planner's, layer tiers forced

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def layers_on(self, tier: Tier) -> list[int]:
        return [i for i, t in enumerate(self.tiers) if t == tier]

    def describe(self) -> str:
        where = f"layers {self.layers_on('disk')} on disk"
        if self.device.type == "cuda":
            where = f"layers {self.layers_on('cpu')} in pinned RAM, " + where
        return (
            f"random Llama {self.size.layers} x {self.size.hidden} ({self.dtype}) on "
            f"{self.device}, {where}"
        )


def bench_model(*, device: str, quick: bool, folder: Path | None) -> BenchModel:
    """Write (or reuse) the random model for `device` and place it."""
    if device not in DEVICES:
        raise ValueError(f"--device must be one of {DEVICES}, not {device!r}")
    if device == "cuda":
        return _gpu_model(quick=quick, folder=folder)
    size = CPU_QUICK if quick else CPU_FULL
    model_dir = _write(size=size, dtype="float32", folder=folder)
    tiers: tuple[Tier, ...] = tuple("cpu" if i % 2 == 0 else "disk" for i in range(size.layers))
    placement = offload.forced_placement(
        hardware=synthetic_profile(
            gpu_bytes=0, ram_bytes=64 * offload.GIB, disk_bytes=1000 * offload.GIB
        ),
        spec=load_model_spec(source=model_dir),
        layer_tiers=tiers,
        depth=3,
    )
    return BenchModel(
        model_dir=model_dir,
        size=size,
        dtype="float32",
        device=torch.device("cpu"),
        tiers=tiers,
        disk_sources=_disk_sources(model_dir=model_dir, tiers=tiers),
        placement=placement,
    )


def _gpu_model(*, quick: bool, folder: Path | None) -> BenchModel:
    if not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device on this machine")
    size = GPU_BENCH_QUICK if quick else GPU_BENCH_FULL
    model_dir = _write(size=size, dtype="bfloat16", folder=folder)
    planned = gpu_plan(
        hardware=snapshot(data_dir=model_dir),
        spec=load_model_spec(source=model_dir),
        depth=3,
    )
    tiers = planned.split.layer_tiers
    return BenchModel(
        model_dir=model_dir,
        size=size,
        dtype="bfloat16",
        device=torch.device("cuda", torch.cuda.current_device()),
        tiers=tiers,
        disk_sources=_disk_sources(model_dir=model_dir, tiers=tiers),
        placement=planned.placement,
    )


def _write(*, size: offload.Size, dtype: str, folder: Path | None) -> Path:
    return offload.write_model(
        dtype=dtype,
        folder=folder
        or Path(tempfile.gettempdir())
        / f"ragdoll-bench-pipeline-{size.layers}x{size.hidden}x{size.intermediate}-{dtype}",
        size=size,
    )


def _disk_sources(*, model_dir: Path, tiers: tuple[Tier, ...]) -> list[Any]:
    sources = index_checkpoint(model_dir)
    return [s for i, t in enumerate(tiers) if t == "disk" for s in sources[layer_unit(i)]]
