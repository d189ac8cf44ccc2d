"""The engine's two pipelines for one setup: the index, the embedder and the language
model in use (or none: extractive answers). engine/core.py builds one at the first
question and a new one when the model changes.

It wires the gated batch functions (answering.py) into a Pipeline with the model's
placement and the profiled T(B), the placement hooks (the index's resident budget, the
executor's layer tiers), and a PlacementGovernor that re-plans the placement for a
larger batch while the generation backlog stays high and back when it falls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.pipeline.adapters import Embed, executor_apply_placement
from engine.pipeline.answering import gated_generate_batch, gated_retrieve_batch, settled
from engine.pipeline.governor import GovernorPolicy, PlacementGovernor
from engine.pipeline.workers import Pipeline
from engine.planner.profiling import PowerLawFit

if TYPE_CHECKING:
    from engine.answer.generative import GenerativeAnswerer
    from engine.answer.reranker import Reranker
    from engine.paths import Paths
    from engine.planner.placement import Placement, StoreSpec
    from engine.store.lance_store import LanceStore


class ServingPipeline:
    def __init__(
        self,
        *,
        store: LanceStore,
        embed: Embed,
        answerer: GenerativeAnswerer | None,
        model_lock: threading.Lock,
        generation_fit: PowerLawFit | None,
        paths: Paths,
        store_spec: Callable[[], StoreSpec],
        governor_policy: GovernorPolicy | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.answerer = answerer
        placement = answerer.placement if answerer is not None else None
        self.pipeline = Pipeline(
            retrieve_batch=gated_retrieve_batch(store=store, embed=embed, reranker=reranker),
            generate_batch=gated_generate_batch(answerer=answerer, model_lock=model_lock),
            placement=placement,
            generation_fit=generation_fit,
            apply_retrieval_placement=_store_hook(store) if answerer is not None else None,
            apply_generation_placement=(
                executor_apply_placement(answerer=answerer) if answerer is not None else None
            ),
            answered_at_retrieval=settled,
            # A question asked while a batch decodes joins it at the next step, as
            # far as eq. 4-8 would have batched it with the rows in flight.
            join_running_batch=True,
            model_name=answerer.name if answerer is not None else None,
        )
        self.governor: PlacementGovernor | None = None
        if answerer is not None and placement is not None:
            policy = governor_policy or GovernorPolicy(
                base_batch=max(1, placement.batch),
                max_batch=max(1, placement.batch, placement.max_batch),
            )
            self.governor = PlacementGovernor(
                pipeline=self.pipeline,
                plan_for=lambda batch: plan_for_batch(
                    answerer=answerer, paths=paths, store=store_spec(), batch=batch
                ),
                policy=policy,
                planned=placement.batch,
            )

    def close(self) -> None:
        if self.governor is not None:
            self.governor.close()
        self.pipeline.close()

    def hand_over(self, *, to: ServingPipeline) -> int:
        """Stop, and let `to` (the pipelines of another model) answer the questions
        not yet being generated; returns how many moved."""
        if self.governor is not None:
            self.governor.close()
        return self.pipeline.hand_over(to=to.pipeline)


def _store_hook(store: LanceStore) -> Any:
    def apply(placement: Any) -> None:
        # An empty index has no table to reopen; it gets the budget with its first rows
        # (Engine._load_generator applies it when the model is chosen).
        if store.counts()[1] > 0:
            store.apply_placement(placement=placement)

    return apply


def plan_for_batch(
    *, answerer: GenerativeAnswerer, paths: Paths, store: StoreSpec, batch: int
) -> Placement | None:
    """The planner's placement of this model for a generation batch of `batch`, on
    this machine (cached profile: never a slow measurement); None when it does not fit
    or would need another compute tier (a loaded model cannot change device)."""
    from engine.hardware.profile import load_profile
    from engine.planner.model_spec import load_model_spec
    from engine.planner.placement import Workload
    from engine.planner.planner import plan

    current = answerer.placement
    spec = load_model_spec(
        source=answerer.model_path, dtype=str(answerer.executor.dtype).removeprefix("torch.")
    )
    placement = plan(
        hardware=load_profile(paths=paths, measure=False),
        model=spec,
        store=store,
        workload=Workload(batch=batch, context_tokens=current.context_tokens),
    )
    if not placement.fits or placement.compute_tier != current.compute_tier:
        return None
    return placement
