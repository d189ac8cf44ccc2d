"""Per-row int8 requantization and torch's int8 kernel against its reference."""

from __future__ import annotations

import pytest
import torch

from engine.runtime.executor import int4, int8

pytestmark = pytest.mark.skipif(not int8.available(), reason="torch has no int8 kernel")


def test_requantized_values_move_by_at_most_half_a_row_step() -> None:
    g = torch.Generator().manual_seed(1)
    weight = torch.randn(64, 256, generator=g) * torch.rand(64, 1, generator=g)
    weight[3] = 0.0  # an all-zero row keeps a usable scale
    values, scale = int8.requantize(weight)
    assert values.dtype == torch.int8 and scale.dtype == torch.bfloat16
    back = int8.reference_weight(values, scale)
    step = scale.float().unsqueeze(1)
    assert ((back - weight).abs() <= step / 2 + 1e-7).all()
    assert torch.equal(back[3], torch.zeros(256))
    assert int(values.abs().max()) <= 127


def test_rows_decoded_in_chunks_give_the_whole_matrix() -> None:
    g = torch.Generator().manual_seed(2)
    weight = torch.randn(10_000, 32, generator=g)
    whole = int8.requantize(weight)
    chunked = int8.requantize_rows(
        rows=10_000, cols=32, decode=lambda start, stop: weight[start:stop]
    )
    assert torch.equal(whole[0], chunked[0]) and torch.equal(whole[1], chunked[1])


@pytest.mark.parametrize("batch", [1, 8])
def test_kernel_linear_equals_its_dequantized_reference(batch: int) -> None:
    g = torch.Generator().manual_seed(batch)
    values, scale = int8.requantize(torch.randn(192, 384, generator=g))
    x = torch.randn(batch, 2, 384, generator=g)
    bias = torch.randn(192, generator=g)
    got = int8.linear(x, values=values, scale=scale, bias=bias)
    weight = int8.reference_weight(values, scale)
    want = int4.reference_linear(x, weight=weight, bias=bias)
    assert got.shape == (batch, 2, 192)
    # bfloat16 rounds the product before the bias is added: steps of the product.
    step = (want - bias).abs().clamp_min(1e-3) * 2.0**-7
    assert ((got - want).abs() <= step).all()


def test_dequantized_bf16_matrix_is_the_reference_weight_rounded() -> None:
    values, scale = int8.requantize(torch.randn(32, 64, generator=torch.Generator()))
    got = int8.dequantize_bf16(values, scale)
    want = int8.reference_weight(values, scale).to(torch.bfloat16)
    assert got.dtype == torch.bfloat16
    # values·scale rounded once in bfloat16 arithmetic against float32 then rounded.
    assert torch.equal(got, want)
