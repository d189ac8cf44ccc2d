"""What the engine hands its profiler at each check (auto_profile.ProfilingInputs), built
from what the engine exposes: its index, the model in use, the lock the model runs under,
and the person's work in hand."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.paths import Paths
from engine.runtime.planner.profiling import load_saved_profile
from engine.service.profiling.auto_profile import ProfilingInputs, Sampler
from engine.service.profiling.samplers import generation_sampler, retrieval_sampler
from engine.service.work_in_hand import WorkInHand

if TYPE_CHECKING:
    from engine.rag.answer.in_use import ModelInUse
    from engine.rag.ingest.jobs import IngestQueue
    from engine.rag.pipeline.serving import ServingPipeline
    from engine.rag.store.lance_store import LanceStore


class EngineProfilingInputs:
    def __init__(
        self,
        *,
        paths: Paths,
        store: LanceStore,
        model_id: Callable[[], str | None],
        model: Callable[[], ModelInUse | None],
        model_lock: threading.Lock,
        serving: Callable[[], ServingPipeline | None],
        direct_answers: WorkInHand,
        ingest: IngestQueue,
    ) -> None:
        """`model_id`: the settings' model; `model`: the model in use, run only under
        `model_lock`; `serving`: the pipelines every question goes through (None before
        the first); `direct_answers`: answers without retrieval in hand."""
        self._paths = paths
        self._store = store
        self._model_id = model_id
        self._model = model
        self._model_lock = model_lock
        self._serving = serving
        self._direct_answers = direct_answers
        self._ingest = ingest

    def current(self) -> ProfilingInputs:
        _, chunks = self._store.counts()
        saved = load_saved_profile(data_dir=self._paths.data) if chunks == 0 else None
        if saved is not None:
            # Emptied (its last folder removed): timing retrieval over nothing tells
            # nothing, and the next documents bring a size of their own.
            chunks = saved.collection_chunks
        # Idle: no answer being written and no ingestion job queued or running
        # (either would disturb every measurement, and ingestion changes the size).
        return ProfilingInputs(
            model_id=self._model_id(),
            collection_chunks=chunks,
            idle=not self._model_lock.locked() and not self.work_waiting(),
            sample_generation=self._generation_sampler,
            sample_retrieval=lambda: self._retrieval_sampler(chunks=chunks),
            wanted=self.work_waiting,
        )

    def work_waiting(self) -> bool:
        """A person's work is in hand: a question, an ask-each run, an answer without
        retrieval, ingestion. Machine timing gives way to it (auto_profile.py)."""
        serving = self._serving()
        return (
            (serving is not None and not serving.pipeline.idle())
            or self._direct_answers.any()
            or bool(self._ingest.state().jobs)
        )

    def _generation_sampler(self) -> Sampler | None:
        model = self._model()
        if model is None or model.remote:  # a server's timings are not this machine's
            return None
        answerer = model.answerer
        with self._model_lock:
            sample = generation_sampler(
                model=answerer.model, tokenizer=answerer.tokenizer, wanted=self.work_waiting
            )

        def between_answers(batch: int) -> float:
            # One timed batch at a time under the model's lock: a question waits
            # seconds for a sample, never minutes for the whole profile.
            with self._model_lock:
                return sample(batch)

        return between_answers

    def _retrieval_sampler(self, *, chunks: int) -> Sampler | None:
        return retrieval_sampler(store=self._store) if chunks > 0 else None
