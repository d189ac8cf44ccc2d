"""Random-weight models written to disk must load like downloaded ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from engine.runtime.models.synthetic import write_random_model


@pytest.mark.parametrize("architecture", ["llama", "qwen2", "mistral"])
def test_written_model_loads_offline_and_generates(tmp_path: Path, architecture: str) -> None:
    folder = write_random_model(folder=tmp_path / "m", architecture=architecture)

    assert {"config.json", "generation_config.json", "model.safetensors"} <= {
        p.name for p in folder.iterdir()
    }
    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    assert config.model_type == architecture
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        folder, local_files_only=True, use_safetensors=True
    )
    assert config.vocab_size == len(tokenizer)
    assert model.get_input_embeddings().weight.shape == (len(tokenizer), 64)

    ids = tokenizer("The filter is cleaned monthly.", return_tensors="pt").input_ids
    out = model.generate(ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids.shape[1]


def test_tokenizer_round_trips_text_and_has_a_chat_template(tmp_path: Path) -> None:
    folder = write_random_model(folder=tmp_path / "m")
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)

    text = "Water boils at 100 °C; the invoice is due in 30 days."
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == text
    assert 200 <= len(tokenizer) <= 2048
    assert None not in (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id)

    prompt = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert prompt.startswith(tokenizer.bos_token)
    assert "Be brief." in prompt and "Hi?" in prompt
    assert prompt.endswith("<|assistant|>\n")


def test_shapes_dtype_and_seed_follow_the_arguments(tmp_path: Path) -> None:
    folder = write_random_model(
        folder=tmp_path / "a",
        hidden_size=96,
        num_layers=3,
        num_heads=6,
        num_kv_heads=3,
        intermediate_size=160,
        vocab_size=1500,
        max_position_embeddings=512,
        dtype="bfloat16",
        seed=7,
    )
    config = json.loads((folder / "config.json").read_text())
    assert config["hidden_size"] == 96
    assert config["num_hidden_layers"] == 3
    assert config["num_key_value_heads"] == 3
    assert config["vocab_size"] == 1500
    assert config["max_position_embeddings"] == 512
    with safe_open(folder / "model.safetensors", framework="pt") as f:
        embed = f.get_tensor("model.embed_tokens.weight")
    assert embed.dtype == torch.bfloat16
    assert embed.shape == (1500, 96)

    again = write_random_model(
        folder=tmp_path / "b",
        hidden_size=96,
        num_layers=3,
        num_heads=6,
        num_kv_heads=3,
        intermediate_size=160,
        vocab_size=1500,
        max_position_embeddings=512,
        dtype="bfloat16",
        seed=7,
    )
    other = write_random_model(
        folder=tmp_path / "c",
        hidden_size=96,
        num_layers=3,
        num_heads=6,
        num_kv_heads=3,
        intermediate_size=160,
        vocab_size=1500,
        max_position_embeddings=512,
        dtype="bfloat16",
        seed=8,
    )
    with safe_open(again / "model.safetensors", framework="pt") as f:
        assert torch.equal(f.get_tensor("model.embed_tokens.weight"), embed)
    with safe_open(other / "model.safetensors", framework="pt") as f:
        assert not torch.equal(f.get_tensor("model.embed_tokens.weight"), embed)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hidden_size": 60, "num_heads": 8}, "divisible"),
        ({"num_heads": 4, "num_kv_heads": 3}, "divisible"),
        ({"vocab_size": 10}, "smaller than the tokenizer"),
        ({"dtype": "int8"}, "dtype"),
        ({"architecture": "gpt2"}, "architecture"),
    ],
)
def test_bad_arguments_are_refused(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        write_random_model(folder=tmp_path / "m", **kwargs)


@pytest.mark.slow
def test_benchmark_sized_model_is_written_in_shards(tmp_path: Path) -> None:
    folder = write_random_model(
        folder=tmp_path / "big",
        hidden_size=2048,
        num_layers=16,
        num_heads=16,
        num_kv_heads=4,
        intermediate_size=5632,
        dtype="bfloat16",
    )
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) >= 2
    assert sum((folder / s).stat().st_size for s in shards) > 1_000_000_000
    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    assert config.num_hidden_layers == 16
