"""A safetensors model compressed on load (`ragdoll model PATH --weights int4`): written
once into the cache as Q4_0/Q8_0 blocks, reused, held compressed, and answering."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine.errors import ModelLoadError
from engine.rag.answer.in_use import open_model
from engine.runtime.executor.compat import GenerateCompat
from engine.runtime.models.compress import compute_dtype_of, weights_folder
from engine.runtime.models.gguf_file import gguf_source
from engine.runtime.models.synthetic import write_random_model
from engine.runtime.planner.stored import load_held_spec
from tests.support.engine import RunningEngine


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))


@pytest.mark.parametrize(("weights", "qtype"), [("int8", "Q8_0"), ("int4", "Q4_0")])
def test_compressed_once_reused_and_held_compressed(
    tmp_path: Path, weights: str, qtype: str
) -> None:
    hf = write_random_model(
        folder=tmp_path / "tiny", architecture="qwen2", hidden_size=128, num_layers=2, seed=6
    )
    cache = tmp_path / "cache"
    folder = weights_folder(folder=hf, weights=weights, cache=cache)
    source = gguf_source(folder)
    assert source is not None and source.is_file()
    written = source.stat().st_mtime_ns
    assert weights_folder(folder=hf, weights=weights, cache=cache) == folder
    assert source.stat().st_mtime_ns == written  # reused, not written again
    assert (folder / "tokenizer.json").read_bytes() == (hf / "tokenizer.json").read_bytes()

    spec = load_held_spec(source=folder, dtype="float32", cpu=True)
    assert spec.weight_format == qtype and spec.computed_compressed
    in_use = open_model(model_path=folder, device="cpu", dtype=compute_dtype_of(weights))
    model = in_use.answerer.model
    assert isinstance(model, GenerateCompat)
    assert model.executor.store.is_packed("layer.0")
    held = model.executor.store.held_bytes()["layer.0"]
    assert held == spec.layer_bytes[0]
    out = model.generate(input_ids=torch.tensor([[1, 40, 41, 42]]), max_new_tokens=4)
    assert out.shape[1] == 8

    assert weights_folder(folder=hf, weights="bf16", cache=cache) == hf
    assert compute_dtype_of("bf16") == "bfloat16"
    with pytest.raises(ModelLoadError, match="already a GGUF"):
        weights_folder(folder=folder, weights="int8", cache=cache)
    with pytest.raises(ModelLoadError, match="Unknown weight format"):
        weights_folder(folder=hf, weights="int3", cache=cache)


def test_ragdoll_model_weights_int4_answers_through_the_engine(
    engine: RunningEngine, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text("# Apiary\n\nThe honey is extracted in late August.\n")
    assert engine.ingest(notes).state == "done"
    hf = write_random_model(folder=tmp_path / "tiny-llama", architecture="llama")

    result = engine.ragdoll("model", str(hf), "--weights", "int4")
    assert result.returncode == 0, result.stderr
    assert "(weights: int4)" in result.stdout
    settings = engine.client.settings()
    assert settings.model == str(hf) and settings.model_weights == "int4"
    answer = engine.client.ask(question="When is the honey extracted?")
    assert answer.mode == "generative"
    assert answer.citations and answer.citations[0].path.endswith("bees.md")
