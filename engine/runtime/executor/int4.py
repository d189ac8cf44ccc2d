"""4-bit GGUF matrices (Q4_0, Q4_1, Q4_K) computed by torch's int4 kernel without decoding.

A 4-bit matrix is repacked once (at load, or into the repack cache for a streamed layer)
into the layout of `torch.ops.aten._weight_int4pack_mm_for_cpu` (the kernel gpt-fast and
torchao use): the same 4-bit integers, groups of 32 along a row, and one (scale, zero)
pair per group, a weight being (q − 8) · scale + zero. Each GGML 4-bit format is exactly
that, group for group:

- Q4_0: w = d · (q − 8)              → scale d, zero 0;
- Q4_1: w = d · q + m                → scale d, zero m + 8d;
- Q4_K: w = d·sc · q − dmin·m per sub-block of 32 (six-bit sc and m, two float16
  factors per 256) → scale d·sc, zero 8·d·sc − dmin·m.

So a step reads 0.625 bytes a weight (nibbles, and a bfloat16 scale and zero per 32)
instead of 4 for a float32 copy.

What differs from GGML's own arithmetic, and so what the reference is: the kernel takes
bfloat16 activations and a bfloat16 scale and zero, and returns bfloat16. The scale and
zero rounded to bfloat16 are not the file's float16/float32 ones (they differ by up to
2^-8 relative). The kernel's exact reference is `reference_linear` over
`reference_weight`: the same integers with the bfloat16-rounded scale and zero, activations
rounded to bfloat16, a float32 matmul, the result rounded to bfloat16; the tests compare
the two, and compare `reference_weight` with gguf's dequantizer within that rounding.

Many rows at once (a prefill) run faster as a bfloat16 matmul of the decoded matrix than
through this kernel (docs/executor.md): `dequantize_bf16` gives that matrix.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys

import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType

from engine.runtime.models.gguf_file import permute_rows

GROUP = 32  # weights per (scale, zero) pair: a Q4_0/Q4_1 block, a Q4_K sub-block
INT4 = ":int4"  # suffix of a repacked weight's nibbles in a unit's tensors
SCALES = ":scales"  # suffix of its [K/32, N, 2] bfloat16 scales and zeros
FORMATS = frozenset(
    {GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q4_K}
)
_TILE = 64
_QK_K = 256


@functools.cache
def _layout_is_known() -> bool:
    """Whether this torch's converter lays nibbles out as `pack`'s shuffle does (checked
    once on random integers: the layout is the kernel's business and may change)."""
    q = torch.randint(0, 16, (2 * _TILE, 96), dtype=torch.int32, generator=torch.Generator())
    want = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    tiles = q.to(torch.uint8).view(2, 2, _TILE // 2, 96)
    got = (tiles[:, 0] | (tiles[:, 1] << 4)).transpose(1, 2).reshape(2 * _TILE, 48)
    return want.shape == got.shape and torch.equal(want, got)


def trim_heap() -> None:
    """Give glibc's freed heap pages back to the OS. Repacking a layer frees its stored
    bytes and the shuffle's temporaries between the repacked tensors that stay, and glibc
    keeps such holes: loading the 28 layers of a Qwen2-1.5B shape (790 MiB held) grew the
    process by 1.3 GiB without this, 0.83 GiB with it. No-op off glibc."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # musl and others: nothing to call
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def available() -> bool:
    """Whether this torch has the CPU int4 kernel (torch ≥ 2.5) in the layout known here."""
    return (
        hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu")
        and hasattr(torch.ops.aten, "_convert_weight_to_int4pack_for_cpu")
        and _layout_is_known()
    )


def repackable(*, qtype: GGMLQuantizationType, shape: tuple[int, ...]) -> bool:
    """A 4-bit matrix whose rows come in tiles of 64 (the layout `pack` writes and
    `dequantize_bf16` reads back; other matrices take the int8 form)."""
    return (
        qtype in FORMATS
        and len(shape) == 2
        and shape[0] % _TILE == 0
        and shape[1] % (_QK_K if qtype == GGMLQuantizationType.Q4_K else GROUP) == 0
    )


def _half(raw: torch.Tensor) -> torch.Tensor:
    """(..., 2) uint8 → (...) float32 read as little-endian float16."""
    return raw.contiguous().view(torch.float16).squeeze(-1).float()


def unpack(
    raw: torch.Tensor, *, qtype: GGMLQuantizationType, shape: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(q, scale, zero) of a 4-bit matrix stored as `raw` (its GGUF bytes): integers 0..15
    (uint8, `shape`, row-major as stored) and per group of 32 the float32 scale and zero
    with w = (q − 8) · scale + zero, computed in float32 as gguf's dequantizer does."""
    rows, cols = shape
    if qtype == GGMLQuantizationType.Q4_K:
        blocks = raw.reshape(rows, cols // _QK_K, 144)
        d, dmin = _half(blocks[..., 0:2]), _half(blocks[..., 2:4])
        packed = blocks[..., 4:16].reshape(rows, -1, 3, 4)
        lo, hi, mixed = packed[..., 0, :], packed[..., 1, :], packed[..., 2, :]
        sc = torch.cat((lo & 0x3F, (mixed & 0x0F) | ((lo >> 2) & 0x30)), dim=-1).float()
        mn = torch.cat((hi & 0x3F, (mixed >> 4) | ((hi >> 2) & 0x30)), dim=-1).float()
        scale = (d.unsqueeze(-1) * sc).reshape(rows, -1)  # (rows, cols/32)
        minimum = (dmin.unsqueeze(-1) * mn).reshape(rows, -1)
        qs = blocks[..., 16:].reshape(rows, -1, 4, 1, 32)
        # Each 32 bytes hold two sub-blocks: the low nibbles, then the high ones.
        q = torch.cat((qs & 0x0F, qs >> 4), dim=-2).reshape(rows, cols)
        return q, scale, 8.0 * scale - minimum
    width = 18 if qtype == GGMLQuantizationType.Q4_0 else 20
    blocks = raw.reshape(rows, cols // GROUP, width)
    scale = _half(blocks[..., 0:2])
    qs = blocks[..., width - 16 :]
    # ggml's order inside a block: the 16 low nibbles, then the 16 high ones.
    q = torch.cat((qs & 0x0F, qs >> 4), dim=-1).reshape(rows, cols)
    if qtype == GGMLQuantizationType.Q4_0:
        return q, scale, torch.zeros_like(scale)
    return q, scale, _half(blocks[..., 2:4]) + 8.0 * scale


def _hf_order(
    q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, *, permute_heads: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if not permute_heads:
        return q, scale, zero
    return tuple(permute_rows(t, heads=permute_heads, inverse=True) for t in (q, scale, zero))  # type: ignore[return-value]


def pack(
    q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(nibbles in the kernel's layout, [K/32, N, 2] bfloat16 scales and zeros) of
    integers `q` (uint8 0..15, (N, K), N in tiles of 64) and float32 (N, K/32) scales
    and zeros."""
    rows, cols = q.shape
    # Rows in tiles of 64, each k's 32 bytes holding rows j and j + 32 of the tile: byte
    # shuffles instead of the converter's int32 copy (9× faster at load).
    tiles = q.view(rows // _TILE, 2, _TILE // 2, cols)
    nibbles = (tiles[:, 0] | (tiles[:, 1] << 4)).transpose(1, 2).contiguous().view(rows, cols // 2)
    scales = torch.stack((scale, zero), dim=-1).transpose(0, 1).to(torch.bfloat16).contiguous()
    return nibbles, scales


def repack(
    raw: torch.Tensor,
    *,
    qtype: GGMLQuantizationType,
    shape: tuple[int, int],
    permute_heads: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's (nibbles, scales and zeros) of a 4-bit matrix stored as `raw`, rows
    in Hugging Face order."""
    q, scale, zero = unpack(raw, qtype=qtype, shape=shape)
    return pack(*_hf_order(q, scale, zero, permute_heads=permute_heads))


def unpacked_q(nibbles: torch.Tensor) -> torch.Tensor:
    """`pack`'s integers back from its nibbles: (N, K) uint8."""
    rows, half = nibbles.shape
    cols = half * 2
    tiles = nibbles.view(rows // _TILE, cols, _TILE // 2)
    lo_hi = torch.stack((tiles & 0x0F, tiles >> 4), dim=1)  # (N/64, 2, K, 32)
    return lo_hi.transpose(2, 3).reshape(rows, cols)


def weight_of(nibbles: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The (N, K) float32 matrix the kernel computes with, from `pack`'s result."""
    q = unpacked_q(nibbles)
    rows, cols = q.shape
    s = scales.transpose(0, 1).float()  # (N, K/32, 2)
    w = (q.view(rows, -1, GROUP).float() - 8.0).mul_(s[..., :1]).add_(s[..., 1:])
    return w.view(rows, cols)


def dequantize_bf16(nibbles: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """`weight_of` rounded once to bfloat16: for a bfloat16 matmul of many rows."""
    return weight_of(nibbles, scales).to(torch.bfloat16)


def linear(
    x: torch.Tensor, *, nibbles: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """x @ W.T + bias with W held as `repack`'s result; x's dtype in and out."""
    flat = x.reshape(-1, x.shape[-1]).to(torch.bfloat16).contiguous()
    y = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, nibbles, GROUP, scales)
    y = y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])
    return y if bias is None else y.add_(bias)


def reference_weight(
    raw: torch.Tensor,
    *,
    qtype: GGMLQuantizationType,
    shape: tuple[int, int],
    permute_heads: int = 0,
) -> torch.Tensor:
    """The float32 matrix the kernel computes with: the file's integers with their scale
    and zero rounded to bfloat16."""
    q, scale, zero = _hf_order(*unpack(raw, qtype=qtype, shape=shape), permute_heads=permute_heads)
    rows, cols = shape
    s = scale.to(torch.bfloat16).float().unsqueeze(-1)
    z = zero.to(torch.bfloat16).float().unsqueeze(-1)
    return ((q.float() - 8.0).reshape(rows, -1, GROUP) * s + z).reshape(rows, cols)


def reference_linear(
    x: torch.Tensor, *, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """`linear`'s arithmetic done by dequantize-then-matmul (`weight` from
    `reference_weight`): bfloat16 activations in, float32 sums, bfloat16 out."""
    y = F.linear(x.to(torch.bfloat16).float(), weight).to(torch.bfloat16).to(x.dtype)
    return y if bias is None else y.add_(bias)
