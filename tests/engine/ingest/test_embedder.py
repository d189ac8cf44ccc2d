"""Where the embedder runs: the device decision, on made-up hardware."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.errors import EmbedderError
from engine.hardware.gpus import GpuInfo
from engine.ingest.embedder import DEFAULT_EMBEDDER, _locate, choose_device, embedder_need_bytes

GIB = 2**30
NEED = 400 * 2**20


def _gpu(*, free: int, backend: str = "cuda", unified: bool = False, index: int = 0) -> GpuInfo:
    return GpuInfo(
        index=index,
        name="fake",
        backend=backend,  # type: ignore[arg-type]
        total_bytes=24 * GIB,
        free_bytes=free,
        unified_memory=unified,
    )


def _placement(*, budget: int, used: int, model: str = "discrete") -> SimpleNamespace:
    return SimpleNamespace(
        memory_model=model,
        budgets=SimpleNamespace(gpu=budget),
        used=SimpleNamespace(gpu=used),
    )


def test_no_gpu_means_the_cpu() -> None:
    assert choose_device(gpu=None, need_bytes=NEED) == "cpu"


def test_a_gpu_with_room_is_used() -> None:
    assert choose_device(gpu=_gpu(free=8 * GIB), need_bytes=NEED) == "cuda:0"
    assert choose_device(gpu=_gpu(free=8 * GIB, index=1), need_bytes=NEED) == "cuda:1"
    apple = _gpu(free=16 * GIB, backend="mps", unified=True)
    assert choose_device(gpu=apple, need_bytes=NEED) == "mps"


def test_free_memory_less_the_planner_margin_must_hold_it() -> None:
    # 800 MiB free: the 512 MiB margin leaves 288 MiB, short of 400.
    assert choose_device(gpu=_gpu(free=800 * 2**20), need_bytes=NEED) == "cpu"
    assert choose_device(gpu=_gpu(free=1000 * 2**20), need_bytes=NEED) == "cuda:0"


def test_the_placement_decides_what_generation_leaves() -> None:
    gpu = _gpu(free=20 * GIB)  # free now, but the generator is planned to take it
    busy = _placement(budget=19 * GIB, used=19 * GIB - 100 * 2**20)
    assert choose_device(gpu=gpu, need_bytes=NEED, placement=busy) == "cpu"
    spare = _placement(budget=19 * GIB, used=12 * GIB)
    assert choose_device(gpu=gpu, need_bytes=NEED, placement=spare) == "cuda:0"
    cpu_plan = _placement(budget=0, used=0, model="cpu_only")
    assert choose_device(gpu=gpu, need_bytes=NEED, placement=cpu_plan) == "cpu"


def test_the_need_counts_the_bundled_weights() -> None:
    try:
        location = _locate(DEFAULT_EMBEDDER)
    except EmbedderError as e:  # the bundled package is optional in a dev checkout
        pytest.skip(str(e))
    need = embedder_need_bytes(location)
    assert 256 * 2**20 + 40 * 2**20 < need < 2 * GIB  # MiniLM-L6: ~90 MB of fp32 weights
