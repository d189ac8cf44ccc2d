"""The figures of `ragdoll bench pipeline`: one system's run summarised (Table 1's
split, latency percentiles), the speedups of one side-by-side run, the medians over
the repeats, and the printed table."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.pipeline_systems import SystemRun

RATIOS = (
    ("speedup_vs_serial_accelerate", "serial_accelerate"),
    ("speedup_vs_no_pipeline", "no_pipeline"),
    ("speedup_vs_fixed_batch", "fixed_batch"),
)


def summarize(run: SystemRun) -> dict[str, Any]:
    """Latency figures over every request (one past the drain limit counts until the
    stop, so the figure is then a lower bound) and the breakdown over the finished."""
    lat = [
        (r.finished if r.finished is not None else run.stopped_at) - r.submitted
        for r in run.requests
    ]
    done = [r for r in run.requests if r.status == "done"]
    waits = [
        (r.retrieval_started - r.submitted) + (r.generation_started - r.retrieved)  # type: ignore[operator]
        for r in done
    ]
    retr = [r.retrieved - r.retrieval_started for r in done]  # type: ignore[operator]
    gen = [r.finished - r.generation_started for r in done]  # type: ignore[operator]
    sizes = [b.size for b in run.batches if b.worker == "generation"]
    retrieval_batches = [b for b in run.batches if b.worker == "retrieval"]
    arr = np.asarray(lat, dtype=float)
    return {
        "requests": len(run.requests),
        "finished": len(done),
        "unfinished": len(run.requests) - len(done),
        "not_found": sum(1 for r in run.requests if r.not_found),
        "mean_latency_s": float(arr.mean()),
        "p50_latency_s": float(np.percentile(arr, 50)),
        "p95_latency_s": float(np.percentile(arr, 95)),
        "p99_latency_s": float(np.percentile(arr, 99)),
        "max_latency_s": float(arr.max()),
        "mean_latency_finished_s": statistics.fmean(
            r.finished - r.submitted
            for r in done  # type: ignore[operator]
        )
        if done
        else None,
        "waiting_s": statistics.fmean(waits) if waits else None,
        "retrieval_s": statistics.fmean(retr) if retr else None,
        "generation_s": statistics.fmean(gen) if gen else None,
        "generation_batches": len(sizes),
        "mean_generation_batch": statistics.fmean(sizes) if sizes else None,
        "max_generation_batch": max(sizes) if sizes else None,
        "retrieval_batches": len(retrieval_batches),
        "mean_retrieval_batch": statistics.fmean(b.size for b in retrieval_batches)
        if retrieval_batches
        else None,
        "mean_retrieval_batch_s": statistics.fmean(b.seconds for b in retrieval_batches)
        if retrieval_batches
        else None,
        "wall_s": run.wall_s,
        "per_request": [
            {
                "index": r.index,
                "interval": r.interval,
                "submitted_s": round(r.submitted, 3),
                "latency_s": round(x, 3),
                "status": r.status,
            }
            for r, x in zip(run.requests, lat, strict=True)
        ],
        "batches": [
            {
                "worker": b.worker,
                "started_s": round(b.started, 3),
                "seconds": round(b.seconds, 3),
                "size": b.size,
                "backlog": b.backlog,
                "cap": b.cap,
            }
            for b in run.batches
        ],
        "notes": list(run.notes),
    }


def side_by_side(*, runs: Sequence[SystemRun]) -> dict[str, Any]:
    """One repeat: each system's summary, mean latencies and ragdoll's speedups."""
    systems = {run.name: summarize(run) for run in runs}
    mean = {name: s["mean_latency_s"] for name, s in systems.items()}

    def ratio(other: str) -> float | None:
        if other not in mean or "ragdoll" not in mean or mean["ragdoll"] <= 0:
            return None
        return mean[other] / mean["ragdoll"]

    return {
        "systems": systems,
        "mean_latency_s": mean,
        **{key: ratio(other) for key, other in RATIOS},
        "all_finished": all(s["unfinished"] == 0 for s in systems.values()),
    }


def over_repeats(repeats: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The repeats together: each ratio's median (the headline keys) and its per-run
    list (`<key>_runs`), each system's median mean latency and its list. `systems` is
    the first repeat's full summary (the one plotted); every repeat's is in `repeats`."""
    if not repeats:
        raise ValueError("no repeat ran")
    names = list(repeats[0]["mean_latency_s"])
    out: dict[str, Any] = {
        "systems": repeats[0]["systems"],
        "mean_latency_s": {
            n: statistics.median(r["mean_latency_s"][n] for r in repeats) for n in names
        },
        "mean_latency_s_runs": {n: [r["mean_latency_s"][n] for r in repeats] for n in names},
        "all_finished": all(r["all_finished"] for r in repeats),
    }
    for key, _ in RATIOS:
        values = [r[key] for r in repeats]
        known = [v for v in values if v is not None]
        out[key] = statistics.median(known) if known else None
        out[f"{key}_runs"] = values
    return out


def report(f: dict[str, Any], *, say: Callable[[str], None]) -> None:
    for i, rep in enumerate(f["repeats"]):
        say(f"repeat {i + 1} (seed {rep['seed']}, {rep['requests']} requests):")
        table(rep, say=say)
    x = _times
    for key, _ in RATIOS:
        runs = ", ".join(x(v) for v in f[f"{key}_runs"])
        say(f"{key}: median {x(f[key])} (runs: {runs})")
    prefix = f["prefix_reuse"]
    say(
        f"ttft_speedup_prefix_reuse: {x(f['ttft_speedup_prefix_reuse'])}"
        + ("" if prefix.get("ttft_speedup_prefix_reuse") else f" ({prefix.get('note', '')})")
    )
    say(f"plots: {', '.join(f['plots'])}; load average {f['machine']['load_average_end']}")


def table(rep: dict[str, Any], *, say: Callable[[str], None]) -> None:
    say(
        f"{'system':>18} | {'mean':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'max':>7} | "
        f"{'wait':>7} {'retr':>6} {'gen':>6} | gen batches (mean B) | done"
    )

    def cell(s: dict[str, Any], key: str, width: int = 7) -> str:
        v = s[key]
        return f"{v:{width}.2f}" if v is not None else f"{'—':>{width}}"

    for name, s in rep["systems"].items():
        say(
            f"{name:>18} | {cell(s, 'mean_latency_s')} {cell(s, 'p50_latency_s')} "
            f"{cell(s, 'p95_latency_s')} {cell(s, 'p99_latency_s')} {cell(s, 'max_latency_s')} | "
            f"{cell(s, 'waiting_s')} {cell(s, 'retrieval_s', 6)} {cell(s, 'generation_s', 6)} | "
            f"{s['generation_batches']:>4} ({s['mean_generation_batch'] or 0:.1f}) | "
            f"{s['finished']}/{s['requests']}"
        )
    say(
        "  speedups of ragdoll: "
        + ", ".join(f"{key.removeprefix('speedup_')} {_times(rep[key])}" for key, _ in RATIOS)
    )


def _times(v: float | None) -> str:
    return f"{v:.2f}×" if v is not None else "not measured"
