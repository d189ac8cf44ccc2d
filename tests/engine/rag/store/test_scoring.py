"""The IVF view's scoring kernels: int8 against float32, the per-width
products, the error bound the re-scoring relies on, and the layout choice."""

from __future__ import annotations

import numpy as np
import pytest

from engine.rag.store.scoring import Float32Scorer, Int8Scorer, choose, pick_scorer, probe

torch = pytest.importorskip("torch")
DIM = 64


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    v = rng.normal(size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize(("width", "dim"), [(1, DIM), (2, DIM), (7, DIM), (3, 384), (2, 5)])
def test_each_width_scores_within_the_error_bound(width: int, dim: int) -> None:
    # One question or several in one product: within each row's stated bound
    # of the float32 cosine of the float16 rows, and the bound is not loose
    # beyond use (the re-scoring reads every row it cannot rule out).
    rng = np.random.default_rng(width + dim)
    rows = _unit(rng, 3000, dim).astype(np.float16)
    q = _unit(rng, 9, dim)
    picked = [8, 0, 3, 5, 1, 2, 7][:width]
    f32, i8 = Float32Scorer(), Int8Scorer()
    exact = f32.score(f32.from_rows(rows), f32.queries(q), picked)
    held, asked = i8.from_rows(rows), i8.queries(q)
    approx = i8.score(held, asked, picked)
    assert approx.shape == exact.shape == (width, 3000) and approx.dtype == np.float32
    assert approx.flags.c_contiguous
    bound = i8.error(held, asked)
    assert bound.shape == (3000,)
    assert np.all(np.abs(approx - exact) <= bound[None, :])
    if dim >= 64:
        assert float(bound.max()) < 0.05 and float(np.abs(approx - exact).max()) < 0.01


def test_int8_holds_a_byte_per_value_float32_four() -> None:
    rows = _unit(np.random.default_rng(1), 100).astype(np.float16)
    for scorer, per_row in ((Float32Scorer(), 4 * DIM), (Int8Scorer(), DIM + 8)):
        held = scorer.from_rows(rows)
        assert sum(a.nbytes for a in held) == 100 * per_row == 100 * scorer.row_bytes(DIM)


def test_the_layout_choice_follows_the_probe() -> None:
    fast_batch = {"float32": {1: 1.0, 5: 3.0}, "int8": {1: 1.1, 5: 1.0}}
    assert choose(fast_batch, workers=1) == "int8"
    no_gain = {"float32": {1: 1.0, 5: 3.0}, "int8": {1: 1.0, 5: 2.5}}
    assert choose(no_gain, workers=2) == "float32"  # a CPU without fast int8 products
    slow_single = {"float32": {1: 1.0, 5: 3.0}, "int8": {1: 2.0, 5: 0.5}}
    assert choose(slow_single, workers=1) == "float32"
    # Two threads share a single question's partitions: one product may be slower.
    assert choose(slow_single, workers=2) == "int8"


def test_the_probe_times_each_width_and_the_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    times = probe([Float32Scorer(), Int8Scorer()], dimension=16, rounds=1, repeats=1)
    assert set(times) == {"float32", "int8"}
    assert all(set(t) == {1, 5} and min(t.values()) > 0 for t in times.values())
    assert pick_scorer(16, wanted="float32").name == "float32"
    assert pick_scorer(16, wanted="int8").name == "int8"
    assert pick_scorer(16, wanted="auto").name in {"float32", "int8"}
    assert pick_scorer(16).name in {"float32", "int8"}
