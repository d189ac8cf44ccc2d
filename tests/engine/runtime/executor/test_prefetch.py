"""The copy thread keeps its memory bound, runs ahead, and reports failures."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from engine.runtime.executor.checkpoint import layer_unit
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate_ids
from engine.runtime.executor.prefetch import Prefetcher
from engine.runtime.executor.weights import WeightStore, unit_homes
from tests.engine.runtime.executor.conftest import make_placement

ALL_DISK = ["disk"] * 4


def _eventually(check: Callable[[], bool], *, timeout: float = 5.0) -> bool:
    # Polled rather than slept: other processes share this machine's two cores.
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _store(model_dir: Path) -> WeightStore:
    placement = make_placement(model_dir=model_dir, layer_tiers=ALL_DISK)
    return WeightStore(
        model_dir=model_dir,
        homes=unit_homes(placement),
        compute_tier="cpu",
        device=torch.device("cpu"),
        dtype=torch.float32,
    )


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_slow_consumer_never_holds_more_than_depth_plus_one(llama_dir: Path, depth: int) -> None:
    store = _store(llama_dir)
    units = [layer_unit(i) for i in range(4)]
    pf = Prefetcher(store=store, units=units, depth=depth, device=torch.device("cpu"))
    try:
        for _ in range(3):  # three passes: the cycle wraps around
            for unit in units:
                tensors = pf.get(unit)
                assert "self_attn.q_proj.weight" in tensors
                del tensors
                # A slow layer: the thread has all the time it wants to run ahead.
                want = min(depth + 1, len(units))
                assert _eventually(lambda: store.stats().streamed_live == want)  # noqa: B023
                time.sleep(0.01)
                assert store.stats().streamed_live <= depth + 1
                pf.release(unit)
        stats = store.stats()
        # It did run ahead as far as allowed (and no further).
        assert stats.streamed_peak == min(depth + 1, len(units))
    finally:
        pf.close()
    assert store.stats().streamed_live == 0


def test_depth_change_takes_effect(llama_dir: Path) -> None:
    store = _store(llama_dir)
    units = [layer_unit(i) for i in range(4)]
    pf = Prefetcher(store=store, units=units, depth=0, device=torch.device("cpu"))
    try:
        t = pf.get(units[0])
        time.sleep(0.05)
        assert store.stats().streamed_peak == 1  # depth 0: nothing ahead
        pf.set_depth(2)
        # The one in use + two ahead.
        assert _eventually(lambda: store.stats().streamed_live == 3)
        time.sleep(0.02)
        assert store.stats().streamed_peak == 3
        del t
        pf.release(units[0])
    finally:
        pf.close()


def test_out_of_order_request_is_an_error(llama_dir: Path) -> None:
    store = _store(llama_dir)
    pf = Prefetcher(
        store=store, units=[layer_unit(0), layer_unit(1)], depth=1, device=torch.device("cpu")
    )
    try:
        with pytest.raises(RuntimeError, match="order"):
            pf.get(layer_unit(1))
    finally:
        pf.close()


def test_load_failure_reaches_the_consumer(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(llama_dir)

    def broken(unit: str) -> dict[str, torch.Tensor]:
        raise OSError("disk gone")

    monkeypatch.setattr(store, "fetch", broken)
    pf = Prefetcher(store=store, units=[layer_unit(0)], depth=1, device=torch.device("cpu"))
    try:
        with pytest.raises(RuntimeError, match="disk gone"):
            pf.get(layer_unit(0))
    finally:
        pf.close()


@pytest.mark.parametrize(("d_prefill", "d_decode"), [(0, 0), (1, 2), (1, 5)])
def test_generation_respects_the_placement_depths(
    llama_dir: Path, d_prefill: int, d_decode: int
) -> None:
    placement = make_placement(
        model_dir=llama_dir,
        layer_tiers=["cpu", "disk", "disk", "disk"],
        head_tier="disk",
        depth_prefill=d_prefill,
        depth_decode=d_decode,
    )
    model = StreamingModel(model_dir=llama_dir, placement=placement)
    try:
        generate_ids(
            model=model,
            requests=[GenerationRequest(prompt_ids=(1, 40, 41, 42), max_new_tokens=6)],
        )
        stats = model.store.stats()
        streamed = 4  # three layers and the head
        assert stats.streamed_peak <= max(d_prefill, d_decode) + 1
        # Reused read buffers are the released slots, never more than the bound allows:
        # depth + 1 units of each shape (a layer's buffers cannot serve the head, so at
        # the end of a step both may wait in the pool, whatever the copy thread's timing).
        # Resident layer 0 has a streamed layer's size, the embedding the head's.
        shapes = set(model.store.held_bytes().values())
        assert stats.pooled_bytes <= (max(d_prefill, d_decode) + 1) * sum(shapes)
        assert stats.streamed_peak <= streamed
        assert stats.resident_units == 2  # the embedding and layer 0
        assert stats.fetches >= 6 * streamed  # every step streamed every disk unit
    finally:
        model.close()
