"""Where the pipeline benchmark's model lives: the CPU form, and the GPU form's refusal
on a machine without CUDA (its run is recorded in docs/benchmarks.md when one is lent)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.pipeline_model import bench_model


def test_cpu_form_streams_every_other_layer_from_disk(tmp_path: Path) -> None:
    model = bench_model(device="cpu", quick=True, folder=tmp_path / "model")
    assert model.device.type == "cpu" and model.dtype == "float32"
    assert model.tiers == ("cpu", "disk", "cpu", "disk")
    assert model.placement.layer_tiers == model.tiers
    assert model.layers_on("disk") == [1, 3]
    # Only the disk layers' tensors are evicted after each read.
    assert model.disk_sources
    assert {int(s.name.split(".")[2]) for s in model.disk_sources} == {1, 3}
    assert "layers [1, 3] on disk" in model.describe()


def test_unknown_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--device must be one of"):
        bench_model(device="tpu", quick=True, folder=tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_gpu_form_says_plainly_that_there_is_no_gpu(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no CUDA device"):
        bench_model(device="cuda", quick=True, folder=tmp_path)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_form_puts_layers_on_gpu_pinned_ram_and_disk(tmp_path: Path) -> None:
    model = bench_model(device="cuda", quick=True, folder=tmp_path / "model")
    assert model.device.type == "cuda" and model.dtype == "bfloat16"
    assert set(model.tiers) == {"gpu", "cpu", "disk"}
    assert model.placement.layer_tiers == model.tiers
    assert model.placement.compute_tier == "gpu"
