"""The streamed forward computes what transformers computes, under every placement."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.runtime.executor.checkpoint import EMBED, HEAD, layer_unit
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate_ids, left_pad, positions_of
from tests.engine.runtime.executor.conftest import make_placement

PROMPTS = [[1, 40, 41, 42, 43, 44, 45, 46], [1, 50, 51, 52], [1, 60, 61, 62, 63, 64]]

PLACEMENTS = {
    "resident": {"layer_tiers": ["cpu"] * 4},
    "half_disk": {"layer_tiers": ["cpu", "disk", "cpu", "disk"]},
    "all_disk_no_prefetch": {
        "layer_tiers": ["disk"] * 4,
        "embed_tier": "disk",
        "head_tier": "disk",
        "depth_prefill": 0,
        "depth_decode": 0,
    },
    "all_disk_deep": {
        "layer_tiers": ["disk"] * 4,
        "head_tier": "disk",
        "depth_prefill": 2,
        "depth_decode": 5,
    },
    # KV of the last two layers kept on the host. On a machine without a GPU the host is
    # the compute device: the tiered cache layers and the tiered attention run, but no
    # bytes cross a link (that part needs a GPU).
    "kv_half_host_copy": {"kv_host_layers": 2, "kv_mode": "copy"},
    "kv_half_host_cpu_compute": {
        "layer_tiers": ["cpu", "disk", "cpu", "disk"],
        "kv_host_layers": 2,
        "kv_mode": "cpu_compute",
    },
}
MODEL_KEYS = ("kv_host_layers", "kv_mode")


def _open(model_dir: Path, name: str) -> StreamingModel:
    spec = dict(PLACEMENTS[name])
    extra = {k: spec.pop(k) for k in MODEL_KEYS if k in spec}
    return StreamingModel(
        model_dir=model_dir, placement=make_placement(model_dir=model_dir, **spec), **extra
    )


@pytest.fixture(params=["llama", "qwen2", "mistral"])
def model_dir(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"{request.param}_dir")


@pytest.fixture(scope="module")
def references() -> dict[Path, torch.nn.Module]:
    return {}


def _reference(model_dir: Path, cache: dict[Path, torch.nn.Module]) -> torch.nn.Module:
    if model_dir not in cache:
        cache[model_dir] = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    return cache[model_dir]


@pytest.mark.parametrize("placement_name", list(PLACEMENTS))
def test_logits_match_transformers(
    model_dir: Path, placement_name: str, references: dict[Path, torch.nn.Module]
) -> None:
    ref = _reference(model_dir, references)
    model = _open(model_dir, placement_name)
    try:
        ids, mask = left_pad(PROMPTS, pad=0)
        positions = positions_of(mask)
        cache = model.new_cache()
        ours = model.forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            phase="prefill",
            last_only=False,
        )
        with torch.no_grad():
            theirs = ref(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        real = mask.bool()
        assert ours.shape == theirs.shape
        assert torch.isfinite(ours[real]).all()
        assert (ours - theirs)[real].abs().max().item() < 1e-4

        # One decode step on the cache must match a full forward over the longer input.
        step = torch.tensor([[7], [8], [9]])
        mask2 = torch.cat([mask, torch.ones(3, 1, dtype=mask.dtype)], dim=1)
        ours_step = model.forward(
            input_ids=step,
            attention_mask=mask2,
            position_ids=positions[:, -1:] + 1,
            cache=cache,
            phase="decode",
        )
        with torch.no_grad():
            full = ref(
                input_ids=torch.cat([ids, step], dim=1),
                attention_mask=mask2,
                position_ids=positions_of(mask2),
            ).logits[:, -1:, :]
        assert (ours_step - full).abs().max().item() < 1e-4
    finally:
        model.close()


@pytest.mark.parametrize(
    "placement_name", ["resident", "half_disk", "all_disk_deep", "kv_half_host_cpu_compute"]
)
def test_greedy_tokens_match_transformers_generate(
    model_dir: Path, placement_name: str, references: dict[Path, torch.nn.Module]
) -> None:
    ref = _reference(model_dir, references)
    model = _open(model_dir, placement_name)
    try:
        new = 10
        ours = generate_ids(
            model=model,
            requests=[GenerationRequest(prompt_ids=tuple(p), max_new_tokens=new) for p in PROMPTS],
        )
    finally:
        model.close()
    eos = ref.config.eos_token_id
    for prompt, got in zip(PROMPTS, ours, strict=True):
        with torch.no_grad():
            out = ref.generate(
                torch.tensor([prompt]),
                attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                max_new_tokens=new,
                do_sample=False,
            )
        expected = out[0, len(prompt) :].tolist()
        if eos in expected:
            expected = expected[: expected.index(eos) + 1]
        assert got == expected


def test_units_follow_the_placement(llama_dir: Path) -> None:
    placement = make_placement(
        model_dir=llama_dir, layer_tiers=["cpu", "disk", "cpu", "disk"], head_tier="disk"
    )
    model = StreamingModel(model_dir=llama_dir, placement=placement)
    try:
        store = model.store
        assert not store.is_streamed(EMBED)
        assert [store.is_streamed(layer_unit(i)) for i in range(4)] == [False, True, False, True]
        assert store.is_streamed(HEAD)
    finally:
        model.close()


def test_placement_for_another_model_is_refused(llama_dir: Path) -> None:
    placement = make_placement(model_dir=llama_dir, layer_tiers=["cpu"] * 3)
    with pytest.raises(ValueError, match="3 layers"):
        StreamingModel(model_dir=llama_dir, placement=placement)


def test_kv_half_on_the_host_uses_tiered_layers_and_attention(llama_dir: Path) -> None:
    from engine.runtime.executor.kv import TIERED_ATTENTION, is_host_layer

    model = _open(llama_dir, "kv_half_host_cpu_compute")
    try:
        cache = model.new_cache()
        host = [is_host_layer(layer) for layer in cache.layers]
        assert host == [False, False, True, True]
        assert model._attn_config._attn_implementation == TIERED_ATTENTION
    finally:
        model.close()


def test_an_architecture_it_does_not_run_is_refused_by_name(
    llama_dir: Path, tmp_path: Path
) -> None:
    """Gemma 2 scales its embeddings and soft-caps its logits outside the layers: run as
    embed -> layers -> norm -> head it would answer nonsense, so it must not load."""
    from transformers import Gemma2Config

    Gemma2Config(
        num_hidden_layers=4,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
    ).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="runs llama, mistral, qwen2 models; this one is 'gemma2'"):
        StreamingModel(model_dir=tmp_path, placement=make_placement(model_dir=llama_dir))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_decode_steps_on_a_gpu_never_run_cudnn_attention(llama_dir: Path) -> None:
    """cuDNN plans anew for each key length, so a decode step (a new length each time)
    would pay that plan; the executor's attention runs without it."""
    from torch.profiler import ProfilerActivity, profile

    from engine.runtime.hardware.profile import synthetic_profile
    from engine.runtime.planner.model_spec import load_model_spec
    from engine.runtime.planner.placement import StoreSpec, Workload
    from engine.runtime.planner.planner import plan

    gib = 1 << 30
    placement = plan(
        hardware=synthetic_profile(gpu_bytes=8 * gib, ram_bytes=16 * gib, disk_bytes=100 * gib),
        model=load_model_spec(source=llama_dir),
        store=StoreSpec.default(),
        workload=Workload(batch=1, context_tokens=256),
    )
    model = StreamingModel(model_dir=llama_dir, placement=placement, dtype=torch.bfloat16)
    try:
        assert model.device.type == "cuda" and model._dense
        cache = model.new_cache()
        ids = torch.tensor([PROMPTS[0]])
        mask = torch.ones_like(ids)
        model.forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions_of(mask),
            cache=cache,
            phase="prefill",
        )
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for step in range(3):
                mask = torch.cat([mask, torch.ones(1, 1, dtype=mask.dtype)], dim=1)
                model.forward(
                    input_ids=torch.tensor([[7 + step]]),
                    attention_mask=mask,
                    position_ids=torch.tensor([[mask.shape[1] - 1]]),
                    cache=cache,
                    phase="decode",
                )
        names = {e.key for e in prof.key_averages()}
        assert any("attention" in n for n in names)
        assert not any("cudnn_attention" in n for n in names)
    finally:
        model.close()
