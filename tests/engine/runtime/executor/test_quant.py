"""The torch decoders of GGML blocks against gguf's own reference, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as reference
from gguf.quants import quantize

from engine.runtime.executor.quant import (
    block_bytes,
    decodable,
    dequantize,
    dequantize_into,
    has_torch_decoder,
)

# Where each format keeps its float16 scales (byte ranges inside a block).
_HALF_FIELDS = {
    GGMLQuantizationType.Q8_0: [(0, 2)],
    GGMLQuantizationType.Q4_0: [(0, 2)],
    GGMLQuantizationType.Q4_K: [(0, 2), (2, 4)],
    GGMLQuantizationType.Q6_K: [(208, 210)],
    GGMLQuantizationType.Q5_K: [(0, 2), (2, 4)],
    GGMLQuantizationType.Q4_1: [(0, 2), (2, 4)],
    GGMLQuantizationType.Q5_0: [(0, 2)],
    GGMLQuantizationType.Q5_1: [(0, 2), (2, 4)],
}


def _random_blocks(qtype: GGMLQuantizationType, *, n: int, seed: int) -> np.ndarray:
    """Random bytes in every field, with finite float16 scales (random bytes there
    would make NaNs and infinities, which compare unequal to themselves)."""
    rng = np.random.default_rng(seed)
    size = block_bytes(qtype)[1]
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for start, end in _HALF_FIELDS[qtype]:
        scales = rng.normal(0.0, 0.05, n).astype(np.float16)
        raw[:, start:end] = scales.view(np.uint8).reshape(n, 2)
    return raw.reshape(-1)


@pytest.mark.parametrize("qtype", list(_HALF_FIELDS))
def test_decoded_blocks_equal_gguf_reference_bit_for_bit(qtype: GGMLQuantizationType) -> None:
    raw = _random_blocks(qtype, n=97, seed=int(qtype))
    expected = reference(raw, qtype).astype(np.float32).reshape(-1)
    got = dequantize(torch.from_numpy(raw.copy()), qtype=qtype, shape=(expected.size,))
    assert got.dtype == torch.float32
    assert np.array_equal(got.numpy().view(np.uint32), expected.view(np.uint32))


def test_quantized_matrix_decodes_to_reference_in_hugging_face_shape() -> None:
    weights = np.random.default_rng(3).normal(size=(48, 64)).astype(np.float32)
    for qtype in (GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0):
        packed = quantize(weights, qtype)
        expected = reference(packed, qtype)
        got = dequantize(torch.from_numpy(packed.reshape(-1).copy()), qtype=qtype, shape=(48, 64))
        assert got.shape == (48, 64)
        assert torch.equal(got, torch.from_numpy(expected))


def test_f16_is_read_as_is() -> None:
    values = torch.randn(8, 4).to(torch.float16)
    raw = values.view(-1).view(torch.uint8).clone()
    got = dequantize(raw, qtype=GGMLQuantizationType.F16, shape=(8, 4))
    assert torch.equal(got, values)


def test_the_formats_downloaded_models_use_have_torch_decoders() -> None:
    # The numpy reference decoded SmolLM2's Q4_1 layers on every forward: 4 tokens/s.
    for qtype in _HALF_FIELDS:
        assert has_torch_decoder(qtype), qtype.name


def test_decodable_formats() -> None:
    for qtype in (*_HALF_FIELDS, GGMLQuantizationType.F16, GGMLQuantizationType.Q5_0):
        assert decodable(qtype)


@pytest.mark.parametrize(
    "qtype",
    [GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0, GGMLQuantizationType.F16],
)
def test_decoding_into_a_reused_buffer_equals_the_reference(
    qtype: GGMLQuantizationType,
) -> None:
    rows, cols = 16, 96
    data = np.random.default_rng(7).standard_normal((rows, cols)).astype(np.float32)
    raw = torch.from_numpy(np.ascontiguousarray(quantize(data, qtype)).reshape(-1).view(np.uint8))
    expected = torch.from_numpy(
        np.ascontiguousarray(reference(raw.numpy(), qtype), dtype=np.float32)
    ).reshape(rows, cols)
    out = torch.full((rows, cols), float("nan"))  # stale contents must not leak through
    scratch = torch.full((rows * cols,), 255, dtype=torch.uint8)
    assert dequantize_into(raw, qtype=qtype, out=out, scratch=scratch)
    assert torch.equal(out, expected)
    # Types without an in-place decoder say so and leave the buffer alone.
    assert not dequantize_into(raw, qtype=GGMLQuantizationType.Q4_K, out=out)
