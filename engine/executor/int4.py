"""Q4_0 weights computed by torch's int4 kernel on the CPU, without decoding per step.

A Q4_0 matrix is repacked once (at load, or in the copy thread for a streamed layer) into
the layout of `torch.ops.aten._weight_int4pack_mm_for_cpu` (the kernel gpt-fast and
torchao use): the same 4-bit integers, group 32, and one scale per group with zero 0, so
a weight is (q − 8) · d as in Q4_0. Each step then reads 0.625 bytes a weight (the nibbles
and the scale/zero pairs) instead of decoding 4 bytes of float32 and reading them again.

What differs from Q4_0's own arithmetic, and so what the reference is. The kernel takes
bfloat16 activations and bfloat16 scales and returns bfloat16 (measured on this project's
CPU, an AMD EPYC with AVX-512 BF16, 2 threads, one 8960×1536 matrix: 0.46 ms at B=1 and
1.5 ms at B=8 in bf16, against 14 / 169 ms with float16 activations and 25 / 167 ms with
float32, and 5 ms for a float32 matmul of the decoded matrix; docs/executor.md). Q4_0's
float16 scales rounded to bfloat16 are not the same weights: they differ by up to 2^-9
relative. So the kernel's exact reference is `reference_linear`: the same integers times
the bfloat16-rounded scales, dequantized to float32, activations rounded to bfloat16,
a float32 matmul, the result rounded to bfloat16. It differs from the kernel only in the
order of the float32 sums; the tests compare the two, and the greedy tokens of whole
models. Against the float16-scale float32 reference (decode="layer") tokens are compared
by the benchmark and reported, not promised.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys

import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType

from engine.models.gguf_file import permute_rows

GROUP = 32  # Q4_0's block: 32 weights, one float16 scale, 16 bytes of nibbles
_BLOCK_BYTES = 18
INT4 = ":int4"  # suffix of a repacked weight's nibbles in a unit's tensors
SCALES = ":scales"  # suffix of its [K/32, N, 2] bfloat16 scales and zeros


_TILE = 64


@functools.cache
def _layout_is_known() -> bool:
    """Whether this torch's converter lays nibbles out as `repack`'s shuffle does (checked
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
    """Whether this torch has the CPU int4 kernel (torch ≥ 2.5)."""
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu") and hasattr(
        torch.ops.aten, "_convert_weight_to_int4pack_for_cpu"
    )


def repackable(*, qtype: GGMLQuantizationType, shape: tuple[int, ...]) -> bool:
    # The converter takes rows in multiples of 16 (a 789-token vocabulary's head is not).
    return (
        qtype == GGMLQuantizationType.Q4_0
        and len(shape) == 2
        and shape[0] % 16 == 0
        and shape[1] % GROUP == 0
    )


def unpack_q4_0(
    raw: torch.Tensor, *, shape: tuple[int, int], permute_heads: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, d): a Q4_0 matrix's integers 0..15 (uint8, `shape`) and its float16 scales as
    float32 (N, K/32), rows in Hugging Face order."""
    rows, cols = shape
    blocks = raw.reshape(rows, cols // GROUP, _BLOCK_BYTES)
    d = blocks[..., :2].contiguous().view(torch.float16).reshape(rows, -1).float()
    qs = blocks[..., 2:]
    # ggml's order inside a block: the 16 low nibbles, then the 16 high ones.
    q = torch.cat((qs & 0x0F, qs >> 4), dim=-1).reshape(rows, cols)
    if permute_heads:
        q = permute_rows(q, heads=permute_heads, inverse=True)
        d = permute_rows(d, heads=permute_heads, inverse=True)
    return q, d


def repack(
    raw: torch.Tensor, *, shape: tuple[int, int], permute_heads: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(nibbles in the kernel's layout, [K/32, N, 2] bfloat16 scales and zeros) of a
    Q4_0 matrix stored as `raw` (its GGUF bytes)."""
    q, d = unpack_q4_0(raw, shape=shape, permute_heads=permute_heads)
    rows, cols = shape
    if rows % _TILE == 0 and _layout_is_known():
        # Rows in tiles of 64, each k's 32 bytes holding rows j and j + 32 of the tile:
        # byte shuffles instead of the converter's int32 copy (9× faster at load, and
        # cheap enough for the copy thread to repack a streamed layer one layer ahead).
        tiles = q.view(rows // _TILE, 2, _TILE // 2, cols)
        nibbles = (tiles[:, 0] | (tiles[:, 1] << 4)).transpose(1, 2)
        nibbles = nibbles.contiguous().view(rows, cols // 2)
    else:
        nibbles = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32), 1)
    scales = torch.stack((d, torch.zeros_like(d)), dim=-1).transpose(0, 1).contiguous()
    return nibbles, scales.to(torch.bfloat16)


def linear(
    x: torch.Tensor, *, nibbles: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """x @ W.T + bias with W held as `repack`'s result; x's dtype in and out."""
    flat = x.reshape(-1, x.shape[-1]).to(torch.bfloat16).contiguous()
    y = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, nibbles, GROUP, scales)
    y = y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])
    return y if bias is None else y.add_(bias)


def reference_weight(raw: torch.Tensor, *, shape: tuple[int, int], permute_heads: int = 0):
    """The float32 matrix the kernel computes with: Q4_0's integers times its scales
    rounded to bfloat16 (exact in float32)."""
    q, d = unpack_q4_0(raw, shape=shape, permute_heads=permute_heads)
    d = d.to(torch.bfloat16).float()
    rows, cols = shape
    return ((q.float() - 8.0).reshape(rows, -1, GROUP) * d.unsqueeze(-1)).reshape(rows, cols)


def reference_linear(
    x: torch.Tensor, *, weight: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """`linear`'s arithmetic done by dequantize-then-matmul (`weight` from
    `reference_weight`): bfloat16 activations in, float32 sums, bfloat16 out."""
    y = F.linear(x.to(torch.bfloat16).float(), weight).to(torch.bfloat16).to(x.dtype)
    return y if bias is None else y.add_(bias)
