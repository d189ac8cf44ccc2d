"""What the Activity window draws, computed from `/v1/status` without any widget.

The engine reports the pipeline as it is now (`PipelineInfo`): the queue lengths,
the rate of generated tokens, and the last batches and requests with their times.
Batches and requests carry their own history, so those charts show what happened
before the window opened. Queue lengths and tokens/s are only "now" values: the
window samples them at every status it receives, so their charts start when the
window opens and say so.

Times on the wire are seconds since the epoch; the charts use milliseconds since
the epoch (what QDateTimeAxis takes).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field

from engine.wire import BatchPoint, PipelineInfo, PipelineWorkerInfo, RequestPoint

HISTORY = 300  # sampled points kept: five minutes at one status a second
WORKERS = ("retrieval", "generation")


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One status, as the window received it."""

    at_ms: float
    queue: dict[str, int]  # worker -> requests waiting
    tokens_per_s: float


@dataclass(kw_only=True)
class SampleHistory:
    """The sampled values, oldest first, at most `limit` of them."""

    limit: int = HISTORY
    samples: deque[Sample] = field(default_factory=deque)

    def add(self, *, pipeline: PipelineInfo, at_s: float) -> None:
        self.samples.append(
            Sample(
                at_ms=at_s * 1000.0,
                queue={
                    "retrieval": pipeline.retrieval.queue_length,
                    "generation": pipeline.generation.queue_length,
                },
                tokens_per_s=pipeline.tokens_per_s,
            )
        )
        while len(self.samples) > self.limit:
            self.samples.popleft()

    def queue_points(self, *, worker: str) -> list[tuple[float, float]]:
        return [(s.at_ms, float(s.queue[worker])) for s in self.samples]

    def tokens_points(self) -> list[tuple[float, float]]:
        return [(s.at_ms, s.tokens_per_s) for s in self.samples]


def batch_points(*, batches: list[BatchPoint], worker: str) -> list[tuple[float, float]]:
    """(start in ms, batch size) of one worker's batches, oldest first."""
    return [(b.started * 1000.0, float(b.size)) for b in batches if b.worker == worker]


def cap_steps(*, batches: list[BatchPoint], worker: str) -> list[tuple[float, float]]:
    """The largest batch allowed, as a step line: it only changes with the placement."""
    out: list[tuple[float, float]] = []
    for b in (b for b in batches if b.worker == worker):
        x = b.started * 1000.0
        if out and out[-1][1] != b.cap:
            out.append((x, out[-1][1]))
        out.append((x, float(b.cap)))
    return out


def placement_changes(*, batches: list[BatchPoint]) -> list[float]:
    """When a new placement came into force (ms): the first batch formed under it.
    The engine counts placements applied; a batch with a higher count than the one
    before it is the first under a new placement (Figure 9's steps)."""
    ordered = sorted(batches, key=lambda b: b.started)
    return [
        b.started * 1000.0
        for before, b in itertools.pairwise(ordered)
        if b.placement > before.placement
    ]


def latency_points(*, requests: list[RequestPoint], priority: str) -> list[tuple[float, float]]:
    """(finished in ms, seconds from asking to the last token) of answered requests."""
    return [
        (r.finished * 1000.0, r.latency_s)
        for r in requests
        if r.priority == priority and r.status == "done"
    ]


def failed_points(*, requests: list[RequestPoint]) -> list[tuple[float, float]]:
    """Requests that ended cancelled or in an error, drawn apart so that a short
    latency that was really a failure does not read as a fast answer."""
    return [(r.finished * 1000.0, r.latency_s) for r in requests if r.status != "done"]


def _worker_line(*, name: str, w: PipelineWorkerInfo) -> str:
    batch = f"batch {w.batch_size} of at most {w.cap}" if w.batch_size else f"batch up to {w.cap}"
    return f"{name}: {w.queue_length} waiting, {w.running} running, {batch}"


def summary_lines(*, pipeline: PipelineInfo | None) -> list[str]:
    """The Placement in force and the batches now, in words."""
    if pipeline is None:
        return [
            "No questions answered yet: the charts fill in as the engine answers. "
            "Ask a question in the main window."
        ]
    # The placement's own words usually name its batch already.
    batch = (
        f", batch {pipeline.placement_batch}"
        if pipeline.placement_batch and "batch" not in pipeline.placement
        else ""
    )
    changes = pipeline.placements_applied
    return [
        f"Placement in force: {pipeline.placement}{batch} "
        f"({changes} placement{'s' if changes != 1 else ''} applied since the engine started)",
        _worker_line(name="Retrieval", w=pipeline.retrieval)
        + " · "
        + _worker_line(name="Generation", w=pipeline.generation),
        f"{pipeline.submitted} questions asked, {pipeline.finished} finished; "
        f"{pipeline.tokens_per_s:.1f} tokens/s over the last 30 s",
    ]


def axis_range(*, values: list[float], floor: float = 1.0) -> float:
    """A top for a y axis: a little above the largest value, never below `floor`."""
    top = max(values, default=0.0)
    return max(floor, top * 1.15)


def tick_step(*, top: float, ticks: int = 4, integer: bool = False) -> float:
    """A round step (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 × 10^k) such that `ticks` steps reach `top`;
    a whole number for counts."""
    raw = max(top, 1e-9) / ticks
    power = 10 ** math.floor(math.log10(raw))
    step = next(
        m * power for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if raw <= m * power * (1 + 1e-9)
    )
    return float(max(1, math.ceil(step))) if integer else step


def batch_axis_values(*, sizes: list[float], caps: list[float]) -> list[float]:
    """What the batch chart's y axis must hold: the sizes, and the cap only when it
    is near them (a cap of 100 would squash batches of 1 to 6 into the axis)."""
    biggest = max(sizes, default=0.0)
    return sizes + [c for c in caps if c <= max(2 * biggest, 4)]
