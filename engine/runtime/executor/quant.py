"""GGML block formats decoded by torch, bit for bit as `gguf.quants.dequantize` does.

GGUF files (llama.cpp's format) store most weights in blocks: a few half-precision scales
and 4- to 8-bit integers. The executor reads a tensor's raw blocks by byte range and
decodes them here, in the copy thread, so the file and the page cache hold the
compressed bytes. Each decoder repeats the reference's float32 operations in the same
order (no fused multiply-add), so the results are identical, not merely close; the test
compares them bit for bit on random blocks. Formats without a torch decoder here fall
back to the reference itself (numpy, slower, equally exact).
"""

from __future__ import annotations

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as reference_dequantize

QK_K = 256

# Plain element types: the bytes are the values.
_PLAIN: dict[GGMLQuantizationType, torch.dtype] = {
    GGMLQuantizationType.F32: torch.float32,
    GGMLQuantizationType.F16: torch.float16,
    GGMLQuantizationType.BF16: torch.bfloat16,
}


def block_bytes(qtype: GGMLQuantizationType) -> tuple[int, int]:
    """(values per block, bytes per block) of a GGML type."""
    return GGML_QUANT_SIZES[qtype]


def tensor_bytes(*, qtype: GGMLQuantizationType, elements: int) -> int:
    per_block, size = block_bytes(qtype)
    return elements // per_block * size


def dequantize(
    raw: torch.Tensor, *, qtype: GGMLQuantizationType, shape: tuple[int, ...]
) -> torch.Tensor:
    """The values of a tensor stored as `raw` (its bytes, uint8) in GGML type `qtype`,
    as float32 (or the plain type for F32/F16/BF16), in `shape` (row-major, the Hugging
    Face order: GGUF lists dimensions innermost first)."""
    plain = _PLAIN.get(qtype)
    if plain is not None:
        return raw.view(plain).reshape(shape)
    decoder = _DECODERS.get(qtype)
    _, size = block_bytes(qtype)
    if decoder is None:
        # gguf's own numpy decoder: exact by definition, for the rarer formats.
        flat = reference_dequantize(raw.numpy(), qtype)
        return torch.from_numpy(np.ascontiguousarray(flat, dtype=np.float32)).reshape(shape)
    blocks = raw.reshape(-1, size)
    return decoder(blocks).reshape(shape)


def dequantize_into(
    raw: torch.Tensor,
    *,
    qtype: GGMLQuantizationType,
    out: torch.Tensor,
    scratch: torch.Tensor | None = None,
) -> bool:
    """Decode into `out` (float32, the tensor's row-major shape, e.g. a reused buffer)
    with the arithmetic of `dequantize`; False (nothing written) for types without an
    in-place decoder here. `scratch`: uint8, as many elements as `out` (Q4_0's nibbles;
    allocated when None). A fresh result costs page faults on every use, which on a
    loaded machine cost more than the decoding itself."""
    if out.dtype != torch.float32:
        return False
    plain = _PLAIN.get(qtype)
    if plain is not None:
        out.copy_(raw.view(plain).reshape(out.shape))
        return True
    if qtype not in (GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0):
        return False
    _, size = block_bytes(qtype)
    blocks = raw.reshape(-1, size)
    o = out.view(-1, 32)
    if qtype == GGMLQuantizationType.Q8_0:
        o.copy_(blocks[:, 2:].view(torch.int8))
    else:
        # Low nibbles first, then high (ggml's order); q − 8 is exact in float32.
        qs = blocks[:, 2:]
        nib = scratch if scratch is not None else torch.empty_like(out, dtype=torch.uint8)
        nib = nib.view(-1, 32)
        torch.bitwise_and(qs, 0x0F, out=nib[:, :16])
        torch.bitwise_right_shift(qs, 4, out=nib[:, 16:])
        o.copy_(nib).sub_(8.0)
    o.mul_(_half(blocks[:, :2]))
    return True


