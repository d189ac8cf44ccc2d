"""The scaled store of `bench pipeline`: filler beside the corpus, searched through the
IVF view under the Placement's resident budget, the page cache dropped per batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import pipeline_store
from bench.pipeline_store import scale_store
from engine.rag.pipeline.requests import new_question
from engine.rag.store.lance_store import LanceStore
from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.planner import StoreSpec, Workload, load_model_spec, plan

CONFIGS = Path(__file__).resolve().parents[2] / "resources" / "model_configs"
DIM = 384


def _placement() -> Any:
    return plan(
        hardware=synthetic_profile(gpu_bytes=0, ram_bytes=32 * 2**30, disk_bytes=500 * 10**9),
        model=load_model_spec(source=CONFIGS / "llama-3.1-8b.json"),
        store=StoreSpec.default(),
        workload=Workload(batch=1, context_tokens=512),
    )


def _embed(texts: list[str]) -> np.ndarray:
    rng = np.random.default_rng(len(texts))
    v = rng.normal(size=(len(texts), DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = LanceStore(folder=tmp_path / "index", background=False)
    s.ensure_embedder(embedder_id="synthetic", dimension=DIM)
    yield s
    s.close()


def test_filler_is_searched_through_the_view_under_the_budget(
    store: LanceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    evicted: list[list[Path]] = []
    monkeypatch.setattr(
        pipeline_store, "evict_page_cache", lambda *, files: evicted.append(list(files))
    )
    bench = scale_store(
        store=store,
        embed=_embed,
        placement=_placement(),
        filler_rows=9_000,
        resident_share=0.25,
        seed=1,
        say=lambda _: None,
        partitions=3,
    )
    f = bench.figures
    assert f["regime"] == "scaled" and f["rows"] == 9_000 == store.chunks.count_rows()
    # As many partitions as asked for; the product's nprobes (20) then probes them all.
    assert f["partitions"] == 3 == store.view.generation.partitions  # type: ignore[union-attr]
    assert f["rows_per_partition"] == 3_000 and f["view_rows"] == 9_000
    assert f["evict_s"] >= 0
    # The budget went through the Placement, as the product applies it.
    assert bench.placement.resident_partition_bytes == f["resident_budget_bytes"]
    assert store.resident_budget == f["resident_budget_bytes"]
    assert f["resident_budget_bytes"] == pytest.approx(f["view_bytes"] * 0.25 * 4 / 3, abs=1)
    assert bench.view_in_use()

    view = store.view
    assert view is not None
    calls: list[int] = []
    search = view.search
    monkeypatch.setattr(view, "search", lambda *a, **k: calls.append(1) or search(*a, **k))
    questions = [new_question(text=f"question {i}", k=5, max_new_tokens=4) for i in range(3)]
    results = bench.retrieve(questions)
    assert len(results) == 3 and all(len(r.hits) == 5 for r in results)
    assert calls, "the vector side did not go through the IVF view"
    # The store's files, the view's among them, left the page cache before the batch.
    assert evicted and any("ivf" in p.parts for p in evicted[-1])
    assert all(p.is_relative_to(store.folder) for p in evicted[-1])
    assert view.cache.resident_bytes <= f["resident_budget_bytes"]


def test_no_filler_keeps_the_small_regime(
    store: LanceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    evicted: list[Any] = []
    monkeypatch.setattr(pipeline_store, "evict_page_cache", lambda *, files: evicted.append(files))
    placement = _placement()
    bench = scale_store(
        store=store,
        embed=_embed,
        placement=placement,
        filler_rows=0,
        resident_share=0.05,
        seed=1,
        say=lambda _: None,
    )
    assert bench.figures["regime"] == "small" and bench.placement is placement
    bench.retrieve([new_question(text="anything", k=5, max_new_tokens=4)])
    assert evicted == [] and store.chunks.count_rows() == 0


@pytest.mark.parametrize(
    "rows, share, partitions", [(-1, 0.05, 0), (10, 0.0, 0), (10, 1.5, 0), (10, 0.05, -1)]
)
def test_bad_store_settings_are_refused(
    store: LanceStore, rows: int, share: float, partitions: int
) -> None:
    with pytest.raises(ValueError):
        scale_store(
            store=store,
            embed=_embed,
            placement=_placement(),
            filler_rows=rows,
            resident_share=share,
            seed=1,
            say=lambda _: None,
            partitions=partitions,
        )
    assert store.chunks.count_rows() == 0  # refused before anything was written
