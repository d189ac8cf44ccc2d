"""The two figures of `ragdoll bench pipeline`, as PNGs (matplotlib, Agg backend).

- latency: each request's end-to-end latency by arrival order, one line per system, the
  four rate intervals marked (the paper's Figure 7);
- schedule: per system, the batch sizes of the retrieval and generation workers over
  time, the backlog each batch was formed from and the cap in force (the placement's
  largest batch, or 4λ for the serial baseline) (the paper's Figure 9).
"""

from __future__ import annotations

from pathlib import Path

from bench.pipeline_systems import SystemRun
from bench.pipeline_workload import Schedule

_COLOURS = {
    "ragdoll": "tab:green",
    "serial_accelerate": "tab:red",
    "no_pipeline": "tab:blue",
    "fixed_batch": "tab:orange",
}


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_plot(*, runs: list[SystemRun], schedule: Schedule, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10.5, 4.5), dpi=110)
    for run in runs:
        ordered = sorted(run.requests, key=lambda r: r.index)
        xs = [r.index for r in ordered]
        ys = [
            (r.finished if r.finished is not None else run.stopped_at) - r.submitted
            for r in ordered
        ]
        ax.plot(xs, ys, label=run.name, color=_COLOURS.get(run.name), linewidth=1.4)
        late = [(x, y) for x, y, r in zip(xs, ys, ordered, strict=True) if r.finished is None]
        if late:
            ax.scatter(*zip(*late, strict=True), marker="x", color=_COLOURS.get(run.name))
    firsts = _interval_starts(schedule)
    for i, first in enumerate(firsts):
        ax.axvline(first - 0.5, color="grey", linestyle=":", linewidth=0.8)
        rate = schedule.rates_per_s[i] * 60
        ax.text(first, ax.get_ylim()[1] * 0.97, f"{rate:.0f}/min", fontsize=8, va="top")
    ax.set_xlabel("request (arrival order)")
    ax.set_ylabel("end-to-end latency (s)")
    ax.set_title("Per-request latency under rising Poisson arrivals (cf. RAGDoll Fig. 7)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def schedule_plot(*, runs: list[SystemRun], schedule: Schedule, path: Path) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 2.3 * len(runs)), dpi=110, sharex=True)
    if len(runs) == 1:
        axes = [axes]
    for ax, run in zip(axes, runs, strict=True):
        for i in range(1, 4):
            ax.axvline(i * schedule.interval_s, color="grey", linestyle=":", linewidth=0.8)
        gen = [b for b in run.batches if b.worker == "generation"]
        ret = [b for b in run.batches if b.worker == "retrieval"]
        shown = [b.size for b in run.batches] + [b.backlog for b in gen] + [1]
        top = max(shown) * 1.15 + 0.5
        if gen:
            starts = [b.started for b in gen]
            ax.step(
                starts,
                [b.size for b in gen],
                where="post",
                color=_COLOURS.get(run.name),
                label="generation batch",
            )
            caps = [b.cap for b in gen]
            # A placement's cap far above any backlog would flatten the plot: named only.
            label = "cap in force" if max(caps) <= top else f"cap {max(caps)} (off the chart)"
            ax.plot(
                starts,
                [min(c, top) for c in caps],
                linestyle="--",
                color="black",
                linewidth=0.8,
                label=label,
            )
            ax.scatter(
                starts,
                [b.backlog for b in gen],
                s=8,
                color="grey",
                label="backlog at formation",
            )
        if ret and run.name in ("ragdoll", "fixed_batch"):
            ax.scatter(
                [b.started for b in ret],
                [b.size for b in ret],
                s=10,
                marker="^",
                color="tab:purple",
                label="retrieval batch",
            )
        ax.set_ylim(0, top)
        ax.set_ylabel("requests")
        ax.set_title(run.name, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[-1].set_xlabel("seconds since the workload started")
    fig.suptitle("Batch sizes and cap over time (cf. RAGDoll Fig. 9)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _interval_starts(schedule: Schedule) -> list[int]:
    firsts: dict[int, int] = {}
    for a in schedule.arrivals:
        firsts.setdefault(a.interval, a.index)
    return [firsts[i] for i in sorted(firsts)]
