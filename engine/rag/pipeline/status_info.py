"""The pipeline's status as the wire's PipelineInfo (GET /v1/status, `pipeline`).

Times inside the pipeline are its clock's (time.monotonic); the wire carries seconds
since the epoch, so every stamp is moved by the clocks' offset taken once per call.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.rag.pipeline.status import BatchRecord, PipelineStatus, RequestRecord, WorkerStatus
from engine.runtime.planner.placement import Placement
from engine.wire import BatchPoint, PipelineInfo, PipelineWorkerInfo, RequestPoint

WIRE_BATCHES = 128
WIRE_REQUESTS = 256


def pipeline_info(
    *,
    status: PipelineStatus,
    placement: Placement | None,
    clock: Callable[[], float] = time.monotonic,
    epoch: Callable[[], float] = time.time,
) -> PipelineInfo:
    offset = epoch() - clock()
    batches = [
        _batch_point(r, worker="retrieval", offset=offset) for r in status.retrieval.recent
    ] + [_batch_point(r, worker="generation", offset=offset) for r in status.generation.recent]
    batches.sort(key=lambda b: b.started)
    requests = [_request_point(r, offset=offset) for r in status.requests]
    return PipelineInfo(
        retrieval=_worker(status.retrieval),
        generation=_worker(status.generation),
        placement=describe_placement(placement),
        placement_batch=status.placement_batch,
        placements_applied=status.placements_applied,
        submitted=status.submitted,
        finished=status.finished,
        tokens_per_s=round(status.tokens_per_s, 3),
        batches=batches[-WIRE_BATCHES:],
        requests=[r for r in requests if r is not None][-WIRE_REQUESTS:],
    )


def describe_placement(placement: Placement | None) -> str:
    """The placement in a line: its batch, where the layers live, the resident index."""
    if placement is None:
        return "extractive (no language model)"
    layers: dict[str, int] = {}
    for tier in placement.layer_tiers:
        layers[tier] = layers.get(tier, 0) + 1
    where = ", ".join(f"{n} on {tier}" for tier, n in layers.items()) or "no layers"
    return (
        f"batch {placement.batch} (up to {placement.max_batch}); layers {where}; "
        f"{placement.resident_partitions} index partitions resident"
    )


def _worker(w: WorkerStatus) -> PipelineWorkerInfo:
    return PipelineWorkerInfo(
        queue_length=w.queue_length,
        running=w.running,
        cap=w.cap,
        batch_size=w.batch_size,
        batches=w.batches,
        fit_a=w.fit_a,
        fit_c=w.fit_c,
        fit_online=w.fit_online,
    )


def _batch_point(r: BatchRecord, *, worker: str, offset: float) -> BatchPoint:
    return BatchPoint(
        worker=worker,  # type: ignore[arg-type]
        started=r.started + offset,
        seconds=r.seconds,
        size=r.size,
        backlog=r.backlog,
        cap=r.cap,
        placement=r.placements,
    )


def _request_point(r: RequestRecord, *, offset: float) -> RequestPoint | None:
    t = r.times
    if t.finished is None:
        return None
    # Waiting: in the retrieval queue, then in the generation queue; a stage never
    # reached (a cancelled request) counts as waiting up to the end.
    end = t.finished
    retrieval_start = t.retrieval_started if t.retrieval_started is not None else end
    retrieved = t.retrieved if t.retrieved is not None else retrieval_start
    generation_start = t.generation_started if t.generation_started is not None else end
    waiting = (retrieval_start - t.submitted) + (generation_start - retrieved)
    generation = end - generation_start if t.generation_started is not None else 0.0
    return RequestPoint(
        finished=t.finished + offset,
        priority=r.priority,
        status=r.status,  # type: ignore[arg-type]
        waiting_s=max(0.0, waiting),
        retrieval_s=max(0.0, retrieved - retrieval_start),
        generation_s=max(0.0, generation),
        latency_s=max(0.0, t.finished - t.submitted),
        ttft_s=(t.first_token - t.submitted) if t.first_token is not None else None,
        tokens=r.tokens,
    )
