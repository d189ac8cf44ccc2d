"""4-bit GGUF matrices (Q4_0, Q4_1, Q4_K) in the int4 kernel's layout: the integers,
scales and zeros against gguf's own dequantizer, the layout against torch's converter,
and the kernel against its dequantize-then-matmul reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize
from gguf.quants import quantize as reference_quantize

from engine.runtime.executor import int4
from engine.runtime.models.gguf_kquants import quantize_q4_k

pytestmark = pytest.mark.skipif(not int4.available(), reason="torch has no CPU int4 kernel")

Q4_0, Q4_1, Q4_K = (
    GGMLQuantizationType.Q4_0,
    GGMLQuantizationType.Q4_1,
    GGMLQuantizationType.Q4_K,
)


def quantized(weight: torch.Tensor, qtype: GGMLQuantizationType) -> torch.Tensor:
    data = weight.numpy().astype(np.float32)
    raw = quantize_q4_k(data) if qtype == Q4_K else reference_quantize(data, qtype)
    return torch.from_numpy(np.ascontiguousarray(raw)).reshape(-1)


def exact(raw: torch.Tensor, qtype: GGMLQuantizationType, shape: tuple[int, int]) -> torch.Tensor:
    return torch.from_numpy(dequantize(raw.numpy(), qtype).reshape(shape).astype(np.float32))


@pytest.mark.parametrize("qtype", [Q4_0, Q4_1, Q4_K])
def test_unpacked_integers_scales_and_zeros_are_the_files_values(
    qtype: GGMLQuantizationType,
) -> None:
    g = torch.Generator().manual_seed(int(qtype))
    shape = (64, 512)
    raw = quantized(torch.randn(shape, generator=g), qtype)
    q, scale, zero = int4.unpack(raw, qtype=qtype, shape=shape)
    assert q.dtype == torch.uint8 and int(q.max()) <= 15
    ours = ((q.float() - 8.0).view(64, -1, 32) * scale.unsqueeze(-1) + zero.unsqueeze(-1)).view(
        shape
    )
    want = exact(raw, qtype, shape)
    # The same values; Q4_1 and Q4_K reach them by (q − 8)·s + (m + 8s) instead of
    # s·q + m: float32 rounding apart, at most a few ulps of the group's largest value.
    if qtype == Q4_0:
        assert torch.equal(ours, want)
    else:
        bound = 4 * torch.finfo(torch.float32).eps * want.abs().amax(dim=1, keepdim=True)
        assert ((ours - want).abs() <= bound).all()


@pytest.mark.parametrize("qtype", [Q4_0, Q4_1, Q4_K])
def test_reference_weight_is_the_file_with_bf16_scales_and_zeros(
    qtype: GGMLQuantizationType,
) -> None:
    g = torch.Generator().manual_seed(7)
    shape = (128, 256)
    raw = quantized(torch.randn(shape, generator=g), qtype)
    ours = int4.reference_weight(raw, qtype=qtype, shape=shape)
    want = exact(raw, qtype, shape)
    _, scale, zero = int4.unpack(raw, qtype=qtype, shape=shape)
    # A bfloat16 scale and zero are each within half a bfloat16 step (2^-8 relative) of
    # the file's: a value moves by at most 2^-8 · (8|scale| + |zero|), plus float32
    # rounding.
    bound = 2.0**-8 * (8 * scale.abs() + zero.abs()) * 1.01 + 1e-6
    assert ((ours - want).abs().view(128, -1, 32) <= bound.unsqueeze(-1)).all()


@pytest.mark.parametrize("rows", [64, 192, 1536])
def test_pack_gives_the_converters_layout(rows: int) -> None:
    q = torch.randint(0, 16, (rows, 256), dtype=torch.uint8, generator=torch.Generator())
    scale = torch.rand(rows, 8)
    want = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32), 1)
    nibbles, scales = int4.pack(q, scale, torch.zeros_like(scale))
    assert torch.equal(nibbles, want)
    assert scales.shape == (8, rows, 2)
    assert torch.equal(int4.unpacked_q(nibbles), q)


@pytest.mark.parametrize("qtype", [Q4_0, Q4_1, Q4_K])
@pytest.mark.parametrize("batch", [1, 8])
def test_kernel_linear_equals_its_dequantized_reference(
    qtype: GGMLQuantizationType, batch: int
) -> None:
    g = torch.Generator().manual_seed(batch + int(qtype))
    rows, cols = 256, 512
    raw = quantized(torch.randn(rows, cols, generator=g), qtype)
    x = torch.randn(batch, 3, cols, generator=g)
    bias = torch.randn(rows, generator=g)
    nibbles, scales = int4.repack(raw, qtype=qtype, shape=(rows, cols))
    got = int4.linear(x, nibbles=nibbles, scales=scales, bias=bias)
    weight = int4.reference_weight(raw, qtype=qtype, shape=(rows, cols))
    want = int4.reference_linear(x, weight=weight, bias=bias)
    assert got.shape == want.shape == (batch, 3, rows)
    # The same products summed in another order, each result rounded to bfloat16: at
    # most one bfloat16 step apart (2^-8 relative), almost all identical.
    # bfloat16 rounds the product before the bias is added: steps of the product.
    step = (want - bias).abs().clamp_min(1e-3) * 2.0**-7
    assert ((got - want).abs() <= step).all()
    assert (got == want).float().mean() > 0.8


def test_dequantized_bf16_matrix_is_the_reference_weight_rounded() -> None:
    g = torch.Generator().manual_seed(3)
    raw = quantized(torch.randn(64, 256, generator=g), Q4_K)
    nibbles, scales = int4.repack(raw, qtype=Q4_K, shape=(64, 256))
    want = int4.reference_weight(raw, qtype=Q4_K, shape=(64, 256))
    got = int4.dequantize_bf16(nibbles, scales)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, want.to(torch.bfloat16))


def test_llama_rows_are_put_back_in_hugging_face_order() -> None:
    from engine.runtime.models.gguf_file import permute_rows

    g = torch.Generator().manual_seed(4)
    weight = torch.randn(128, 256, generator=g)
    stored = permute_rows(weight, heads=4, inverse=False)  # as llama.cpp writes q/k
    raw = quantized(stored, Q4_K)
    ours = int4.reference_weight(raw, qtype=Q4_K, shape=(128, 256), permute_heads=4)
    plain = int4.reference_weight(raw, qtype=Q4_K, shape=(128, 256))
    assert torch.equal(ours, permute_rows(plain, heads=4, inverse=True))


def test_only_four_bit_matrices_in_tiles_of_64_rows_are_repackable() -> None:
    assert int4.repackable(qtype=Q4_K, shape=(128, 512))
    assert not int4.repackable(qtype=Q4_K, shape=(128, 96))  # a Q4_K block is 256 wide
    assert int4.repackable(qtype=Q4_1, shape=(64, 96))
    assert not int4.repackable(qtype=Q4_0, shape=(800, 256))  # 800 rows: not in 64s
    assert not int4.repackable(qtype=GGMLQuantizationType.Q6_K, shape=(128, 256))
    assert not int4.repackable(qtype=Q4_0, shape=(256,))
