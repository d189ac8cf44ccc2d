"""`ragdoll bench offload --device cuda`: the GPU form of the offload benchmark (issue #4).

The same four systems as the CPU form (bench/offload.py, systems in
bench/offload_systems.py), with the tiers GPU / pinned RAM / disk:

- model: a random-weight Llama big enough that moving a layer costs real time — the full
  form has Llama-3-8B's layer shape (32 layers, hidden 4096, MLP 14336, 32 heads, 8 KV
  heads) with a 32000-token vocabulary in bfloat16: 13.0 GiB of layers (416 MiB each)
  and 0.5 GiB of embedding and head; the quick form 8 such layers, ≈ 3.7 GiB;
- split: half of the layer weights off the GPU, a quarter in pinned RAM and a quarter on
  disk, interleaved (layer i: i % 4 == 1 → RAM, i % 4 == 3 → disk, else GPU) so that a
  GPU layer computes while the next off-GPU layer loads; embedding and head on the GPU.
  The executor runs the planner's Placement for this machine with these layer tiers;
- Accelerate gets a `device_map` with the same layers on 0 / "cpu" / "disk" (it keeps
  "cpu" layers in RAM and copies them to the GPU at each forward; "disk" layers it reads
  from the checkpoint's safetensors). The budget this stands for is also given in
  Accelerate's `max_memory` terms (recorded, `accelerate_max_memory`); the map is given
  explicitly because Accelerate's own map for a budget fills the tiers in module order,
  in contiguous runs, with the LM head last (so on disk): another split than the
  executor's, which would not compare like with like;
- roofline: t_bound = max(T_comp, disk bytes / disk bandwidth, (RAM + disk bytes) /
  host→device bandwidth): a disk byte crosses the disk and then the PCIe link, a RAM
  byte the link only; at best the disk, the link and the GPU all work at once. The
  host→device bandwidth is measured with pinned memory (engine/runtime/hardware/gpus.py), the
  disk's by a cold read of the disk layers' byte ranges (as the CPU form does).

The disk layers' byte ranges are evicted from the page cache before every run and after
every read of a layer, for the executor and Accelerate alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench.offload_figures import figures_of, report, sized
from bench.offload_systems import (
    GIB,
    MIB,
    Size,
    accelerate_device_map,
    cold_read_bandwidth,
    forced_placement,
    load_average,
    run_systems,
    write_model,
)
from engine.runtime.executor.checkpoint import checkpoint_files, index_checkpoint, layer_unit
from engine.runtime.hardware.gpus import measure_transfer
from engine.runtime.hardware.profile import HardwareProfile, snapshot
from engine.runtime.planner.model_spec import ModelSpec, load_model_spec
from engine.runtime.planner.placement import Placement, Tier

DTYPE = "bfloat16"
GPU_FULL = Size(layers=32, hidden=4096, intermediate=14336, heads=32, kv_heads=8, vocab=32000)
GPU_QUICK = dataclasses.replace(GPU_FULL, layers=8)


def gpu_layer_tiers(layers: int) -> tuple[Tier, ...]:
    """Half the layers off the GPU, a quarter in RAM and a quarter on disk, interleaved."""
    off: dict[int, Tier] = {1: "cpu", 3: "disk"}
    return tuple(off.get(i % 4, "gpu") for i in range(layers))


@dataclass(frozen=True, kw_only=True)
class TierSplit:
    """Weight bytes per tier under a layer split (the model's own sizes)."""

    layer_tiers: tuple[Tier, ...]
    gpu_bytes: int  # embedding, head and the GPU layers
    ram_bytes: int  # layers in pinned RAM: copied to the GPU at every forward
    disk_bytes: int  # layers on disk: read, then copied, at every forward
    largest_streamed_bytes: int  # one stream slot on the GPU

    def layers_on(self, tier: Tier) -> list[int]:
        return [i for i, t in enumerate(self.layer_tiers) if t == tier]


@dataclass(frozen=True, kw_only=True)
class GpuPlan:
    placement: Placement  # the executor's: the planner's, layer tiers forced
    split: TierSplit
    device_map: dict[str, int | str]  # Accelerate's, the same layers on the same tiers
    max_memory: dict[int | str, int]  # the same budget in Accelerate's terms


def tier_split(*, spec: ModelSpec, layer_tiers: Sequence[Tier]) -> TierSplit:
    if len(layer_tiers) != len(spec.layer_bytes):
        raise ValueError(f"{len(layer_tiers)} layer tiers for {len(spec.layer_bytes)} layers")

    def on(tier: Tier) -> int:
        return sum(b for b, t in zip(spec.layer_bytes, layer_tiers, strict=True) if t == tier)

    streamed = [b for b, t in zip(spec.layer_bytes, layer_tiers, strict=True) if t != "gpu"]
    return TierSplit(
        layer_tiers=tuple(layer_tiers),
        gpu_bytes=spec.embed_bytes + spec.head_bytes + spec.final_norm_bytes + on("gpu"),
        ram_bytes=on("cpu"),
        disk_bytes=on("disk"),
        largest_streamed_bytes=max(streamed, default=0),
    )


def gpu_plan(*, hardware: HardwareProfile, spec: ModelSpec, depth: int) -> GpuPlan:
    """Where everything goes in the GPU form, for both offloading systems."""
    if hardware.gpu is None or hardware.memory_model != "discrete":
        raise ValueError("the GPU form needs a discrete GPU (GPU / RAM / disk tiers)")
    tiers = gpu_layer_tiers(spec.num_layers)
    split = tier_split(spec=spec, layer_tiers=tiers)
    placement = forced_placement(hardware=hardware, spec=spec, layer_tiers=tiers, depth=depth)
    return GpuPlan(
        placement=placement,
        split=split,
        device_map=accelerate_device_map(layer_tiers=tiers, cuda=True),
        # The GPU holds the resident weights and the executor's stream slots (the one
        # computing and `depth` ahead); RAM holds the RAM layers.
        max_memory={
            0: split.gpu_bytes + (depth + 1) * split.largest_streamed_bytes,
            "cpu": split.ram_bytes,
        },
    )


def transfer_bound_s(*, hardware: HardwareProfile, ram_bytes: float, disk_bytes: float) -> float:
    """The least time to bring `ram_bytes` from pinned RAM and `disk_bytes` from disk to
    the GPU: the disk reads its bytes while the link carries everything. An unmeasured
    bandwidth bounds nothing (its term is left out)."""
    gpu = hardware.gpu
    h2d = gpu.h2d_bytes_per_s if gpu is not None else None
    disk = hardware.disk.read_bytes_per_s
    terms = [0.0]
    if disk:
        terms.append(disk_bytes / disk)
    if h2d:
        terms.append((ram_bytes + disk_bytes) / h2d)
    return max(terms)


def roofline_transfer(*, hardware: HardwareProfile, split: TierSplit) -> Callable[[float], float]:
    """`transfer_s(streamed bytes)` for the figures: the executor counts the bytes it
    fetched from both tiers together; they divide as the split's RAM and disk bytes."""
    streamed = split.ram_bytes + split.disk_bytes

    def transfer_s(measured: float) -> float:
        if streamed <= 0:
            return 0.0
        disk = measured * split.disk_bytes / streamed
        return transfer_bound_s(hardware=hardware, ram_bytes=measured - disk, disk_bytes=disk)

    return transfer_s


def run_gpu(args: argparse.Namespace) -> dict[str, Any]:
    if not torch.cuda.is_available():
        raise SystemExit("ragdoll bench offload --device cuda: torch sees no CUDA device")
    quick = bool(getattr(args, "quick", False))
    size = sized(args, GPU_QUICK if quick else GPU_FULL)
    tokens = args.tokens or (8 if quick else 16)
    prompt_tokens = args.prompt_tokens or (32 if quick else 128)
    batches = [int(b) for b in (args.batches or "1,8").split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)
    say: Callable[[str], None] = (lambda _: None) if args.json else print
    device = torch.device("cuda", torch.cuda.current_device())

    folder = args.folder or Path(tempfile.gettempdir()) / (
        f"ragdoll-bench-offload-gpu-{size.layers}x{size.hidden}x{size.intermediate}-{DTYPE}"
    )
    say(f"writing or reusing the random model in {folder} ...")
    model_dir = write_model(folder=folder, size=size, dtype=DTYPE)
    spec = load_model_spec(source=model_dir)
    sources = index_checkpoint(model_dir)
    tiers = gpu_layer_tiers(spec.num_layers)
    disk_sources = [s for i, t in enumerate(tiers) if t == "disk" for s in sources[layer_unit(i)]]
    # The disk at its fastest (best of a few cold reads) and the link with pinned memory.
    disk_bw = max(cold_read_bandwidth(sources=disk_sources) for _ in range(2))
    link = measure_transfer(index=device.index or 0, backend="cuda")
    hardware = _measured(snapshot(data_dir=model_dir), h2d=link["h2d_bytes_per_s"], disk=disk_bw)
    gpu = hardware.gpu
    assert gpu is not None
    planned = gpu_plan(hardware=hardware, spec=spec, depth=args.depth)
    split = planned.split
    checkpoint_bytes = sum(f.stat().st_size for f in checkpoint_files(model_dir))
    say(
        f"GPU: {gpu.name}, {gpu.total_bytes / GIB:.0f} GiB, host→device (pinned) "
        f"{(gpu.h2d_bytes_per_s or 0) / GIB:.1f} GiB/s; cold disk read {disk_bw / MIB:.0f} "
        f"MiB/s; model: random Llama, {size.layers} layers, hidden {size.hidden}, MLP "
        f"{size.intermediate}, {DTYPE}, {checkpoint_bytes / GIB:.2f} GiB; layers in RAM "
        f"{split.layers_on('cpu')} ({split.ram_bytes / GIB:.2f} GiB), on disk "
        f"{split.layers_on('disk')} ({split.disk_bytes / GIB:.2f} GiB); prompt "
        f"{prompt_tokens}, {tokens} decode tokens, batches {batches}; load average "
        f"{load_average()}"
    )
    runs = run_systems(
        model_dir=model_dir,
        placement=planned.placement,
        batches=batches,
        prompt_tokens=prompt_tokens,
        tokens=tokens,
        repeats=args.repeats,
        disk_sources=disk_sources,
        device=device,
        dtype=getattr(torch, DTYPE),
        say=say,
    )
    disk_bw = max(disk_bw, *(cold_read_bandwidth(sources=disk_sources) for _ in range(2)))
    hardware = _measured(hardware, h2d=gpu.h2d_bytes_per_s, disk=disk_bw)
    figures = figures_of(
        runs=runs,
        batches=batches,
        bandwidth=disk_bw,
        tokens=tokens,
        prompt_tokens=prompt_tokens,
        transfer_s=roofline_transfer(hardware=hardware, split=split),
    )
    offloaded = split.layers_on("cpu") + split.layers_on("disk")
    figures.update(
        {
            "model": {
                "architecture": "llama",
                "layers": size.layers,
                "hidden_size": size.hidden,
                "intermediate_size": size.intermediate,
                "vocab_size": spec.vocab_size,
                "dtype": DTYPE,
                "checkpoint_bytes": checkpoint_bytes,
                "offloaded_bytes": split.ram_bytes + split.disk_bytes,
                "offloaded_layers": sorted(offloaded),
            },
            "tiers": {
                "gpu_layers": split.layers_on("gpu"),
                "ram_layers": split.layers_on("cpu"),
                "disk_layers": split.layers_on("disk"),
                "gpu_bytes": split.gpu_bytes,
                "ram_bytes": split.ram_bytes,
                "disk_bytes": split.disk_bytes,
            },
            "accelerate_max_memory": {str(k): v for k, v in planned.max_memory.items()},
            "h2d_bytes_per_s": gpu.h2d_bytes_per_s,
            "device": "cuda",
            "gpu_name": gpu.name,
            "quick": quick,
            "prefetch_depth_decode": args.depth,
            "torch_threads": torch.get_num_threads(),
            "repeats": max(1, args.repeats),
            "machine": {
                "platform": f"{platform.system()} {platform.machine()}",
                "cpus": os.cpu_count(),
                "load_average": load_average(),
                "gpu": gpu.name,
                "gpu_total_bytes": gpu.total_bytes,
                "torch_cuda": torch.version.cuda,
            },
        }
    )
    report(figures, say=say)
    say(
        "peak GPU memory (GiB) at B="
        + ", ".join(
            f"{b}: "
            + " / ".join(
                f"{system} {figures['systems'][system][str(b)]['peak_device_bytes'] / GIB:.1f}"
                for system in figures["systems"]
            )
            for b in batches
        )
    )
    return figures


def _measured(profile: HardwareProfile, *, h2d: float | None, disk: float) -> HardwareProfile:
    gpus = tuple(
        dataclasses.replace(g, h2d_bytes_per_s=h2d) if i == 0 else g
        for i, g in enumerate(profile.gpus)
    )
    return dataclasses.replace(
        profile,
        gpus=gpus,
        disk=dataclasses.replace(profile.disk, read_bytes_per_s=disk, read_cold=True),
    )
