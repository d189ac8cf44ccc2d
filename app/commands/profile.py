"""`ragdoll profile`: this machine's GPUs, RAM, disk and measured bandwidths.

Measurements are cached in the data folder and reused until the hardware changes;
`--refresh` measures again.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.hardware.profile import HardwareProfile


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "profile",
        help="show this machine's GPUs, memory, disk and measured bandwidths",
        description=__doc__,
    )
    p.add_argument("--json", action="store_true", help="print the profile as JSON")
    p.add_argument("--refresh", action="store_true", help="measure again, ignoring the cache")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.hardware.profile import load_profile
    from engine.paths import resolve_paths

    try:
        profile = load_profile(paths=resolve_paths(), refresh=args.refresh)
    except OSError as e:
        print(f"ragdoll profile: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(profile.as_dict(), indent=2))
    else:
        print(render(profile))
    return 0


def render(profile: HardwareProfile) -> str:
    from engine.planner.sizes import format_gib

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
