"""The random Llamas of `ragdoll bench prefix`: the shapes it names and the folders it writes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.prefix_models import SHAPES, ModelShape, random_model, shape_named
from bench.prefix_reuse import _random_model


def test_tinyllama_is_tinyllamas_layer_and_the_default_is_the_earlier_rounds_model() -> None:
    tiny = shape_named("tinyllama")
    assert (tiny.hidden, tiny.mlp, tiny.heads, tiny.kv_heads) == (2048, 5632, 32, 4)
    default = shape_named("default")
    assert (default.layers, default.hidden, default.mlp, default.heads, default.kv_heads) == (
        8,
        512,
        1408,
        8,
        4,
    )
    assert shape_named("tinyllama", layers=4).layers == 4
    assert SHAPES["tinyllama"].layers == tiny.layers  # the table is not changed by a copy
    with pytest.raises(ValueError, match="unknown model shape"):
        shape_named("llama-7b")
    with pytest.raises(ValueError, match="at least one layer"):
        shape_named("tinyllama", layers=0)


def test_a_shape_is_written_once_as_a_loadable_llama(tmp_path: Path) -> None:
    shape = ModelShape(layers=1, hidden=64, mlp=96, heads=4, kv_heads=2)
    folder = random_model(shape=shape, context=1024, parent=tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert (
        config["num_hidden_layers"],
        config["hidden_size"],
        config["intermediate_size"],
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["max_position_embeddings"],
    ) == (1, 64, 96, 4, 2, 1024)
    stamp = (folder / "config.json").stat().st_mtime_ns
    assert random_model(shape=shape, context=1024, parent=tmp_path) == folder
    assert (folder / "config.json").stat().st_mtime_ns == stamp
    other = random_model(
        shape=ModelShape(layers=1, hidden=64, mlp=96, heads=2, kv_heads=2),
        context=1024,
        parent=tmp_path,
    )
    assert other != folder, "another head count is another folder"


def test_layers_without_a_shape_is_refused() -> None:
    args = argparse.Namespace(shape=None, layers=3)
    with pytest.raises(SystemExit, match="--layers goes with --shape"):
        _random_model(args=args, quick=True)
