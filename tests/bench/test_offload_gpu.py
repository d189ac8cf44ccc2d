"""The offload benchmark's GPU form: its planning as pure functions (a described machine,
no GPU needed), the error without CUDA, and the run itself where CUDA exists.

A GPU session runs the GPU-only test with:
    QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q \
        tests/bench/test_offload_gpu.py
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from bench import offload, offload_gpu
from bench.offload_systems import accelerate_device_map, write_model
from engine.runtime.executor.checkpoint import index_checkpoint, layer_unit
from engine.runtime.hardware.profile import HardwareProfile, synthetic_profile
from engine.runtime.planner.model_spec import load_model_spec, model_spec_from_config
from tests.bench.test_offload import assert_every_figure, offload_args

GIB = 2**30
GBPS = 1e9


def _llama_8b_shape(layers: int) -> dict[str, object]:
    size = offload_gpu.GPU_FULL
    return {
        "model_type": "llama",
        "hidden_size": size.hidden,
        "intermediate_size": size.intermediate,
        "num_attention_heads": size.heads,
        "num_key_value_heads": size.kv_heads,
        "num_hidden_layers": layers,
        "vocab_size": size.vocab,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }


def _h200(*, h2d: float | None = 50 * GBPS, disk: float | None = 2 * GBPS) -> HardwareProfile:
    """A described H200 machine with measured link and disk."""
    base = synthetic_profile(
        gpu_bytes=139 * GIB, ram_bytes=128 * GIB, disk_bytes=64 * GIB, gpu_name="NVIDIA H200"
    )
    gpu = dataclasses.replace(base.gpus[0], h2d_bytes_per_s=h2d)
    return dataclasses.replace(
        base, gpus=(gpu,), disk=dataclasses.replace(base.disk, read_bytes_per_s=disk)
    )


def test_half_the_layers_leave_the_gpu_a_quarter_to_ram_a_quarter_to_disk() -> None:
    assert offload_gpu.gpu_layer_tiers(8) == (
        "gpu", "cpu", "gpu", "disk", "gpu", "cpu", "gpu", "disk",
    )  # fmt: skip
    tiers = offload_gpu.gpu_layer_tiers(32)
    assert tiers.count("gpu") == 16 and tiers.count("cpu") == 8 and tiers.count("disk") == 8
    # Interleaved: no two off-GPU layers in a row, so a GPU layer computes while one loads.
    assert all(tiers[i] == "gpu" or tiers[i + 1] == "gpu" for i in range(len(tiers) - 1))


def test_gpu_plan_puts_the_same_layers_on_the_same_tiers_for_both_systems() -> None:
    spec = model_spec_from_config(config=_llama_8b_shape(32))
    planned = offload_gpu.gpu_plan(hardware=_h200(), spec=spec, depth=3)

    p = planned.placement
    assert p.compute_tier == "gpu" and p.memory_model == "discrete"
    assert p.layer_tiers == offload_gpu.gpu_layer_tiers(32)
    assert (p.embed_tier, p.head_tier) == ("gpu", "gpu")
    assert (p.prefetch_depth_prefill, p.prefetch_depth_decode) == (1, 3)
    for i, tier in enumerate(p.layer_tiers):
        assert (
            planned.device_map[f"model.layers.{i}"]
            == {"gpu": 0, "cpu": "cpu", "disk": "disk"}[tier]
        )
    for module in ("model.embed_tokens", "model.rotary_emb", "model.norm", "lm_head"):
        assert planned.device_map[module] == 0

    split = planned.split
    layer = spec.layer_bytes[0]
    assert layer == 436_224_000  # Llama-3-8B's layer in bfloat16: 416 MiB
    assert split.ram_bytes == split.disk_bytes == 8 * layer
    assert (
        split.gpu_bytes == 16 * layer + spec.embed_bytes + spec.head_bytes + spec.final_norm_bytes
    )
    assert split.largest_streamed_bytes == layer
    # Accelerate's budget: what the executor holds on the GPU (resident + 4 stream slots)
    # and in RAM.
    assert planned.max_memory == {0: split.gpu_bytes + 4 * layer, "cpu": 8 * layer}


def test_gpu_plan_refuses_a_machine_without_a_discrete_gpu() -> None:
    spec = model_spec_from_config(config=_llama_8b_shape(8))
    cpu_only = synthetic_profile(gpu_bytes=0, ram_bytes=64 * GIB, disk_bytes=64 * GIB)
    with pytest.raises(ValueError, match="discrete GPU"):
        offload_gpu.gpu_plan(hardware=cpu_only, spec=spec, depth=3)
    apple = synthetic_profile(
        gpu_bytes=64 * GIB, ram_bytes=64 * GIB, disk_bytes=64 * GIB, unified=True
    )
    with pytest.raises(ValueError, match="discrete GPU"):
        offload_gpu.gpu_plan(hardware=apple, spec=spec, depth=3)


def test_two_tier_roofline_is_bound_by_the_slower_of_disk_and_link() -> None:
    hw = _h200(h2d=50 * GBPS, disk=2 * GBPS)
    # Disk-bound: 4 GB from disk take 2 s; 8 GB over the link 0.16 s.
    assert offload_gpu.transfer_bound_s(
        hardware=hw, ram_bytes=4 * GBPS, disk_bytes=4 * GBPS
    ) == pytest.approx(2.0)
    # Link-bound: disk bytes cross the link too (10 GB at 5 GB/s), the disk alone 0.5 s.
    slow_link = _h200(h2d=5 * GBPS, disk=2 * GBPS)
    assert offload_gpu.transfer_bound_s(
        hardware=slow_link, ram_bytes=9 * GBPS, disk_bytes=1 * GBPS
    ) == pytest.approx(2.0)
    # An unmeasured link bounds nothing; neither measured: no transfer bound.
    assert offload_gpu.transfer_bound_s(
        hardware=_h200(h2d=None), ram_bytes=9 * GBPS, disk_bytes=1 * GBPS
    ) == pytest.approx(0.5)
    assert (
        offload_gpu.transfer_bound_s(
            hardware=_h200(h2d=None, disk=None), ram_bytes=1.0, disk_bytes=1.0
        )
        == 0.0
    )


def test_roofline_divides_the_measured_bytes_as_the_split_does() -> None:
    spec = model_spec_from_config(config=_llama_8b_shape(8))
    split = offload_gpu.tier_split(spec=spec, layer_tiers=offload_gpu.gpu_layer_tiers(8))
    transfer_s = offload_gpu.roofline_transfer(
        hardware=_h200(h2d=10 * GBPS, disk=1 * GBPS), split=split
    )
    # Half of 8 GB streamed came from disk: 4 s of disk; the link's 0.8 s hides under it.
    assert transfer_s(8 * GBPS) == pytest.approx(4.0)
    # Figures use it: t_bound = max(T_comp, transfer) — checked through figures_of below.


def test_split_sizes_match_the_checkpoint_bytes(tmp_path: Path) -> None:
    """The spec's per-layer sizes (used for the split) are the bytes the executor reads."""
    size = dataclasses.replace(
        offload_gpu.GPU_QUICK, layers=4, hidden=64, intermediate=128, heads=4, kv_heads=2
    )
    model_dir = write_model(folder=tmp_path / "m", size=size, dtype="bfloat16")
    split = offload_gpu.tier_split(
        spec=load_model_spec(source=model_dir), layer_tiers=offload_gpu.gpu_layer_tiers(4)
    )
    sources = index_checkpoint(model_dir)

    def layer_bytes(i: int) -> int:
        return sum(s.end - s.start for s in sources[layer_unit(i)])

    assert split.ram_bytes == layer_bytes(1)
    assert split.disk_bytes == layer_bytes(3)


