"""The weight store: placement by unit, nothing held for disk units, sharded checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.runtime.executor.checkpoint import (
    EMBED,
    HEAD,
    checkpoint_files,
    index_checkpoint,
    layer_unit,
)
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate_ids
from engine.runtime.executor.page_cache import evict_page_cache
from tests.engine.runtime.executor.conftest import make_placement


def _checkpoint_bytes(model_dir: Path) -> dict[str, int]:
    return {
        unit: sum(s.end - s.start for s in sources)
        for unit, sources in index_checkpoint(model_dir).items()
    }


def test_disk_layers_hold_nothing_between_uses(llama_dir: Path) -> None:
    placement = make_placement(
        model_dir=llama_dir, layer_tiers=["cpu", "disk", "cpu", "disk"], depth_decode=1
    )
    model = StreamingModel(model_dir=llama_dir, placement=placement)
    try:
        on_disk = _checkpoint_bytes(llama_dir)
        held = model.store.held_bytes()
        for unit in (layer_unit(1), layer_unit(3)):
            assert held[unit] == 0
        for unit in (EMBED, layer_unit(0), layer_unit(2), HEAD):
            assert held[unit] == on_disk[unit]
        # Never the whole model at load: what is held is the resident part only.
        assert sum(held.values()) < sum(on_disk.values())
        generate_ids(
            model=model, requests=[GenerationRequest(prompt_ids=(1, 2, 3), max_new_tokens=4)]
        )
        held = model.store.held_bytes()
        assert held[layer_unit(1)] == held[layer_unit(3)] == 0
        assert model.store.stats().streamed_peak <= 2  # depth 1 + the one computing
    finally:
        model.close()


def test_sharded_checkpoint_loads_and_matches(llama_dir: Path, tmp_path: Path) -> None:
    ref = AutoModelForCausalLM.from_pretrained(llama_dir).eval()
    sharded = tmp_path / "sharded"
    ref.save_pretrained(sharded, max_shard_size="150KB")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (sharded / name).write_bytes((llama_dir / name).read_bytes())
    assert len(checkpoint_files(sharded)) > 1
    placement = make_placement(model_dir=sharded, layer_tiers=["disk", "cpu", "disk", "cpu"])
    model = StreamingModel(model_dir=sharded, placement=placement)
    try:
        ids = torch.tensor([[1, 40, 41, 42, 43]])
        mask = torch.ones_like(ids)
        ours = model.forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=torch.arange(5).unsqueeze(0),
            cache=model.new_cache(),
            phase="prefill",
            last_only=False,
        )
        with torch.no_grad():
            theirs = ref(input_ids=ids).logits
        assert (ours - theirs).abs().max().item() < 1e-4
        assert model.store.disk_files()  # the disk layers' shards
    finally:
        model.close()


def test_evicting_pages_keeps_results(llama_dir: Path) -> None:
    placement = make_placement(model_dir=llama_dir, layer_tiers=["disk"] * 4, head_tier="disk")
    prompt = GenerationRequest(prompt_ids=(1, 40, 41), max_new_tokens=4)
    plain = StreamingModel(model_dir=llama_dir, placement=placement)
    evicting = StreamingModel(model_dir=llama_dir, placement=placement, evict_after_read=True)
    try:
        evict_page_cache(files=plain.store.disk_files())
        assert generate_ids(model=plain, requests=[prompt]) == generate_ids(
            model=evicting, requests=[prompt]
        )
    finally:
        plain.close()
        evicting.close()


def test_tied_head_reads_the_embedding(tmp_path: Path, llama_dir: Path) -> None:
    ref = AutoModelForCausalLM.from_pretrained(llama_dir, tie_word_embeddings=True).eval()
    ref.tie_weights()
    tied = tmp_path / "tied"
    ref.save_pretrained(tied)
    assert not any(s.param.startswith("lm_head") for s in index_checkpoint(tied).get(HEAD, []))
    placement = make_placement(model_dir=tied, layer_tiers=["cpu"] * 4, head_tier="disk")
    model = StreamingModel(model_dir=tied, placement=placement)
    try:
        ids = torch.tensor([[1, 40, 41]])
        ours = model.forward(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            position_ids=torch.arange(3).unsqueeze(0),
            cache=model.new_cache(),
            phase="prefill",
            last_only=False,
        )
        with torch.no_grad():
            theirs = ref(input_ids=ids).logits
        assert (ours - theirs).abs().max().item() < 1e-4
    finally:
        model.close()


def test_missing_weights_are_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        checkpoint_files(tmp_path)


@pytest.mark.parametrize(
    ("compressed", "dtype"), [(False, torch.float32), (True, torch.float32), (True, None)]
)
def test_streamed_gguf_layers_are_not_kept_after_use(
    llama_dir: Path, tmp_path: Path, compressed: bool, dtype: torch.dtype | None
) -> None:
    """Streamed GGUF layers must not pile up: decoded at read (`compressed=False`) they
    are fresh memory that must not enter the read pool (which only safetensors reads
    take buffers from); held compressed, their decode buffers are reused, so the pool
    holds about two decoded layers however many steps ran."""
    from gguf import GGMLQuantizationType
    from safetensors.torch import load_file

    from engine.runtime.models.gguf_file import companion_folder
    from engine.runtime.models.gguf_writer import write_gguf

    gguf = write_gguf(model_dir=llama_dir, out=tmp_path / "m.gguf", qtype=GGMLQuantizationType.Q8_0)
    folder = companion_folder(gguf_path=gguf, cache=tmp_path / "cache")
    placement = make_placement(model_dir=folder, layer_tiers=["disk"] * 4, depth_decode=1)
    layer_bytes = sum(
        t.numel() * 4
        for f in llama_dir.glob("*.safetensors")
        for name, t in load_file(str(f)).items()
        if ".layers.0." in name
    )
    # dtype None: the model's own (bf16 where this CPU computes it fast), decoded
    # without the pool's buffers.
    model = StreamingModel(
        model_dir=folder, placement=placement, compressed=compressed, dtype=dtype
    )
    try:
        pooled = []
        for tokens in (3, 9, 20):
            generate_ids(
                model=model,
                requests=[GenerationRequest(prompt_ids=(1, 2, 3), max_new_tokens=tokens)],
            )
            pooled.append(model.store.stats().pooled_bytes)
        assert model.store.stats().fetches >= 4 * 32
        if compressed:
            assert max(pooled) <= 3 * layer_bytes  # reused, not grown with the steps
        else:
            assert pooled == [0, 0, 0]
    finally:
        model.close()
