"""What GET /v1/status says: the engine's state in one value, read from its parts.

Each part answers for itself (the store its counts and languages, the model choice the
model in use and why a chosen one is not, the profiler its progress, the embedder switch
its job); this puts their answers together as the wire's `EngineStatus`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from engine.rag.ingest.embedder_offer import embedder_offer
from engine.rag.ingest.embedder_switch import EmbedderSwitch
from engine.rag.store.lance_store import LanceStore
from engine.service.embed_server_choice import EmbedServerChoice
from engine.service.model_choice import ModelChoice
from engine.service.profiling.auto_profile import AutoProfiler
from engine.wire import EngineSettings, EngineStatus, PipelineInfo

VERSION = "0.1.0"


def engine_status(
    *,
    settings: EngineSettings,
    store: LanceStore,
    models: ModelChoice,
    embedders: EmbedderSwitch,
    profiler: AutoProfiler,
    pipeline: PipelineInfo | None,
    embed_servers: EmbedServerChoice | None = None,
    asked: Sequence[str] = (),
) -> EngineStatus:
    """`settings`: those in force; `pipeline`: the serving pipelines' state (None before
    the first question); `asked`: the languages questions were asked in, most first."""
    documents, chunks = store.counts()
    meta = store.meta
    switch = embedders.active()
    languages = store.collection_languages()
    return EngineStatus(
        version=VERSION,
        pid=os.getpid(),
        documents=documents,
        chunks=chunks,
        embedder=settings.embedder,
        model=settings.server_model if settings.server_url else settings.model,
        answer_mode="generative" if models.current() is not None else "extractive",
        model_error=models.error(),
        profiling=profiler.status(),
        pipeline=pipeline,
        embedder_in_force=meta.embedder_id if meta is not None else None,
        embedder_job=switch[1].id if switch is not None else None,
        reranker=settings.reranker,
        server=models.server_info(),
        embed_server=(
            embed_servers.info(in_force=meta.embedder_id if meta is not None else None)
            if embed_servers is not None
            else None
        ),
        languages=list(languages),
        embedder_offer=embedder_offer(
            languages=languages,
            embedder=meta.embedder_id if meta is not None else settings.embedder,
            asked=asked,
        ),
    )
