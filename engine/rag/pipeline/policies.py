"""The policies the pipeline's two workers consult, each a named value: how batches
are formed and ordered (`Scheduling`), what the caps are sized for and how a new
placement is applied (`Placing`), and the T(B) fits the batch sizes start from
(`Fits`). workers.py's Pipeline takes one of each beside its stages (stages.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.rag.pipeline.batch_worker import ApplyPlacement
from engine.rag.pipeline.batching import FixedBatch
from engine.rag.pipeline.scheduler import SchedulerPolicy
from engine.runtime.planner.placement import Placement
from engine.runtime.planner.profiling import PowerLawFit
from engine.wire import Priority


@dataclass(frozen=True, kw_only=True)
class Scheduling:
    order: SchedulerPolicy = field(default_factory=SchedulerPolicy)  # who goes first
    # A question that reaches the generation queue while a batch decodes joins it at
    # the next step, as far as eq. 4-8 would have batched it with the rows in flight
    # (`generate` is then called with `incoming=`).
    join_running_batch: bool = False
    # The retrieval worker may wait for more questions while generation is backed up
    # (Pipeline.retrieval_slack).
    retrieval_waits_for_company: bool = True
    # The largest generation batch without a placement (a model server's requests in
    # flight); None: DEFAULT_GENERATION_CAP.
    generation_cap: int | None = None
    # A fixed generation batch instead of eq. 4-8 (a benchmark's ablation); None: eq. 4-8.
    generation_batch: FixedBatch | None = None
    # A follow-up's rewrite is scheduled as the chat a person watches, whatever its
    # answer's class: the answer cannot begin its retrieval before it.
    rewrite_priority: Priority = "interactive"


@dataclass(frozen=True, kw_only=True)
class Placing:
    """The placement the caps are sized for (None: the default caps) and the hooks that
    apply a new one between two batches (the owner's `apply_to_store` /
    `apply_to_executor`: engine/runtime/planner/owner.py)."""

    placement: Placement | None = None
    apply_to_store: ApplyPlacement | None = None
    apply_to_executor: ApplyPlacement | None = None


@dataclass(frozen=True, kw_only=True)
class Fits:
    """Profiled T(B) of each worker (None: none yet; observed batches refit it)."""

    retrieval: PowerLawFit | None = None
    generation: PowerLawFit | None = None
