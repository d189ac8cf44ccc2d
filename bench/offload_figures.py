"""The offload benchmark's figures from its timed runs, and their report: shared by the
CPU form (bench/offload.py) and the GPU form (bench/offload_gpu.py)."""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Callable
from typing import Any

from bench.offload_systems import SYSTEMS, Run, Size


def sized(args: argparse.Namespace, base: Size) -> Size:
    """`base` with the --layers / --hidden / --intermediate overrides."""
    size = dataclasses.replace(
        base,
        layers=args.layers or base.layers,
        hidden=args.hidden or base.hidden,
        intermediate=args.intermediate or base.intermediate,
    )
    if size.hidden % size.heads:
        size = dataclasses.replace(size, heads=4, kv_heads=2)
    return size


def figures_of(
    *,
    runs: dict[tuple[str, int], list[Run]],
    batches: list[int],
    bandwidth: float,
    tokens: int,
    prompt_tokens: int,
    transfer_s: Callable[[float], float] | None = None,
) -> dict[str, Any]:
    """`transfer_s(streamed bytes)`: the least time to move them (default: at `bandwidth`,
    the disk's; the GPU form passes its two-tier bound)."""

    def med(system: str, batch: int, key: Callable[[Run], float]) -> float:
        return statistics.median(key(r) for r in runs[(system, batch)])

    per: dict[str, dict[str, dict[str, float]]] = {}
    for system in SYSTEMS:
        per[system] = {
            str(b): {
                "decode_tok_s": med(system, b, lambda r: r.decode_tok_s),
                "prefill_tok_s": med(system, b, lambda r: r.prefill_tok_s),
                "decode_s": med(system, b, lambda r: r.decode_s),
                "prefill_s": med(system, b, lambda r: r.prefill_s),
                "load_s": med(system, b, lambda r: r.load_s),
                "peak_device_bytes": med(system, b, lambda r: r.peak_device_bytes),
            }
            for b in batches
        }
    b1, bmax = batches[0], batches[-1]
    overlap: dict[str, float] = {}
    roofline: dict[str, float] = {}
    for b in batches:
        t = med("executor", b, lambda r: r.decode_s)
        t_comp = med("executor_resident", b, lambda r: r.decode_s)
        t_xfer = med("executor", b, lambda r: r.copy_busy_s)
        overlap[str(b)] = (t_xfer + t_comp - t) / max(min(t_xfer, t_comp), 1e-9)
        streamed = med("executor", b, lambda r: r.streamed_bytes)
        if transfer_s is not None:
            t_bound = max(t_comp, transfer_s(streamed))
        else:
            t_bound = max(t_comp, streamed / bandwidth) if bandwidth > 0 else t_comp
        roofline[str(b)] = t_bound / t
    ex = per["executor"]
    acc = per["accelerate"]
    reference = {b: runs[("resident", b)][0].tokens for b in batches}
    return {
        "systems": per,
        "batches": batches,
        "decode_tokens": tokens,
        "prompt_tokens": prompt_tokens,
        "disk_read_bytes_per_s": bandwidth,
        "speedup_vs_accelerate_b1": ex[str(b1)]["decode_tok_s"] / acc[str(b1)]["decode_tok_s"],
        "speedup_vs_accelerate_bmax": ex[str(bmax)]["decode_tok_s"]
        / acc[str(bmax)]["decode_tok_s"],
        "prefill_speedup_vs_accelerate_b1": ex[str(b1)]["prefill_tok_s"]
        / acc[str(b1)]["prefill_tok_s"],
        "fraction_of_resident_b1": ex[str(b1)]["decode_tok_s"]
        / per["resident"][str(b1)]["decode_tok_s"],
        "overlap_efficiency": overlap[str(b1)],
        "overlap_efficiency_by_batch": overlap,
        "roofline_efficiency": roofline[str(b1)],
        "roofline_efficiency_by_batch": roofline,
        "batch_amortization": ex[str(bmax)]["decode_tok_s"] / (bmax * ex[str(b1)]["decode_tok_s"]),
        "batch_speedup": ex[str(bmax)]["decode_tok_s"] / ex[str(b1)]["decode_tok_s"],
        "tokens_match_reference": all(
            r.tokens == reference[b]
            for system in ("executor", "executor_resident")
            for b in batches
            for r in runs[(system, b)]
        ),
        "accelerate_tokens_match_reference": all(
            r.tokens == reference[b] for b in batches for r in runs[("accelerate", b)]
        ),
    }


def report(f: dict[str, Any], *, say: Callable[[str], None]) -> None:
    b1, bmax = f["batches"][0], f["batches"][-1]
    say("median decode / prefill tok/s:")
    for system, by_batch in f["systems"].items():
        cells = ", ".join(
            f"B={b}: {v['decode_tok_s']:.2f} / {v['prefill_tok_s']:.1f}"
            for b, v in by_batch.items()
        )
        say(f"{system:>18}: {cells}")
    say(
        f"executor vs accelerate decode: {f['speedup_vs_accelerate_b1']:.2f}x at B={b1}, "
        f"{f['speedup_vs_accelerate_bmax']:.2f}x at B={bmax}; prefill "
        f"{f['prefill_speedup_vs_accelerate_b1']:.2f}x at B={b1}"
    )
    say(
        f"overlap efficiency {f['overlap_efficiency']:.2f}, roofline efficiency "
        f"{f['roofline_efficiency']:.2f} (B={b1}); batch amortization "
        f"{f['batch_amortization']:.2f} (B={bmax}: {f['batch_speedup']:.2f}x the B={b1} tok/s); "
        f"tokens match the reference: {f['tokens_match_reference']} "
        f"(accelerate: {f['accelerate_tokens_match_reference']})"
    )
