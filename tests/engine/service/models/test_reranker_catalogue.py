"""The recommended rerankers: sizes from their bundled configs, where the planner puts
each on described machines, and how they appear among the recommendations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.paths import resolve_paths
from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.planner.placement import DEFAULT_VECTOR_DIM
from engine.runtime.planner.report import store_spec
from engine.service.models.catalogue import download_folder, recommended
from engine.service.models.download import COMPLETE_MARKER
from engine.service.models.reranker_catalogue import (
    encoder_size,
    load_rerankers,
    reranker_device,
    size_of_config,
)
from engine.service.ranker_choice import setting_of

GIB = 2**30
MINILM = "cross-encoder/ms-marco-MiniLM-L-6-v2"
BGE_M3 = "BAAI/bge-reranker-v2-m3"


@pytest.mark.parametrize("entry", load_rerankers(), ids=lambda e: e.id)
def test_each_size_is_what_transformers_builds_and_the_download_holds_it(entry) -> None:  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(entry.config_path())
    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(config)
    size = size_of_config(entry.config_path())
    assert size.parameters == sum(p.numel() for p in model.parameters())
    embeddings = model.base_model.embeddings
    assert size.embedding_parameters == sum(p.numel() for p in embeddings.parameters()) - sum(
        p.numel() for p in embeddings.LayerNorm.parameters()
    )
    # The download is the float32 safetensors plus tokenizer files: a little more.
    assert size.float32_bytes < entry.download_bytes < 1.05 * size.float32_bytes


def test_known_sizes() -> None:
    sizes = {e.id: size_of_config(e.config_path()).parameters for e in load_rerankers()}
    assert sizes[MINILM] == 22_713_601  # as the model card and the hub list them
    assert sizes[BGE_M3] == 567_755_777


def test_where_the_planner_puts_a_reranker() -> None:
    small = size_of_config(next(e for e in load_rerankers() if e.id == MINILM).config_path())
    large = size_of_config(next(e for e in load_rerankers() if e.id == BGE_M3).config_path())
    gpu = synthetic_profile(gpu_bytes=24 * GIB, ram_bytes=32 * GIB, disk_bytes=500 * GIB)
    placed = reranker_device(hardware=gpu, size=large)
    assert (placed.device, placed.verdict) == ("cuda", "gpu")
    # A GPU without room to spare is kept for the language model: the CPU in int8.
    tight = synthetic_profile(gpu_bytes=4 * GIB, ram_bytes=32 * GIB, disk_bytes=500 * GIB)
    placed = reranker_device(hardware=tight, size=large)
    assert (placed.device, placed.verdict) == ("cpu", "ram") and "GPU kept" in placed.words
    assert placed.memory_bytes == large.int8_bytes < large.float32_bytes
    two = synthetic_profile(gpu_bytes=0, ram_bytes=8 * GIB, disk_bytes=500 * GIB, cpu_cores=2)
    eight = synthetic_profile(gpu_bytes=0, ram_bytes=8 * GIB, disk_bytes=500 * GIB, cpu_cores=8)
    on_two = reranker_device(hardware=two, size=small).seconds_per_question
    on_eight = reranker_device(hardware=eight, size=small).seconds_per_question
    assert on_two is not None and on_eight is not None and on_two == pytest.approx(4 * on_eight)
    # The large one costs far more per question than the small one on the same CPU.
    big_cost = reranker_device(hardware=two, size=large).seconds_per_question
    assert big_cost is not None and big_cost > 20 * on_two
    tiny = synthetic_profile(gpu_bytes=0, ram_bytes=GIB, disk_bytes=500 * GIB)
    placed = reranker_device(hardware=tiny, size=large)
    assert placed.verdict == "too_large" and placed.seconds_per_question is None


def test_an_xlm_roberta_head_differs_from_a_bert_pooler_only_in_name() -> None:
    bert = json.loads(next(e for e in load_rerankers() if e.id == MINILM).config_path().read_text())
    as_roberta = {**bert, "model_type": "xlm-roberta"}
    assert encoder_size(bert) == encoder_size(as_roberta)


def test_recommended_lists_the_rerankers_after_the_models(tmp_path: Path) -> None:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    hardware = synthetic_profile(gpu_bytes=0, ram_bytes=16 * GIB, disk_bytes=500 * GIB)
    store = store_spec(chunks=0, vector_dim=DEFAULT_VECTOR_DIM)

    def listed(chosen: str | None) -> list:  # type: ignore[type-arg]
        return recommended(
            paths=paths, chosen_model=None, store=store, hardware=hardware, chosen_reranker=chosen
        ).models

    models = listed(None)
    roles = [m.role for m in models]
    assert roles == sorted(roles)  # "model" rows first, then "reranker"
    rerankers = {m.id: m for m in models if m.role == "reranker"}
    assert set(rerankers) == {MINILM, BGE_M3}
    assert all(not m.installed and m.expected_tokens_per_s is None for m in rerankers.values())
    assert rerankers[MINILM].verdict == "runs on CPU (int8)"

    # Downloaded by the Models dialog: installed, and choosing its id means its folder.
    folder = download_folder(repo_id=MINILM, paths=paths)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / COMPLETE_MARKER).write_text("")
    assert setting_of(MINILM, paths=paths) == str(folder)
    assert setting_of(BGE_M3, paths=paths) == BGE_M3  # not downloaded: the id as given
    chosen = {m.id: m for m in listed(str(folder)) if m.role == "reranker"}
    assert chosen[MINILM].installed and chosen[MINILM].chosen
    assert chosen[MINILM].installed_path == str(folder) and not chosen[BGE_M3].chosen
