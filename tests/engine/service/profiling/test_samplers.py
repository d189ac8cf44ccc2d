"""The real samplers on a tiny random model, and `ragdoll profile --active`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.paths import resolve_paths
from engine.rag.answer.in_use import open_model
from engine.runtime.models.synthetic import write_random_model
from engine.runtime.planner.profiling import EXTRACTIVE_NOTE, fit_power_law, load_saved_profile
from engine.service.profiling.auto_profile import Deferred
from engine.service.profiling.samplers import generation_sampler


def test_generation_sampler_times_batches_of_a_tiny_model(tmp_path: Path) -> None:
    folder = write_random_model(folder=tmp_path / "llama", architecture="llama", hidden_size=32)
    answerer = open_model(model_path=folder).answerer
    sample = generation_sampler(model=answerer.model, tokenizer=answerer.tokenizer)
    samples = [(b, sample(b)) for b in (1, 2, 4)]
    assert all(t > 0 for _, t in samples)
    assert fit_power_law(samples=samples).a > 0


def test_profile_active_in_extractive_mode_with_an_empty_index(ragdoll_home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "profile", "--active", "--json", "--budget", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["generation"] is None and result["retrieval"] is None
    assert EXTRACTIVE_NOTE in result["notes"]
    assert load_saved_profile(data_dir=resolve_paths().data) is not None
    shown = subprocess.run(
        [sys.executable, "-m", "app.cli", "profile"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "active profile" in shown.stdout and "chosen: batch 4" in shown.stdout


def test_retrieval_sampler_times_an_indexed_store_under_partial_budgets(tmp_path: Path) -> None:
    import numpy as np
    import pyarrow as pa

    from engine.rag.store.ann_index import IndexPolicy
    from engine.rag.store.lance_store import LanceStore
    from engine.service.profiling.samplers import retrieval_sampler

    dim, rows = 32, 2_000
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(rows, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    policy = IndexPolicy(min_rows=rows, rows_per_partition=250)
    store = LanceStore(folder=tmp_path / "index", index_policy=policy, background=False)
    try:
        store.ensure_embedder(embedder_id="test", dimension=dim)
        store.chunks.add(
            pa.Table.from_pylist(
                [
                    {
                        "chunk_id": f"c{i}",
                        "doc_id": f"d{i // 50}",
                        "path": f"/docs/d{i // 50}.txt",
                        "ordinal": i,
                        "page": None,
                        "char_start": 0,
                        "char_end": 4,
                        "text": f"word{i % 97} filler",
                        "text_hash": f"h{i}",
                        "vector": v.tolist(),
                        "ext": ".txt",
                    }
                    for i, v in enumerate(vectors)
                ]
            )
        )
        assert store.maintain_index() == "built"
        store.set_resident_budget(resident_bytes=123_456)
        sample = retrieval_sampler(store=store, partition_count=8, questions=4)
        times = [sample(p) for p in (1, 8)]
        assert all(t > 0 for t in times)
        assert store.resident_budget == 123_456  # the store's own budget is put back
    finally:
        store.close()


def test_a_generation_sample_stops_at_the_step_a_question_arrives(tmp_path: Path) -> None:
    folder = write_random_model(folder=tmp_path / "llama", architecture="llama", hidden_size=32)
    answerer = open_model(model_path=folder).answerer
    asked: list[int] = []
    armed = threading.Event()

    def wanted() -> bool:
        if armed.is_set():
            asked.append(1)
        return len(asked) > 3  # a question arrives during the timed batch's third step

    sample = generation_sampler(
        model=answerer.model, tokenizer=answerer.tokenizer, max_new_tokens=64, wanted=wanted
    )
    armed.set()
    with pytest.raises(Deferred):
        sample(2)
    # Asked at each step: the batch left at the step the question came, not after 64.
    assert len(asked) < 10