def as_dtype(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`t.to(dtype)` by `copy_` into a new tensor: on this project's CPU (torch 2.13)
    `.to(torch.float32)` of an int8 tensor took 100 ms for 4M values where `copy_` took
    1.5 ms; the values are the same (a conversion is a conversion)."""
    if t.dtype == dtype:
        return t
    return torch.empty(t.shape, dtype=dtype, device=t.device).copy_(t)


def _half(column: torch.Tensor) -> torch.Tensor:
    """(n, 2) uint8 → (n, 1) float32 read as little-endian float16."""
    return as_dtype(column.contiguous().view(torch.float16), torch.float32)


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """(..., k) uint8 → (..., 2, k): low nibbles first, then high (ggml's order)."""
    return torch.stack((qs & 0x0F, qs >> 4), dim=-2)


def _q8_0(blocks: torch.Tensor) -> torch.Tensor:
    d = _half(blocks[:, :2])
    x = as_dtype(blocks[:, 2:].contiguous().view(torch.int8), torch.float32)
    return x.mul_(d)


def _q4_0(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = _half(blocks[:, :2])
    q = _nibbles(blocks[:, 2:]).reshape(n, -1).view(torch.int8) - 8
    return as_dtype(q, torch.float32).mul_(d)


def _k_scales(blocks: torch.Tensor, *, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K's and Q5_K's (n, 8, 1) float32 scales and offsets: six-bit scales and mins
    for 8 sub-blocks, packed in 12 bytes after two float16 factors (see gguf's Q4_K)."""
    d = _half(blocks[:, 0:2])
    dmin = _half(blocks[:, 2:4])
    scales = blocks[:, 4:16].reshape(n, 3, 4)
    lo, hi, mixed = scales[:, 0], scales[:, 1], scales[:, 2]
    sc = torch.cat((lo & 0x3F, (mixed & 0x0F) | ((lo >> 2) & 0x30)), dim=-1)
    mn = torch.cat((hi & 0x3F, (mixed >> 4) | ((hi >> 2) & 0x30)), dim=-1)
    scale = (d * as_dtype(sc, torch.float32)).reshape(n, -1, 1)
    offset = (dmin * as_dtype(mn, torch.float32)).reshape(n, -1, 1)
    return scale, offset


def _q4_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    scale, offset = _k_scales(blocks, n=n)
    q = as_dtype(_nibbles(blocks[:, 16:].reshape(n, -1, 32)).reshape(n, -1, 32), torch.float32)
    return (scale * q - offset).reshape(n, QK_K)


def _q5_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    scale, offset = _k_scales(blocks, n=n)
    qh = blocks[:, 16 : 16 + QK_K // 8].reshape(n, 1, 32)
    low = _nibbles(blocks[:, 16 + QK_K // 8 :].reshape(n, -1, 32)).reshape(n, -1, 32)
    shifts = torch.arange(8, dtype=torch.uint8, device=blocks.device).reshape(1, 8, 1)
    high = (qh >> shifts) & 0x01
    q = as_dtype(low | (high << 4), torch.float32)
    return (scale * q - offset).reshape(n, QK_K)


def _fifth_bits(qh: torch.Tensor) -> torch.Tensor:
    """(n, 4) uint8, a little-endian 32-bit word per block → (n, 32) uint8: bit i of it
    is the fifth bit of value i (Q5_0, Q5_1)."""
    word = as_dtype(qh.contiguous().view(torch.int32), torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(32, dtype=torch.int64, device=qh.device).reshape(1, 32)
    return as_dtype((word >> shifts) & 0x01, torch.uint8)


def _q4_1(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = _half(blocks[:, 0:2])
    m = _half(blocks[:, 2:4])
    q = as_dtype(_nibbles(blocks[:, 4:]).reshape(n, -1), torch.float32)
    return (d * q) + m


def _q5_0(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = _half(blocks[:, 0:2])
    low = _nibbles(blocks[:, 6:]).reshape(n, -1)
    q = (low | (_fifth_bits(blocks[:, 2:6]) << 4)).view(torch.int8) - 16
    return d * as_dtype(q, torch.float32)


def _q5_1(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = _half(blocks[:, 0:2])
    m = _half(blocks[:, 2:4])
    low = _nibbles(blocks[:, 8:]).reshape(n, -1)
    q = as_dtype(low | (_fifth_bits(blocks[:, 4:8]) << 4), torch.float32)
    return (d * q) + m


def _q6_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    ql = blocks[:, : QK_K // 2]
    qh = blocks[:, QK_K // 2 : QK_K // 2 + QK_K // 4]
    scales = blocks[:, QK_K // 2 + QK_K // 4 : QK_K // 2 + QK_K // 4 + QK_K // 16]
    d = _half(blocks[:, -2:])
    scale = (d * as_dtype(scales.contiguous().view(torch.int8), torch.float32)).reshape(n, -1, 1)
    low = _nibbles(ql.reshape(n, -1, 64)).reshape(n, -1, 32)
    shifts = torch.tensor([0, 2, 4, 6], dtype=torch.uint8, device=blocks.device)
    shifts = shifts.reshape(1, 1, 4, 1)
    high = ((qh.reshape(n, -1, 1, 32) >> shifts) & 0x03).reshape(n, -1, 32)
    q = (low | (high << 4)).to(torch.int8) - 32
    q = as_dtype(q.reshape(n, QK_K // 16, -1), torch.float32)
    return (scale * q).reshape(n, QK_K)


_DECODERS = {
    GGMLQuantizationType.Q8_0: _q8_0,
    GGMLQuantizationType.Q4_0: _q4_0,
    GGMLQuantizationType.Q4_K: _q4_k,
    GGMLQuantizationType.Q6_K: _q6_k,
    # The older block formats and Q5_K (Q5_K_M files) that downloaded models still use.
    GGMLQuantizationType.Q4_1: _q4_1,
    GGMLQuantizationType.Q5_0: _q5_0,
    GGMLQuantizationType.Q5_1: _q5_1,
    GGMLQuantizationType.Q5_K: _q5_k,
}


def has_torch_decoder(qtype: GGMLQuantizationType) -> bool:
    """Whether torch decodes this type (on any device); the others go through numpy."""
    return qtype in _PLAIN or qtype in _DECODERS


def decodable(qtype: GGMLQuantizationType) -> bool:
    """Whether a tensor of this type can be decoded (here or by gguf's reference)."""
    if qtype in _PLAIN or qtype in _DECODERS:
        return True
    probe = np.zeros(block_bytes(qtype)[1], dtype=np.uint8)
    try:
        reference_dequantize(probe, qtype)
    except (NotImplementedError, KeyError, ValueError):
        return False
    return True
