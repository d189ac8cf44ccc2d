"""Tiny random models and placements for the executor tests."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.models.synthetic import write_random_model
from engine.runtime.planner.model_spec import load_model_spec
from engine.runtime.planner.placement import Placement, StoreSpec, Tier, Workload
from engine.runtime.planner.planner import plan

GIB = 2**30


@pytest.fixture(scope="session")
def native_cache() -> Path:
    """Where the kernel tests build the native library: one folder for every test
    process and run, as the embedder's ONNX export (tests/conftest.py). A build is
    named by a digest of its sources, flags and compiler and written under a temporary
    name, then renamed (ggml_native.build), so processes building at once never load
    a partial one; each build cost about 2.6 CPU-seconds (issue #41)."""
    return Path(tempfile.gettempdir()) / f"ragdoll-test-native-{getattr(os, 'getuid', int)()}"


def make_placement(
    *,
    model_dir: Path,
    layer_tiers: Sequence[Tier] | None = None,
    embed_tier: Tier = "cpu",
    head_tier: Tier = "cpu",
    depth_prefill: int = 1,
    depth_decode: int = 2,
) -> Placement:
    """The planner's CPU-only placement for this model, with tiers and depths overridden
    (a machine small enough to make the planner choose them would be slow to describe)."""
    base = plan(
        hardware=synthetic_profile(gpu_bytes=0, ram_bytes=16 * GIB, disk_bytes=100 * GIB),
        model=load_model_spec(source=model_dir),
        store=StoreSpec.default(),
        workload=Workload(batch=4, context_tokens=256),
    )
    return dataclasses.replace(
        base,
        layer_tiers=tuple(layer_tiers) if layer_tiers is not None else base.layer_tiers,
        embed_tier=embed_tier,
        head_tier=head_tier,
        prefetch_depth_prefill=depth_prefill,
        prefetch_depth_decode=depth_decode,
    )


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_model(
        folder=tmp_path_factory.mktemp("llama"),
        architecture="llama",
        hidden_size=64,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=128,
        seed=1,
    )


@pytest.fixture(scope="session")
def qwen2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_model(
        folder=tmp_path_factory.mktemp("qwen2"),
        architecture="qwen2",
        hidden_size=64,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=128,
        seed=2,
    )


@pytest.fixture(scope="session")
def mistral_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_model(
        folder=tmp_path_factory.mktemp("mistral"),
        architecture="mistral",
        hidden_size=64,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=128,
        seed=3,
    )