def test_cpu_form_device_map_is_unchanged() -> None:
    assert accelerate_device_map(layer_tiers=("cpu", "disk"), cuda=False) == {
        "model.embed_tokens": "cpu",
        "model.rotary_emb": "cpu",
        "model.norm": "cpu",
        "lm_head": "cpu",
        "model.layers.0": "cpu",
        "model.layers.1": "disk",
    }


def test_device_defaults_to_cuda_only_where_it_exists() -> None:
    assert offload.resolve_device(requested=None, cuda_available=False) == "cpu"
    assert offload.resolve_device(requested=None, cuda_available=True) == "cuda"
    assert offload.resolve_device(requested="cpu", cuda_available=True) == "cpu"
    with pytest.raises(SystemExit, match="no CUDA device"):
        offload.resolve_device(requested="cuda", cuda_available=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_cuda_requested_without_cuda_is_a_clear_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["bench", "offload", "--device", "cuda", "--quick"])
    # A string code: Python prints it on stderr and exits with status 1, no traceback.
    assert isinstance(exited.value.code, str)
    assert "--device cuda" in exited.value.code and "--device cpu" in exited.value.code


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_form_quick_reports_every_figure_with_the_gpu_name(tmp_path: Path) -> None:
    tiny = "--layers 4 --hidden 256 --intermediate 512 --tokens 3 --prompt-tokens 8"
    figures = offload.run(
        offload_args(tmp_path / "model", "--device", "cuda", *tiny.split(), "--batches", "1,2")
    )

    assert figures["device"] == "cuda"
    assert figures["gpu_name"] == torch.cuda.get_device_name(0)
    assert_every_figure(figures, batches={"1", "2"})
    assert figures["h2d_bytes_per_s"] and figures["h2d_bytes_per_s"] > 0
    assert figures["tiers"]["ram_layers"] == [1] and figures["tiers"]["disk_layers"] == [3]
    assert figures["model"]["offloaded_layers"] == [1, 3]
    for by_batch in figures["systems"].values():
        assert all(v["peak_device_bytes"] > 0 for v in by_batch.values())
    # bfloat16 on a GPU: kernels differ between systems, so greedy tokens may differ in
    # a close call; the executor's own two runs share its kernels.
    assert isinstance(figures["tokens_match_reference"], bool)
