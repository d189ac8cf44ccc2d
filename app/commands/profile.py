"""`ragdoll profile`: this machine's GPUs, RAM, disk and measured bandwidths.

Measurements are cached in the data folder and reused until the hardware changes;
`--refresh` measures again. `--active` times generation batches and index searches
(RAGDoll §4.4), fits T(B) = a·B^c and stores the balanced batch size and resident
partitions; plain `ragdoll profile` then shows that fit too.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.runtime.hardware.profile import HardwareProfile
    from engine.runtime.planner.profiling import ProfileResult


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile",
        help="show this machine's GPUs, memory, disk and measured bandwidths",
        description=__doc__,
    )
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.add_argument("--refresh", action="store_true", help="measure again, ignoring the cache")
    p.add_argument(
        "--active",
        action="store_true",
        help="time generation and retrieval with the chosen model and index, and fit them",
    )
    p.add_argument(
        "--budget", type=float, default=120.0, metavar="SECONDS", help="time budget (120)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.paths import resolve_paths
    from engine.runtime.hardware.profile import load_profile
    from engine.runtime.planner.profiling import load_saved_profile

    paths = resolve_paths()
    if args.active:
        return run_active(args)
    try:
        profile = load_profile(paths=paths, refresh=args.refresh)
    except OSError as e:
        print(f"ragdoll profile: {e}", file=sys.stderr)
        return 1
    fit = load_saved_profile(data_dir=paths.data)
    if args.json:
        print(json.dumps({**profile.as_dict(), "fit": fit.as_dict() if fit else None}, indent=2))
    else:
        print(render(profile))
        if fit is not None:
            print(render_fit(fit))
    return 0


def run_active(args: argparse.Namespace) -> int:
    from engine.errors import ModelLoadError
    from engine.paths import resolve_paths
    from engine.service.profiling.samplers import profile_in_process

    def progress(message: str, fraction: float) -> None:
        # One line rewritten in place; stderr so that --json output stays clean.
        print(f"\r{fraction:4.0%} {message:<60}", end="", file=sys.stderr, flush=True)

    try:
        result = profile_in_process(paths=resolve_paths(), progress=progress, budget_s=args.budget)
    except (ModelLoadError, OSError, ValueError) as e:
        print(f"\nragdoll profile: {e}", file=sys.stderr)
        return 1
    print(file=sys.stderr)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    else:
        print(render_fit(result))
    return 0


def render_fit(result: ProfileResult) -> str:
    import time

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(result.measured_at))
    model = result.model_id or "no model (extractive)"
    lines = [
        f"active profile ({when}, {model}, {result.collection_chunks} chunks, "
        f"{result.elapsed_s:.1f} s):"
    ]
    g = result.generation
    if g is not None:
        points = ", ".join(f"B={b}: {t:.3f} s" for b, t in g.samples)
        lines.append(f"  generation T(B) = {g.a:.4f}·B^{g.c:.3f} (R² {g.r2:.3f}); {points}")
    r = result.retrieval
    if r is not None:
        points = ", ".join(f"P={p}: {t:.3f} s" for p, t in r.samples)
        lines.append(
            f"  retrieval t(P) = {r.intercept:.4f} {r.slope:+.4f}·P (R² {r.r2:.3f}); {points}"
        )
    lines.append(
        f"  chosen: batch {result.batch}, {result.resident_partitions} resident partitions "
        f"(for {result.rate_qps:g} questions/s)"
    )
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)


def render(profile: HardwareProfile) -> str:
    from engine.runtime.planner.sizes import format_gib

    def rate(value: float | None) -> str:
        return f"{value / 1e9:.2f} GB/s" if value else "not measured"

    lines = [
        f"platform: {profile.platform}, {profile.cpu_cores_logical} logical cores"
        + (f" ({profile.cpu_cores_physical} physical)" if profile.cpu_cores_physical else "")
    ]
    if not profile.gpus:
        lines.append("GPU: none (RAM is the compute tier, disk the offload tier)")
    for g in profile.gpus:
        link = ""
        if g.pcie_generation:
            link = f", PCIe gen {g.pcie_generation} x{g.pcie_width or '?'}"
        pool = " (unified memory)" if g.unified_memory else ""
        lines.append(
            f"GPU {g.index}: {g.name}{pool}, {format_gib(g.free_bytes)} free of "
            f"{format_gib(g.total_bytes)}{link}; host→device {rate(g.h2d_bytes_per_s)}, "
            f"device→host {rate(g.d2h_bytes_per_s)}"
        )
    lines.append(
        f"RAM: {format_gib(profile.ram_available_bytes)} available of "
        f"{format_gib(profile.ram_total_bytes)}"
    )
    d = profile.disk
    cold = "cold" if d.read_cold else "page cache not evicted"
    lines.append(
        f"disk ({d.device}, {d.path}): {format_gib(d.free_bytes)} free of "
        f"{format_gib(d.total_bytes)}; sequential read {rate(d.read_bytes_per_s)} ({cold})"
    )
    return "\n".join(lines)
