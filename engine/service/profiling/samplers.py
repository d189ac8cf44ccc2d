"""The real timing functions behind active profiling, and the in-process run.

`run_active_profile` only orchestrates; the functions here time this machine:
decode of a batch with the chosen model, and hybrid search over the index.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.runtime.planner.profiling import (
    DEFAULT_BATCHES,
    DEFAULT_PARTITIONS,
    ProfileResult,
    Progress,
    run_active_profile,
    save_profile,
)
from engine.service.profiling.auto_profile import Deferred

if TYPE_CHECKING:
    from engine.paths import Paths
    from engine.rag.store.lance_store import LanceStore

PROBE_PROMPT = "Summarise in one sentence why the sky looks blue during the day."
PROBE_QUESTION = "what does the document say about the main topic"
DECODE_TOKENS = 8
RETRIEVAL_BATCH = 8  # questions per timed retrieval batch (the Workload default)
_READ_CHUNK = 1 << 20


def generation_sampler(
    *,
    model: Any,
    tokenizer: Any,
    max_new_tokens: int = DECODE_TOKENS,
    repeats: int = 2,
    wanted: Callable[[], bool] | None = None,
) -> Callable[[int], float]:
    """Seconds to greedily decode `max_new_tokens` for a batch of B identical prompts.

    Identical prompts need no padding, so no pad token is needed either (many
    checkpoints have none). The first call is a warm-up: it pays for kernel
    selection and allocator growth, which the fit must not see. With `wanted` (the
    product's executor only: its `generate` takes `stop`), a sample stops at the decode
    step where `wanted()` answers True and raises `Deferred`: a question waits one
    step, not a whole batch."""
    import torch

    ids = tokenizer(PROBE_PROMPT, return_tensors="pt").input_ids.to(model.device)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    stop = {"stop": wanted} if wanted is not None else {}

    def once(batch: int) -> float:
        inputs = ids.repeat(batch, 1)
        _sync(torch)
        start = time.perf_counter()
        with torch.inference_mode():
            model.generate(
                input_ids=inputs,
                attention_mask=torch.ones_like(inputs),
                max_new_tokens=max_new_tokens,
                min_new_tokens=max_new_tokens,  # an early EOS would make a batch look fast
                do_sample=False,
                pad_token_id=pad,
                **stop,
            )
        _sync(torch)
        if wanted is not None and wanted():
            raise Deferred
        return time.perf_counter() - start

    def decode(batch: int) -> float:
        # The faster of `repeats`: on a busy laptop a stray process only ever adds
        # time, so the minimum is the estimate least disturbed by it.
        return min(once(batch) for _ in range(repeats))

    once(1)
    return decode


def _sync(torch: Any) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def retrieval_sampler(
    *,
    store: LanceStore,
    partition_count: int = max(DEFAULT_PARTITIONS),
    questions: int = RETRIEVAL_BATCH,
    seed: int = 0,
) -> Callable[[int], float]:
    """Seconds for one retrieval batch with P of `partition_count` partitions resident.

    With a vector index, P/count of the index's bytes (the IVF view's partitions
    once it is built) become the store's resident budget for the timed batch
    (the cache is emptied and the index files dropped from the page cache
    first, so what is not resident is read from disk), and the store's own
    budget is put back afterwards. Without one (a small collection, searched by
    a flat scan) a partition that is not resident is modelled by what paging it
    costs: reading its share of the chunk table's files from disk. The searches
    use random unit vectors: what a question embeds to does not change the cost."""
    from engine.rag.store.resident_memory import resident_budget
    from engine.runtime.executor.page_cache import evict_page_cache

    meta = store.meta
    if meta is None:
        raise ValueError("the index is empty: nothing to time")
    rng = np.random.default_rng(seed)
    files = sorted(
        p for p in (store.folder / f"{meta.chunks_table}.lance").rglob("*") if p.is_file()
    )
    table_bytes = sum(p.stat().st_size for p in files)
    state = store.index_state()
    view = store.view if store.view is not None and store.view.ready else None
    if view is not None and view.generation is not None:
        # Searches go through the store's IVF view: shares of its partitions,
        # and its files are dropped from the page cache with the table's.
        files += sorted(p for p in view.generation.folder.iterdir() if p.is_file())
        index_bytes = view.full_resident_bytes()
    else:
        index_bytes = state.index_bytes

    def search(resident: int) -> float:
        vectors = rng.standard_normal((questions, meta.dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        share = min(max(resident, 0), partition_count) / max(partition_count, 1)
        if not state.indexed:
            start = time.perf_counter()
            _read_prefix(files, int(table_bytes * (1 - share)))
            store.search_batch(vectors=vectors, texts=[PROBE_QUESTION] * questions, k=5)
            return time.perf_counter() - start
        own_budget = store.resident_budget
        store.set_resident_budget(
            resident_bytes=resident_budget(view_bytes=index_bytes, share=share)
        )
        try:
            # Warm what may stay resident, then drop the files: the timed batch
            # reads from the disk exactly what the budget could not keep.
            store.search_batch(vectors=vectors, texts=[PROBE_QUESTION] * questions, k=5)
            evict_page_cache(files=files)
            start = time.perf_counter()
            store.search_batch(vectors=vectors, texts=[PROBE_QUESTION] * questions, k=5)
            return time.perf_counter() - start
        finally:
            store.set_resident_budget(resident_bytes=own_budget)

    search(partition_count)  # warm-up: opens the table and the full-text index
    return search


def _read_prefix(files: list[Path], limit: int) -> None:
    left = limit
    for path in files:
        if left <= 0:
            return
        with path.open("rb") as f:
            while left > 0:
                block = f.read(min(_READ_CHUNK, left))
                if not block:
                    break
                left -= len(block)


def profile_in_process(
    *,
    paths: Paths,
    progress: Progress | None = None,
    budget_s: float = 120.0,
    batches: tuple[int, ...] = DEFAULT_BATCHES,
    partitions: tuple[int, ...] = DEFAULT_PARTITIONS,
) -> ProfileResult:
    """Profile the index and the model chosen in the settings, and store the result.

    Runs beside the engine rather than through it: it opens the index read-only
    and loads its own copy of the model, so the engine keeps answering meanwhile."""
    from engine.environ import EngineEnviron
    from engine.rag.store.lance_store import LanceStore
    from engine.runtime.hardware.profile import load_profile
    from engine.service.settings import load_settings

    settings = load_settings(file=paths.settings_file)
    hardware = load_profile(paths=paths, measure=False)
    # background=False: the engine's own store keeps the index fresh.
    # A run of its own beside the engine: it reads the environment as the engine's start does.
    store = LanceStore(
        folder=paths.index_dir,
        background=False,
        scorer=EngineEnviron.from_environ().ivf_scorer,
    )
    _, chunks = store.counts()

    sample_retrieval = None
    if chunks > 0:
        _report(progress, "opening the index", 0.0)
        sample_retrieval = retrieval_sampler(store=store, partition_count=max(partitions))
    sample_generation = None
    if settings.model:
        from engine.rag.answer.in_use import open_model
        from engine.runtime.models.resolve import resolve_model_path

        _report(progress, f"loading {settings.model}", 0.0)
        answerer = open_model(
            model_path=resolve_model_path(model=settings.model, app_cache=paths.cache),
            paths=paths,
        ).answerer
        sample_generation = generation_sampler(model=answerer.model, tokenizer=answerer.tokenizer)

    result = run_active_profile(
        sample_generation=sample_generation,
        sample_retrieval=sample_retrieval,
        batches=batches,
        partitions=partitions,
        progress=progress,
        budget_s=budget_s,
        model_id=settings.model,
        hardware_fingerprint=hardware.fingerprint,
        collection_chunks=chunks,
    )
    save_profile(data_dir=paths.data, result=result)
    return result


def _report(progress: Progress | None, message: str, fraction: float) -> None:
    if progress is not None:
        progress(message, fraction)
