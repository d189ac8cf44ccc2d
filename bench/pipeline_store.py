"""The store of `ragdoll bench pipeline`, in the paper's regime or the small one.

The paper's knowledge base (§6.1) is 256 GB in 32 partitions, most of it on disk with a
few partitions cached in RAM, and its retrieval costs as much as generation or more
(Table 1: ~300 s per request against 36-490 s). That is the regime pipelining and the
adaptive batch were designed for. Scaled here: the generated corpus through the real
ingest (the questions' answers) plus `filler_rows` synthetic chunks
(bench/synthetic_chunks.py) in the same LanceDB table; the store's IVF view is
built over all of it explicitly (the product's maintainer would build it in the
background past `min_rows`, in the middle of a run); `resident_share` of the view's
partitions may stay in memory, set through the Placement with `apply_placement`, as the
product sets it; and the store's files (the view's and LanceDB's) leave the OS page
cache before every retrieval batch, so what the budget does not hold comes from the disk
itself: this machine's RAM stands in for one where the store does not fit, the same
treatment as the model's disk layers get. With `filler_rows` = 0 the small regime: the
corpus alone, LanceDB's flat scan, no budget, no eviction.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.synthetic_chunks import SyntheticChunks, bulk_fill
from engine.rag.pipeline.adapters import store_retrieve_batch
from engine.rag.pipeline.requests import Question, new_question
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import SearchResult
from engine.rag.store.resident_memory import resident_budget
from engine.runtime.executor.page_cache import evict_page_cache
from engine.runtime.planner.placement import Placement


@dataclass(frozen=True, kw_only=True)
class BenchStore:
    store: LanceStore
    placement: Placement  # the bench's placement with the store's resident budget in it
    retrieve: Callable[[Sequence[Question]], list[SearchResult]]  # evicts first when scaled
    figures: dict[str, Any]

    def reset(self) -> None:
        """Every system starts alike: the resident partitions released (the budget is
        re-applied, which empties the caches) and the files out of the page cache."""
        if self.figures["regime"] == "scaled":
            self.store.apply_placement(placement=self.placement)

    def view_in_use(self) -> bool:
        """The view answers the vector side: built, and agreeing with the table."""
        view = self.store.view
        return bool(
            self.store.use_view
            and view is not None
            and view.ready
            and view.table_version == self.store.chunks.version
        )


def scale_store(
    *,
    store: LanceStore,
    embed: Callable[[list[str]], Any],
    placement: Placement,
    filler_rows: int,
    resident_share: float,
    seed: int,
    say: Callable[[str], None],
    partitions: int = 0,
) -> BenchStore:
    """`store` (the ingested corpus) with `filler_rows` synthetic chunks added, its
    indices and IVF view built, and `resident_share` of the view's partitions as the
    resident budget of `placement`. `partitions` > 0 sets how many partitions the view
    has (the store's policy then gets rows per partition to match; the search's nprobes
    stays the product's); 0 keeps the product's rows per partition. `filler_rows` = 0
    leaves the store as it is."""
    if filler_rows < 0:
        raise ValueError("--store-rows must be 0 or more")
    if partitions < 0:
        raise ValueError("--store-partitions must be 0 or more")
    if not 0 < resident_share <= 1:
        raise ValueError("--store-resident is a share of the view: above 0, at most 1")
    inner = store_retrieve_batch(store=store, embed=embed)
    corpus_rows = store.chunks.count_rows()
    if filler_rows == 0:
        figures = {"regime": "small", "rows": corpus_rows, "filler_rows": 0}
        return BenchStore(store=store, placement=placement, retrieve=inner, figures=figures)
    dim = store.meta.dimension if store.meta is not None else 384
    started = time.perf_counter()
    write_s = bulk_fill(store=store, data=SyntheticChunks(dim=dim, rows=filler_rows, seed=seed))
    t0 = time.perf_counter()
    store.refresh_fulltext_index(force=True)
    store.ensure_scalar_indices()
    index_s = time.perf_counter() - t0
    if partitions:
        rows = store.chunks.count_rows()
        store.maintainer.policy = dataclasses.replace(
            store.maintainer.policy, rows_per_partition=math.ceil(rows / partitions)
        )
    t0 = time.perf_counter()
    built = store.build_view()
    view_s = time.perf_counter() - t0
    view = store.view
    if view is None or view.generation is None:
        raise RuntimeError("the IVF view was not built over the scaled store")
    gen = view.generation
    view_bytes = view.full_resident_bytes()
    budget = resident_budget(view_bytes=view_bytes, share=resident_share)
    placement = dataclasses.replace(
        placement,
        resident_partitions=max(0, round(gen.partitions * resident_share)),
        resident_partition_bytes=budget,
    )
    store.apply_placement(placement=placement)
    files = [p for p in store.folder.rglob("*") if p.is_file()]
    disk_bytes = sum(p.stat().st_size for p in files)

    def retrieve(questions: Sequence[Question]) -> list[SearchResult]:
        # No writes during a run, so the file list taken after the build holds.
        evict_page_cache(files=files)
        return inner(questions)

    figures = {
        "regime": "scaled",
        "rows": store.chunks.count_rows(),
        "corpus_rows": corpus_rows,
        "filler_rows": filler_rows,
        "partitions": gen.partitions,
        "rows_per_partition": store.maintainer.policy.rows_per_partition,
        "nprobes": store.maintainer.policy.nprobes,
        "view_rows": built.get("rows"),
        "view_bytes": view_bytes,
        "store_disk_bytes": disk_bytes,
        "resident_share": resident_share,
        "resident_budget_bytes": budget,
        "write_s": round(write_s, 1),
        "index_s": round(index_s, 1),
        "view_build_s": round(view_s, 1),
        "build_s": round(time.perf_counter() - started, 1),
    }
    say(
        f"store: {figures['rows']:,} chunks ({corpus_rows} ingested + {filler_rows:,} filler), "
        f"IVF view of {gen.partitions} partitions ({view_bytes / 2**20:.0f} MiB, nprobes "
        f"{figures['nprobes']}), {resident_share:.0%} resident ({budget / 2**20:.1f} MiB budget), "
        f"{disk_bytes / 2**20:.0f} MiB on disk, page cache dropped before each retrieval "
        f"batch; built in {figures['build_s']} s"
    )
    bench = BenchStore(store=store, placement=placement, retrieve=retrieve, figures=figures)
    # A first search opens the files and lets the store check the view against the
    # table version it now has (it does so once per version).
    evict_page_cache(files=files)  # what the build left in the page cache
    bench.retrieve([new_question(text="warm-up", k=1, max_new_tokens=1)])
    if not bench.view_in_use():
        raise RuntimeError("the scaled store's searches would not go through its IVF view")
    # Dropping the files is part of every scaled retrieval batch's time (as the model's
    # evictions are of generation's): timed after one batch, what the runs pay.
    t0 = time.perf_counter()
    evict_page_cache(files=files)
    figures["evict_s"] = round(time.perf_counter() - t0, 4)
    return bench
