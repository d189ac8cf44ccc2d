"""The engine's two pipelines for one setup: the index, the embedder and the language
model in use (or none: extractive answers). engine/service/core.py builds one at the first
question and a new one when the model changes.

It wires the gated batch functions (answering.py) into a Pipeline with the profiled
T(B), the placement owner's hooks (the index's resident budget, the executor's tiers;
engine/runtime/planner/owner.py), and a PlacementGovernor that asks the owner for a placement
sized for a larger batch while the generation backlog stays high and back when it falls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.rag.answer.semantic_scale import SemanticScale
from engine.rag.answer.sentence_memo import SentenceMemo
from engine.rag.answer.word_languages import Ordinary
from engine.rag.pipeline.adapters import Embed, TaggedEmbed
from engine.rag.pipeline.answering import RelevanceGate, gated_generate_batch, may_pass, settled
from engine.rag.pipeline.governor import GovernorPolicy, PlacementGovernor
from engine.rag.pipeline.policies import Fits, Placing, Scheduling
from engine.rag.pipeline.stages import Stages
from engine.rag.pipeline.workers import Pipeline
from engine.runtime.planner.profiling import PowerLawFit

if TYPE_CHECKING:
    from engine.rag.answer.in_use import ModelInUse
    from engine.rag.answer.reranker import CandidateRanker
    from engine.rag.store.lance_store import LanceStore
    from engine.runtime.planner.placement import Placement


log = logging.getLogger(__name__)


class ServingPipeline:
    def __init__(
        self,
        *,
        store: LanceStore,
        embed: Embed,
        model: ModelInUse | None,
        model_lock: threading.Lock,
        generation_fit: PowerLawFit | None,
        governor_policy: GovernorPolicy | None = None,
        reranker: CandidateRanker | None = None,
        ranker: str | None = None,
        tagged: TaggedEmbed | None = None,
        sentence_embed: Embed | None = None,
        sentence_scale: Callable[[], SemanticScale] | None = None,
        ordinary_word: Ordinary | None = None,
        small_ordinary: Ordinary | None = None,
    ) -> None:
        """`model` (None: extractive answers) brings the answerer and the owner of its
        placement; the workers apply the owner's placements through its hooks, the
        governor re-plans through it, and both read the placement in force from it."""
        self.model = model
        self.ranker = ranker  # the setting `reranker` came from (the engine's, to compare)
        self.answerer = model.answerer if model is not None else None
        self.owner = model.owner if model is not None else None
        owner = self.owner
        placement = owner.placement if owner is not None else None
        # Follow-ups retrieve earlier turns' passages again: the gate's sentence
        # vectors are kept instead of embedded again, by the embedder that scores
        # sentences (`sentence_embed`, chosen by the index's embedder) or else the
        # index's: keyed by the index's embedder either way.
        self.sentence_memo = SentenceMemo(
            key=(lambda: store.meta.embedder_id if store.meta is not None else "")
        )
        gate = RelevanceGate(
            store=store,
            embed=embed,
            tagged=tagged,
            reranker=reranker,
            memo=self.sentence_memo,
            sentence_embed=sentence_embed,
            sentence_scale=sentence_scale,
            ordinary_word=ordinary_word,
            small_ordinary=small_ordinary,
        )
        self.pipeline = Pipeline(
            stages=Stages(
                retrieve=gate.search,
                judge=gate.judge,
                settled=settled,
                # With a model, the gate's reading of the sentences overlaps the prefill
                # instead of coming before it; quotes need the verdict itself.
                speculate=may_pass if self.answerer is not None else None,
                generate=gated_generate_batch(answerer=self.answerer, model_lock=model_lock),
            ),
            scheduling=Scheduling(
                # A question asked while a batch decodes joins it at the next step, as
                # far as eq. 4-8 would have batched it with the rows in flight.
                join_running_batch=True,
                generation_cap=getattr(self.answerer, "concurrency", None),
            ),
            placing=Placing(
                placement=placement,
                apply_to_store=owner.apply_to_store if owner is not None else None,
                apply_to_executor=owner.apply_to_executor if owner is not None else None,
            ),
            fits=Fits(generation=generation_fit),
            model_name=self.answerer.name if self.answerer is not None else None,
        )
        self.governor: PlacementGovernor | None = None
        if owner is not None and placement is not None:
            policy = governor_policy or GovernorPolicy(
                base_batch=max(1, placement.batch),
                max_batch=max(1, placement.batch, placement.max_batch),
            )
            self.governor = PlacementGovernor(
                pipeline=self.pipeline,
                plan_for=lambda batch: owner.plan_for(batch=batch),
                in_force=lambda: owner.placement,
                policy=policy,
                planned=placement.batch,
            )

    @property
    def placement(self) -> Placement | None:
        """The placement in force (None: no language model)."""
        return self.owner.placement if self.owner is not None else None

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


def retire(serving: ServingPipeline, *, successor: ServingPipeline | None) -> None:
    """Stop old pipelines in the background (a generation batch in flight ends
    first); with a successor, what they had not begun moves to it."""

    def run() -> None:
        if successor is None:
            serving.close()
            return
        moved = serving.hand_over(to=successor)
        if moved:
            log.info("%d waiting question(s) moved to the pipelines of the new model", moved)

    threading.Thread(target=run, name="serving-retire", daemon=True).start()
