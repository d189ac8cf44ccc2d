"""Byte counts from config.json must equal what transformers actually builds."""

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import UnsupportedArchitectureError
from engine.runtime.planner.model_spec import load_model_spec, model_spec_from_config

CONFIGS = Path(__file__).resolve().parents[4] / "resources" / "model_configs"

_TINY: dict[str, dict[str, Any]] = {
    "llama": {"num_key_value_heads": 2, "tie_word_embeddings": False},
    "llama_biased_tied": {
        "model_type": "llama",
        "num_key_value_heads": 2,
        "attention_bias": True,
        "mlp_bias": True,
        "tie_word_embeddings": True,
    },
    "qwen2": {"num_key_value_heads": 2, "tie_word_embeddings": False},
    "qwen2_tied": {"model_type": "qwen2", "num_key_value_heads": 1, "tie_word_embeddings": True},
    "mistral": {"num_key_value_heads": 2},
    # Gemma: head_dim independent of hidden/heads, tied embeddings by default.
    "gemma": {"num_key_value_heads": 1, "head_dim": 24},
    "gemma2": {"num_key_value_heads": 2, "head_dim": 24, "sliding_window": 16},
    "qwen3": {"num_key_value_heads": 2, "head_dim": 8},
    "gemma3_text": {"num_key_value_heads": 2, "head_dim": 16},
}


def _tiny_config(name: str) -> dict[str, Any]:
    extra = dict(_TINY[name])
    return {
        "model_type": extra.pop("model_type", name),
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_attention_heads": 4,
        "num_hidden_layers": 3,
        "vocab_size": 211,
        "torch_dtype": "bfloat16",
        **extra,
    }


def _meta_parameter_count(config: dict[str, Any]) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = dict(config)
    cfg = AutoConfig.for_model(fields.pop("model_type"), **fields)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    # parameters() yields a tied weight once, as it is stored once.
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(_TINY))
def test_bytes_equal_meta_device_parameters(name: str) -> None:
    config = _tiny_config(name)
    spec = model_spec_from_config(config=config)
    numel = _meta_parameter_count(config)
    assert spec.parameter_count == numel
    assert spec.weight_bytes == numel * 2
    total = sum(spec.layer_bytes) + spec.embed_bytes + spec.head_bytes + spec.final_norm_bytes
    assert total == spec.weight_bytes


def test_bundled_llama_8b_matches_meta_device() -> None:
    config = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    assert load_model_spec(source=config).parameter_count == _meta_parameter_count(config)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        # Published parameter counts of the real checkpoints.
        ("llama-3.1-8b", 8_030_261_248),
        ("llama-3.1-70b", 70_553_706_496),
        ("qwen2-7b", 7_615_616_512),
        ("mistral-7b-v0.1", 7_241_732_096),
        ("gemma-7b", 8_537_680_896),
        ("gemma-2-9b", 9_241_705_984),
    ],
)
def test_bundled_configs_match_published_sizes(name: str, params: int) -> None:
    spec = load_model_spec(source=CONFIGS / f"{name}.json")
    assert spec.parameter_count == params
    assert spec.weight_bytes == params * spec.dtype_bytes


def test_gqa_kv_bytes_per_token() -> None:
    llama = load_model_spec(source=CONFIGS / "llama-3.1-8b.json")
    assert llama.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131072
    assert llama.kv_bytes(batch=4, tokens=1000) == 4 * 1000 * 131072
    seventy = load_model_spec(source=CONFIGS / "llama-3.1-70b.json")
    assert seventy.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2
    qwen = load_model_spec(source=CONFIGS / "qwen2-7b.json")
    assert qwen.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2
    # Gemma's head_dim (256) is not hidden/heads (192): it must come from the config.
    gemma = load_model_spec(source=CONFIGS / "gemma-7b.json")
    assert gemma.head_dim == 256
    assert gemma.kv_bytes_per_token == 2 * 28 * 16 * 256 * 2


def test_tied_embeddings_have_no_head_bytes() -> None:
    gemma = load_model_spec(source=CONFIGS / "gemma-2-9b.json")
    assert gemma.tie_word_embeddings and gemma.head_bytes == 0
    llama = load_model_spec(source=CONFIGS / "llama-3.1-8b.json")
    assert not llama.tie_word_embeddings and llama.head_bytes == llama.embed_bytes


def test_dtype_from_config_and_override() -> None:
    gemma2 = load_model_spec(source=CONFIGS / "gemma-2-9b.json")
    assert gemma2.dtype == "float32" and gemma2.dtype_bytes == 4
    half = load_model_spec(source=CONFIGS / "gemma-2-9b.json", dtype="bf16")
    assert half.dtype == "bfloat16"
    assert half.weight_bytes * 2 == gemma2.weight_bytes
    assert half.kv_bytes_per_token * 2 == gemma2.kv_bytes_per_token
    new_style = {**_tiny_config("llama"), "dtype": "float16"}
    del new_style["torch_dtype"]
    assert model_spec_from_config(config=new_style).dtype == "float16"


def test_sources_folder_file_and_dict(tmp_path: Path) -> None:
    config = _tiny_config("mistral")
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    from_folder = load_model_spec(source=folder)
    from_file = load_model_spec(source=folder / "config.json")
    from_dict = load_model_spec(source=config)
    assert from_folder.name == "my-model"
    assert from_folder.weight_bytes == from_file.weight_bytes == from_dict.weight_bytes
    with pytest.raises(FileNotFoundError):
        load_model_spec(source=tmp_path / "absent")


def test_unknown_architecture_names_what_is_missing() -> None:
    with pytest.raises(UnsupportedArchitectureError, match=r"'gpt2'.*supported: llama"):
        model_spec_from_config(config={"model_type": "gpt2", "n_layer": 12})
    with pytest.raises(UnsupportedArchitectureError, match=r"no model_type.*FooForCausalLM"):
        model_spec_from_config(config={"architectures": ["FooForCausalLM"]})
    partial = _tiny_config("llama")
    del partial["intermediate_size"], partial["vocab_size"]
    with pytest.raises(UnsupportedArchitectureError, match="intermediate_size, vocab_size"):
        model_spec_from_config(config=partial)
    quantized = {**_tiny_config("llama"), "quantization_config": {"quant_method": "awq"}}
    with pytest.raises(UnsupportedArchitectureError, match="awq"):
        model_spec_from_config(config=quantized)
    # It is a ValueError too, for callers that know nothing of RAGDoll.
    with pytest.raises(ValueError):
        model_spec_from_config(config={**_tiny_config("llama"), "torch_dtype": "int4"})


def test_workspace_formula() -> None:
    spec = model_spec_from_config(config=_tiny_config("llama"))
    h, i, v, heads, kv_dim = 64, 96, 211, 4, 2 * 16
    b, s, a = 2, 10, 2
    n = b * s
    expected = (
        n * a * (3 * h + 2 * heads * 16 + 2 * kv_dim)
        + b * s * s * a  # SDPA's mask; the scores are never materialised
        + 3 * n * i * a
        + b * v * (a + 4)
    )
    assert spec.prefill_workspace_bytes(batch=b, prompt_tokens=s) == expected
    decode = spec.decode_workspace_bytes(batch=b, context_tokens=s)
    assert decode < expected
    assert spec.prefill_workspace_bytes(batch=2 * b, prompt_tokens=s) > expected
