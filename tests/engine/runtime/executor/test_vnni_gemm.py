"""The prefill's integer GEMM (engine/runtime/executor/native/vnni_gemm.c) against
dequantize-then-matmul, and `kernel_forms.linear` choosing it for a prefill's rows."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType

from engine.runtime.executor import ggml_native, kernel_forms
from tests.engine.runtime.executor.test_ggml_native import (
    _assert_close,
    _random_matrix,
    _weight,
    real_rows,
)

Q = GGMLQuantizationType


@pytest.fixture(scope="module")
def lib(native_cache: Path) -> ggml_native.Library:
    loaded = ggml_native._loaded(native_cache, ggml_native.find_compiler())
    if loaded is None:
        pytest.skip("no C compiler here: the native kernel cannot be built")
    if not loaded.vnni:
        pytest.skip("this CPU (or compiler) has no AVX-512 VNNI: the prefill uses bfloat16")
    return loaded


def _packed(lib: ggml_native.Library, raw: torch.Tensor, qtype: Q, cols: int, threads: int):  # type: ignore[no-untyped-def]
    group = lib.vnni_group(int(qtype))
    rows, groups = raw.shape[0], raw.shape[0] * cols // group
    out = ggml_native.VnniPacked(
        values=torch.empty(rows * cols, dtype=torch.uint8),
        scales=torch.empty(groups),
        mins=torch.empty(groups),
        rows=rows,
        cols=cols,
        group=group,
    )
    return lib.vnni_pack(qtype=int(qtype), raw=raw, cols=cols, out=out, threads=threads)


@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q6_K], ids=lambda q: q.name)
@pytest.mark.parametrize("rows", [1, 5, 37])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_integer_gemm_equals_dequantize_then_matmul(
    lib: ggml_native.Library, qtype: Q, rows: int, threads: int
) -> None:
    cols = 512
    # 48 rows: three panels of 16, so one pair and one panel alone.
    raw = _random_matrix(qtype, rows=48, cols=cols, seed=int(qtype) + rows)
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows))
    out = torch.full((rows, 48), float("nan"))
    lib.vnni_gemm(packed=_packed(lib, raw, qtype, cols, threads), x=x, out=out, threads=threads)
    _assert_close(out, x=x, weight=_weight(raw, qtype, cols))


def test_a_row_stride_wider_than_the_matrix_is_honoured(lib: ggml_native.Library) -> None:
    raw = _random_matrix(Q.Q4_K, rows=32, cols=256, seed=3)
    x = torch.randn(6, 256, generator=torch.Generator().manual_seed(3))
    wide = torch.full((6, 40), 7.0)
    lib.vnni_gemm(packed=_packed(lib, raw, Q.Q4_K, 256, 2), x=x, out=wide[:, :32], threads=2)
    _assert_close(wide[:, :32], x=x, weight=_weight(raw, Q.Q4_K, 256))
    assert torch.all(wide[:, 32:] == 7.0)  # nothing written past the matrix's columns


def test_types_and_shapes_it_does_not_take_are_refused(lib: ggml_native.Library) -> None:
    assert lib.vnni_group(int(Q.Q8_0)) == 0 and lib.vnni_group(int(Q.Q4_0)) == 0
    raw = _random_matrix(Q.Q4_K, rows=16, cols=256, seed=1)
    out = ggml_native.VnniPacked(
        values=torch.empty(16 * 256, dtype=torch.uint8),
        scales=torch.empty(16 * 8),
        mins=torch.empty(16 * 8),
        rows=16,
        cols=256,
        group=32,
    )
    with pytest.raises(ValueError, match="refused type"):
        lib.vnni_pack(qtype=int(Q.Q8_0), raw=raw, cols=256, out=out, threads=1)
    packed = _packed(lib, raw, Q.Q4_K, 256, 1)
    with pytest.raises(ValueError, match="columns"):
        lib.vnni_gemm(packed=packed, x=torch.ones(2, 512), out=torch.empty(2, 16), threads=1)


def test_a_prefill_linear_takes_the_integer_gemm_and_agrees_with_bfloat16(
    lib: ggml_native.Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ggml_native, "library", lambda: lib)
    cols = 512
    raw = _random_matrix(Q.Q4_K, rows=64, cols=cols, seed=9)
    parts = kernel_forms.Parts(form="ggml", values=raw, scales=torch.tensor([int(Q.Q4_K), cols]))
    x = torch.randn(2, 40, cols, generator=torch.Generator().manual_seed(9))
    packed: list[int] = []
    real = lib.vnni_gemm

    def counted(**kw):  # type: ignore[no-untyped-def]
        packed.append(1)
        return real(**kw)

    monkeypatch.setattr(lib, "vnni_gemm", counted)
    y = kernel_forms.linear(x, parts=parts, bias=None, buffer=kernel_forms.Workspace(threads=2))
    assert packed and y.shape == (2, 40, 64) and y.dtype == x.dtype
    _assert_close(y.reshape(80, 64), x=x.reshape(80, cols), weight=_weight(raw, Q.Q4_K, cols))


_REAL = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m": ("blk.0.attn_q.weight", "blk.0.ffn_down.weight"),
}


@pytest.mark.parametrize("name", sorted(_REAL))
def test_real_tensors_equal_dequantize_then_matmul(lib: ggml_native.Library, name: str) -> None:
    for qtype, raw, cols in real_rows(name, _REAL[name], rows=320):
        x = torch.randn(9, cols, generator=torch.Generator().manual_seed(5))
        out = torch.empty(9, raw.shape[0])
        lib.vnni_gemm(packed=_packed(lib, raw, qtype, cols, 2), x=x, out=out, threads=2)
        _assert_close(out, x=x, weight=_weight(raw, qtype, cols))
