"""The IVF view's scoring kernels: bfloat16 against float32, the per-width
products, the error bound the re-scoring relies on, and the layout choice."""

from __future__ import annotations

import numpy as np
import pytest

from engine.store.scoring import (
    BFloat16Scorer,
    Float32Scorer,
    bfloat16_bits,
    choose,
    pick_scorer,
    probe,
)

torch = pytest.importorskip("torch")
DIM = 64


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_bfloat16_bits_round_float16_to_nearest_and_are_aligned() -> None:
    rng = np.random.default_rng(0)
    half = np.concatenate(
        [
            rng.normal(size=5000).astype(np.float16),
            np.array([0.0, -0.0, 1.0, -1.0, 6.1e-5, 3e-6, -3e-6, 65504.0], np.float16),
        ]
    )
    bits = bfloat16_bits(half)
    assert bits.dtype == np.uint16 and bits.ctypes.data % 64 == 0
    got = torch.from_numpy(bits).view(torch.bfloat16).float().numpy()
    want = half.astype(np.float32)
    normal = np.abs(want) >= 2.0**-14
    # Within half a bfloat16 step (8 significant bits) of the float16 value.
    assert np.all(np.abs(got - want)[normal] <= np.abs(want[normal]) * 2.0**-8)
    assert np.all(got[~normal] == 0.0)  # float16 subnormals and zeros
    assert np.all(np.signbit(got[normal]) == np.signbit(want[normal]))


@pytest.mark.parametrize("width", [1, 2, 7])
def test_each_width_scores_within_the_error_bound(width: int) -> None:
    # One question takes the matrix-vector product, several the rows-on-the-left
    # matrix product: both must agree with float32 within the stated bound.
    rng = np.random.default_rng(width)
    rows = _unit(rng, 3000).astype(np.float16)
    q = _unit(rng, 9)
    picked = [8, 0, 3, 5, 1, 2, 7][:width]
    f32, bf16 = Float32Scorer(), BFloat16Scorer()
    exact = f32.score(f32.resident(rows), f32.queries(q), picked)
    approx = bf16.score(bf16.resident(rows), bf16.queries(q), picked)
    assert approx.shape == exact.shape == (width, 3000) and approx.dtype == np.float32
    assert approx.flags.c_contiguous
    assert float(np.abs(approx - exact).max()) <= bf16.error(DIM)
    # Re-scoring from the float16 rows gives back the float32 scores.
    sel = np.array([5, 17, 2999])
    again = bf16.rescore(bf16.resident(rows), sel, np.repeat(q[picked[:1]], 3, axis=0))
    np.testing.assert_allclose(again, exact[0, sel], rtol=0, atol=1e-6)


def test_both_layouts_hold_four_bytes_per_value() -> None:
    # Budgets mean the same whichever kernel scores.
    rows = _unit(np.random.default_rng(1), 100).astype(np.float16)
    for scorer in (Float32Scorer(), BFloat16Scorer()):
        held = scorer.resident(rows)
        assert sum(a.nbytes for a in held) == 100 * DIM * scorer.bytes_per_value == 100 * DIM * 4


def test_the_layout_choice_follows_the_probe() -> None:
    fast_batch = {"float32": {1: 1.0, 5: 3.0}, "bfloat16": {1: 1.1, 5: 1.0}}
    assert choose(fast_batch, workers=1) == "bfloat16"
    no_gain = {"float32": {1: 1.0, 5: 3.0}, "bfloat16": {1: 1.0, 5: 2.5}}
    assert choose(no_gain, workers=2) == "float32"  # a CPU without bfloat16 matrix units
    slow_single = {"float32": {1: 1.0, 5: 3.0}, "bfloat16": {1: 2.0, 5: 0.5}}
    assert choose(slow_single, workers=1) == "float32"
    # Two threads share a single question's partitions: one product may be slower.
    assert choose(slow_single, workers=2) == "bfloat16"


def test_the_probe_times_each_width_and_the_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    times = probe([Float32Scorer(), BFloat16Scorer()], dimension=16, rounds=1, repeats=1)
    assert set(times) == {"float32", "bfloat16"}
    assert all(set(t) == {1, 5} and min(t.values()) > 0 for t in times.values())
    monkeypatch.setenv("RAGDOLL_IVF_SCORER", "float32")
    assert pick_scorer(16).name == "float32"
    monkeypatch.setenv("RAGDOLL_IVF_SCORER", "bfloat16")
    assert pick_scorer(16).name == "bfloat16"
    monkeypatch.setenv("RAGDOLL_IVF_SCORER", "auto")
    assert pick_scorer(16).name in {"float32", "bfloat16"}
