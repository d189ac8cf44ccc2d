"""`ragdoll plan`: where a model's weights, KV cache and the index would live.

Plans for this machine, or for a described one (`--gpu-mem 24GB --ram 256GB`). The
model is a folder with config.json, a config.json, or the name of a bundled config
(resources/model_configs, e.g. `llama-3.1-8b`); no weights are read. Exit code 0
when the plan fits, 1 when it does not (the reason is printed), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.runtime.hardware.profile import HardwareProfile
    from engine.runtime.planner.model_spec import ModelSpec
    from engine.runtime.planner.placement import Placement, StoreSpec

_BUNDLED_CONFIGS = Path(__file__).resolve().parents[2] / "resources" / "model_configs"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="show where a model and the index would live in GPU memory, RAM and disk",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, metavar="PATH_OR_CONFIG_JSON")
    p.add_argument("--gpu-mem", metavar="SIZE", help="GPU memory (0: no GPU), e.g. 24GB, 12GiB")
    p.add_argument("--ram", metavar="SIZE", help="RAM for RAGDoll, e.g. 64GB")
    p.add_argument("--disk", metavar="SIZE", help="free disk for offloading, e.g. 500GB")
    p.add_argument("--unified", action="store_true", help="the GPU shares RAM (Apple)")
    p.add_argument("--batch", type=int, default=4, metavar="B", help="generation batch (4)")
    p.add_argument(
        "--context",
        type=int,
        default=2048,
        metavar="TOKENS",
        help="tokens per sequence, prompt + output (2048)",
    )
    p.add_argument(
        "--retrieval-batch", type=int, default=8, metavar="N", help="questions per search (8)"
    )
    p.add_argument("--dtype", help="weight dtype instead of the config's (bfloat16, float16, …)")
    p.add_argument("--index-size", metavar="SIZE", help="vector index size (default: a small one)")
    p.add_argument("--partitions", type=int, default=8, metavar="N", help="index partitions (8)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.errors import UnsupportedArchitectureError
    from engine.runtime.planner import StoreSpec, Workload, parse_size, plan
    from engine.runtime.planner.stored import load_held_spec

    try:
        model = load_held_spec(source=_model_source(args.model), dtype=args.dtype)
        hardware = _hardware(args)
        if args.index_size:
            store = StoreSpec.from_index(
                index_bytes=parse_size(args.index_size), partition_count=args.partitions
            )
        else:
            store = StoreSpec.default()
        workload = Workload(
            batch=args.batch, context_tokens=args.context, retrieval_batch=args.retrieval_batch
        )
    except (UnsupportedArchitectureError, ValueError, OSError) as e:
        print(f"ragdoll plan: {e}", file=sys.stderr)
        return 2
    placement = plan(hardware=hardware, model=model, store=store, workload=workload)
    if args.json:
        print(
            json.dumps(
                {
                    "model": {
                        "name": model.name,
                        "dtype": model.dtype,
                        "weight_bytes": model.weight_bytes,
                        "layers": model.num_layers,
                        "kv_bytes_per_token": model.kv_bytes_per_token,
                    },
                    "machine": {
                        "hypothetical": hardware.hypothetical,
                        "gpu": hardware.gpu.name if hardware.gpu else None,
                    },
                    **placement.as_dict(),
                },
                indent=2,
            )
        )
    else:
        print(render(placement=placement, model=model, hardware=hardware, store=store))
    return 0 if placement.fits else 1


def render(
    *, placement: Placement, model: ModelSpec, hardware: HardwareProfile, store: StoreSpec
) -> str:
    """The plan as a readable table in GiB."""
    from engine.runtime.planner.sizes import format_gib

    p = placement
    where = "a described machine" if hardware.hypothetical else "this machine"
    gpu = hardware.gpu
    kind = {
        "discrete": f"GPU: {gpu.name}" if gpu else "GPU",
        "unified": "unified memory (GPU and RAM are one pool)",
        "cpu_only": "no GPU: RAM computes, disk holds the overflow",
    }[p.memory_model]
    lines = [
        f"Plan for {model.name} ({model.dtype}, {format_gib(model.weight_bytes)} of weights, "
        f"{model.num_layers} layers) on {where}: {kind}",
        "",
        f"{'':18}{'GPU':>12}{'RAM':>12}{'disk':>12}",
    ]

    def row(label: str, gpu_b: int | None, cpu_b: int | None, disk_b: int | None) -> str:
        cells = [format_gib(v) if v is not None else "-" for v in (gpu_b, cpu_b, disk_b)]
        return f"{label:18}" + "".join(f"{c:>12}" for c in cells)

    pool = "gpu" if p.memory_model == "unified" else "cpu"
    parts = {"gpu": None, "cpu": None, pool: p.resident_partition_bytes}
    work_tier = {"gpu": None, "cpu": None, p.compute_tier: p.workspace_bytes}
    lines += [
        row("capacity", *p.capacities.as_dict().values()),
        row("usable (margin)", *p.budgets.as_dict().values()),
        row("weights", *p.weights.as_dict().values()),
        row("KV cache", *p.kv.as_dict().values()),
        row("workspace H(B)", work_tier["gpu"], work_tier["cpu"], None),
        row("index partitions", parts["gpu"], parts["cpu"], None),
        row("peak use", *p.used.as_dict().values()),
        "",
        "layers: "
        + ", ".join(
            f"{first}–{last - 1} {_tier_name(tier)}" for tier, first, last in p.layer_ranges()
        )
        + f"; embedding {_tier_name(p.embed_tier)}; LM head {_tier_name(p.head_tier)}",
        f"batch {p.batch} × {p.context_tokens} tokens; largest batch {p.max_batch}; "
        f"largest retrieval batch {p.max_retrieval_batch}",
        f"prefetch depth: prefill {p.prefetch_depth_prefill}, decode {p.prefetch_depth_decode} "
        f"layers (stream slot {format_gib(p.stream_slot_bytes, digits=2)})",
        f"index: {p.resident_partitions} of {store.partition_count} partitions resident "
        f"({format_gib(store.partition_bytes, digits=2)} each)",
        "fits: yes" if p.fits else f"fits: NO. {p.message}",
    ]
    return "\n".join(lines)


def _tier_name(tier: str) -> str:
    return {"gpu": "GPU", "cpu": "RAM", "disk": "disk"}[tier]


def _model_source(text: str) -> Path:
    path = Path(text).expanduser()
    if path.exists():
        return path
    bundled = _BUNDLED_CONFIGS / f"{text.removesuffix('.json')}.json"
    if bundled.is_file():
        return bundled
    names = ", ".join(sorted(p.stem for p in _BUNDLED_CONFIGS.glob("*.json")))
    raise FileNotFoundError(f"no model config at {text} (bundled configs: {names})")


def _hardware(args: argparse.Namespace) -> HardwareProfile:
    from engine.runtime.hardware.profile import (
        hypothetical_profile,
        load_profile,
        synthetic_profile,
    )
    from engine.runtime.planner.sizes import parse_size

    gpu = parse_size(args.gpu_mem) if args.gpu_mem is not None else None
    ram = parse_size(args.ram) if args.ram is not None else None
    disk = parse_size(args.disk) if args.disk is not None else None
    if gpu is not None and ram is not None and disk is not None:
        # Fully described: nothing about this machine is needed (and torch stays unloaded).
        return synthetic_profile(
            gpu_bytes=gpu, ram_bytes=ram, disk_bytes=disk, unified=args.unified
        )
    from engine.paths import resolve_paths

    # Planning reads no bandwidths, so never start a measurement here.
    base = load_profile(paths=resolve_paths(), measure=False)
    return hypothetical_profile(
        base=base, gpu_bytes=gpu, ram_bytes=ram, disk_bytes=disk, unified=args.unified or None
    )
