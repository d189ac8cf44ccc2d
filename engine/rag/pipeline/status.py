"""What the pipeline reports about itself: each worker's state, the recent batches
(the Figure 9 timeline) and the recent requests (latency over time, Table 1)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.rag.pipeline.requests import RequestTimes
from engine.wire import Priority


@dataclass(frozen=True, kw_only=True)
class BatchRecord:
    """One finished batch, for the batch-size / placement timeline (Figure 9)."""

    started: float  # clock seconds
    seconds: float
    size: int
    backlog: int  # requests waiting when it was formed, itself included
    cap: int
    placements: int = 0  # placements this worker had applied before the batch began


@dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """One finished request, for latency over time and the Table 1 breakdown."""

    request_id: str
    priority: Priority
    status: str  # "done" | "cancelled" | "error"
    times: RequestTimes
    tokens: int  # generated tokens delivered


@dataclass(frozen=True, kw_only=True)
class WorkerStatus:
    name: str
    queue_length: int
    running: int  # requests in the batch being processed now
    cap: int  # the largest batch allowed by the placement in force
    batch_size: int | None  # the size chosen for the current (or last) batch
    last_batch_size: int | None
    last_batch_s: float | None
    batches: int
    fit_a: float | None
    fit_c: float | None
    fit_online: bool  # the fit in force comes from observed batches, not the profile
    placements_applied: int
    recent: tuple[BatchRecord, ...]  # the last HISTORY batches, oldest first


@dataclass(frozen=True, kw_only=True)
class PipelineStatus:
    retrieval: WorkerStatus
    generation: WorkerStatus
    placement_batch: int | None  # Placement.batch of the placement in force
    submitted: int
    finished: int
    placements_applied: int = 0  # Pipeline.set_placement calls completed
    tokens_per_s: float = 0.0  # generated tokens per second over the last 30 s
    requests: tuple[RequestRecord, ...] = ()  # the last REQUEST_HISTORY finished, oldest first
